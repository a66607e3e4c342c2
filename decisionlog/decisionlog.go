// Package decisionlog writes the evidence log: one JSON line per decision
// record, from a dedicated zap logger named "yesguard.decisions".
//
// Each line carries the record, marshalled by protojson with the proto's
// field names, as a nested object under "decision":
//
//	{"level":"info","ts":"2025-01-02T03:04:05.6Z","logger":"yesguard.decisions","msg":"decision","decision":{"decision_id":"01J...","outcome":"OUTCOME_REFUSE",...}}
//
// Rules that hold:
//   - Write never blocks and never fails the request: records go to a
//     bounded queue drained by one goroutine; when the queue is full, or
//     the log is closed, the record is dropped and counted
//     (yesguard_decision_log_dropped_total).
//   - Lines are written in the order their records were queued, one write
//     per line, so a line is never split across writes.
//   - Close writes everything queued before it, then syncs, bounded by its
//     context; what it cannot write in time is dropped and counted.
package decisionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/yesguard/yesguard/metrics"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// LoggerName names the decision logger in every line.
const LoggerName = "yesguard.decisions"

// DefaultQueueSize is how many records may wait to be written.
const DefaultQueueSize = 8192

// errorLogEvery bounds how often a failing writer is reported.
const errorLogEvery = 10 * time.Second

// Option configures a Logger.
type Option func(*options)

type options struct {
	queueSize int
	log       *zap.Logger
	closer    io.Closer
}

// WithQueueSize sets how many records may wait to be written
// (DefaultQueueSize when n < 1).
func WithQueueSize(n int) Option { return func(o *options) { o.queueSize = n } }

// WithLogger sets the operational logger, to which write failures are
// reported (at most once every 10s). The default discards them.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// withCloser makes Close close c after the final sync (the file Open made).
func withCloser(c io.Closer) Option { return func(o *options) { o.closer = c } }

// Logger is a service.DecisionSink writing the evidence log (the check is
// in package server, so that this package does not depend on service). It
// is safe for concurrent use.
type Logger struct {
	core    zapcore.Core
	out     zapcore.WriteSyncer
	m       *Metrics
	log     *zap.Logger
	closer  io.Closer
	marshal protojson.MarshalOptions

	// mu guards closed and sends on q: Write holds it for reading so that
	// Close, holding it for writing, never closes q under a sender.
	mu     sync.RWMutex
	closed bool
	q      chan entry

	// abandon tells the drain goroutine to drop, not write, what is left:
	// set when Close's context ends first.
	abandon atomic.Bool
	done    chan struct{}
	// compact is the drain goroutine's buffer.
	compact bytes.Buffer

	closeOnce sync.Once
	closeErr  error
}

// Metrics are a Logger's collectors.
type Metrics struct {
	Written prometheus.Counter
	Dropped prometheus.Counter
}

// NewMetrics registers a Logger's collectors on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		Written: metrics.NewCounter(reg, metrics.DecisionLogWritten),
		Dropped: metrics.NewCounter(reg, metrics.DecisionLogDropped),
	}
}

// New starts a logger writing to w. m may be nil.
func New(w zapcore.WriteSyncer, m *Metrics, opts ...Option) *Logger {
	o := options{queueSize: DefaultQueueSize}
	for _, opt := range opts {
		opt(&o)
	}
	if o.queueSize < 1 {
		o.queueSize = DefaultQueueSize
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	l := &Logger{
		core:    zapcore.NewCore(zapcore.NewJSONEncoder(encoderConfig()), w, zapcore.InfoLevel),
		out:     w,
		m:       m,
		log:     o.log,
		closer:  o.closer,
		marshal: protojson.MarshalOptions{UseProtoNames: true},
		q:       make(chan entry, o.queueSize),
		done:    make(chan struct{}),
	}
	go l.drain()
	return l
}

// Open starts a logger writing to path: "", "-" or "stdout" mean standard
// output, "stderr" standard error, anything else a file opened for
// appending (created with mode 0640). Close closes the file.
func Open(path string, m *Metrics, opts ...Option) (*Logger, error) {
	switch path {
	case "", "-", "stdout":
		return New(unsynced{os.Stdout}, m, opts...), nil
	case "stderr":
		return New(unsynced{os.Stderr}, m, opts...), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open decision log: %w", err)
	}
	return New(f, m, append(opts, withCloser(f))...), nil
}

// entry is one queued line: the record, and who asked for it.
type entry struct {
	d      *yesguardv1.Decision
	caller string
}

// Write queues d to be logged. It never blocks: when the queue is full or
// the logger is closed, d is dropped and counted. d must not be modified
// after Write.
func (l *Logger) Write(d *yesguardv1.Decision) { l.WriteCaller(d, "") }

// WriteCaller is Write with the caller the record was made for (the
// token's name and roles, the client certificate's subject: never a
// token), logged beside the record as "caller".
func (l *Logger) WriteCaller(d *yesguardv1.Decision, caller string) {
	if d == nil {
		return
	}
	l.mu.RLock()
	if !l.closed {
		select {
		case l.q <- entry{d, caller}:
			l.mu.RUnlock()
			return
		default:
		}
	}
	l.mu.RUnlock()
	l.dropped(1)
}

// Close stops accepting records, writes those queued, syncs the writer and
// closes the file Open made. When ctx ends first, the records not yet
// written are dropped and counted, and Close returns ctx's error. Calls
// after the first return the first one's result.
func (l *Logger) Close(ctx context.Context) error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.q)
		l.mu.Unlock()

		select {
		case <-l.done:
		case <-ctx.Done():
			// The drain goroutine may be stuck in a write; it drops the
			// rest once that returns. The file stays open under it.
			l.abandon.Store(true)
			l.closeErr = fmt.Errorf("close decision log: %d records not written: %w", len(l.q), ctx.Err())
			return
		}
		var errs []error
		if err := l.out.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync decision log: %w", err))
		}
		if l.closer != nil {
			if err := l.closer.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close decision log: %w", err))
			}
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

func (l *Logger) drain() {
	defer close(l.done)
	var (
		failed  int
		lastLog time.Time
	)
	for e := range l.q {
		if l.abandon.Load() {
			l.dropped(1)
			continue
		}
		if err := l.writeLine(e.d, e.caller); err != nil {
			failed++
			if now := time.Now(); now.Sub(lastLog) >= errorLogEvery {
				l.log.Error("decision log write failed", zap.Error(err), zap.Int("failed_lines", failed))
				lastLog, failed = now, 0
			}
			continue
		}
		if l.m != nil {
			l.m.Written.Inc()
		}
	}
}

// writeLine writes one line through the core directly, rather than through
// a zap.Logger, so that a failed write is seen (and not counted as written).
func (l *Logger) writeLine(d *yesguardv1.Decision, caller string) error {
	b, err := l.marshal.Marshal(d)
	if err != nil {
		return fmt.Errorf("marshal decision %q: %w", d.GetDecisionId(), err)
	}
	// protojson adds random spaces, on purpose, so that nobody relies on
	// its bytes; the log wants them compact.
	l.compact.Reset()
	if err := json.Compact(&l.compact, b); err != nil {
		return fmt.Errorf("compact decision %q: %w", d.GetDecisionId(), err)
	}
	ent := zapcore.Entry{
		Level:      zapcore.InfoLevel,
		Time:       time.Now(),
		LoggerName: LoggerName,
		Message:    "decision",
	}
	fields := []zapcore.Field{zap.Reflect("decision", rawJSON(l.compact.Bytes()))}
	if caller != "" {
		fields = append(fields, zap.String("caller", caller))
	}
	return l.core.Write(ent, fields)
}

func (l *Logger) dropped(n int) {
	if l.m != nil {
		l.m.Dropped.Add(float64(n))
	}
}

func encoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		LevelKey:            "level",
		TimeKey:             "ts",
		NameKey:             "logger",
		MessageKey:          "msg",
		LineEnding:          zapcore.DefaultLineEnding,
		EncodeLevel:         zapcore.LowercaseLevelEncoder,
		EncodeTime:          zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration:      zapcore.StringDurationEncoder,
		EncodeName:          zapcore.FullNameEncoder,
		NewReflectedEncoder: newReflectedEncoder,
	}
}

// rawJSON is JSON that the encoder embeds as it is: it is valid, compact
// JSON already, so it is neither re-escaped nor re-validated.
type rawJSON []byte

// reflectedEncoder embeds rawJSON verbatim and encodes anything else as
// zap's default does.
type reflectedEncoder struct {
	w   io.Writer
	enc *json.Encoder
}

func newReflectedEncoder(w io.Writer) zapcore.ReflectedEncoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return reflectedEncoder{w: w, enc: enc}
}

func (e reflectedEncoder) Encode(v any) error {
	if raw, ok := v.(rawJSON); ok {
		_, err := e.w.Write(raw)
		return err
	}
	return e.enc.Encode(v)
}

// unsynced is a standard stream: fsync on a terminal or pipe fails or does
// nothing, and the stream has no buffer to flush.
type unsynced struct{ io.Writer }

func (unsynced) Sync() error { return nil }
