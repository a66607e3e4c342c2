package transcript

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Acked publishes: why. A core publish is fire and forget: under a flood
// the server may drop it at the transcript stream's ingest queue without a
// word to its publisher, and a caller's "No, wait" lost that way leaves the
// yes before it standing. A JetStream publish is acknowledged once the
// stream has stored the event, so a publisher that waits for the ack and
// retries until it gets one loses nothing silently; the stream stores a
// retry once (Nats-Msg-Id within its duplicate window).
const (
	// AckAttempts bounds the tries of one acked publish.
	AckAttempts = 3
	// AckWait is how long one try waits for its ack.
	AckWait = 2 * time.Second
)

// ErrNoStream is PublishAcked's error when no JetStream stream stores the
// subject (the guard's memory state, or its stream not set up yet), so
// nothing can acknowledge the event.
var ErrNoStream = errors.New("no JetStream stream stores the transcript subject, so nothing acknowledges the event")

// MsgID is the event's Nats-Msg-Id, as the README's event contract and the
// clients write it: <call_id>.<source>.<epoch>.<seq>; "" for an event
// without a seq (nothing tells its repeats apart).
func MsgID(ev Event) string {
	if ev.Seq == 0 {
		return ""
	}
	return ev.CallID + "." + ev.Source + "." + strconv.FormatUint(ev.Epoch, 10) + "." + strconv.FormatUint(ev.Seq, 10)
}

// PublishAcked sends one message as a JetStream publish and waits for the
// stream's ack: up to AckAttempts tries of AckWait each, within ctx, the
// same msgID (when not "") every time. It returns ErrNoStream (wrapped)
// when no stream answers at all.
func PublishAcked(ctx context.Context, js jetstream.JetStream, subject string, data []byte, msgID string) (*jetstream.PubAck, error) {
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	var last error
	for attempt := 1; attempt <= AckAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, AckWait)
		ack, err := js.Publish(actx, subject, data, opts...)
		cancel()
		switch {
		case err == nil:
			return ack, nil
		case errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders):
			return nil, fmt.Errorf("publish %s: %w", subject, ErrNoStream)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("publish %s: no ack after %d tries: %w", subject, attempt, ctx.Err())
		}
		last = err
	}
	return nil, fmt.Errorf("publish %s: no ack after %d tries of %v: %w", subject, AckAttempts, AckWait, last)
}

// GuardSource is the source of the events a Writer numbers when they name
// none.
const GuardSource = "grpc"

// Results of yesguard_transcript_grpc_events_total.
const (
	WriteStored    = "stored"
	WriteDuplicate = "duplicate"
	WriteRejected  = "rejected"
	WriteFailed    = "failed"
)

// ErrNumbering is Write's error for an event whose seq, epoch and source
// do not fit the numbering asked for: the caller's mistake, said before
// anything is stored.
var ErrNumbering = errors.New("transcript event numbering")

// Written is where the stream stored one event.
type Written struct {
	Source    string
	Epoch     uint64
	Seq       uint64
	StreamSeq uint64
	Duplicate bool
}

// Writer writes transcript events into the transcript stream for a
// publisher that reaches the guard over gRPC, as the JSON a NATS publisher
// would send, with the same Nats-Msg-Id.
//
// Rules that hold:
//   - An event is checked by Decode, with the limits of the guard's
//     ingesters, before it is sent: an event NATS would reject is not
//     stored; it is counted and logged as the ingesters count a reject,
//     and makes its call uncertain on this replica (it may have carried
//     the caller's "Wait, no.").
//   - Write returns once the stream acknowledged the event, never before.
//   - Numbering by the guard (guardSequenced): one counter per (call,
//     source), under the Writer's epoch (its start in ms, times 1000, plus
//     a random part, so that two replicas started in the same ms differ).
//     A counter is held locked from the seq's assignment until the
//     stream's answer, so seqs are stored in their order; a seq whose
//     event was rejected is given back, and one whose publish failed is
//     not (the event may be stored: its absence is then a gap, which fails
//     closed). Counters are forgotten on call_ended and after IdleTTL
//     without an event.
type Writer struct {
	js     jetstream.JetStream
	prefix string
	store  *Store
	limits Limits
	log    *zap.Logger
	m      *Metrics
	epoch  uint64
	now    func() time.Time

	mu        sync.Mutex
	counters  map[counterKey]*counter
	lastSweep time.Time
}

type counterKey struct{ call, source string }

type counter struct {
	mu   sync.Mutex
	last uint64
	used time.Time
	gone bool // forgotten: a writer that finds it so looks again
}

// NewWriter wires a writer of the stream that stores <prefix>.> on js.
func NewWriter(js jetstream.JetStream, prefix string, store *Store, limits Limits, log *zap.Logger, m *Metrics) *Writer {
	limits.SetDefaults()
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("transcript").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, logTick, logFirst, 0)
	}))
	var r [2]byte
	_, _ = rand.Read(r[:])
	epoch := uint64(time.Now().UnixMilli())*1000 + uint64(binary.BigEndian.Uint16(r[:])%1000)
	return &Writer{js: js, prefix: prefix, store: store, limits: limits, log: log, m: m, epoch: epoch,
		now: time.Now, counters: map[counterKey]*counter{}}
}

// Epoch is the epoch of the events the writer numbers.
func (w *Writer) Epoch() uint64 { return w.epoch }

// Write checks ev, numbers it when guardSequenced, and stores it in the
// transcript stream. Its errors: ErrNumbering (wrapped), a *RejectError
// (the event breaks a rule or a limit of the ingesters), or a failed
// publish (ErrNoStream, a missing ack), after which the event may or may
// not be stored.
func (w *Writer) Write(ctx context.Context, ev Event, guardSequenced bool) (Written, error) {
	if !guardSequenced {
		if ev.Source == "" || ev.Epoch == 0 || ev.Seq == 0 {
			w.count(WriteRejected)
			return Written{}, fmt.Errorf("%w: source, epoch and seq are all needed (or let the guard number the events: guard_sequenced)", ErrNumbering)
		}
		return w.send(ctx, ev)
	}
	if ev.Seq != 0 || ev.Epoch != 0 {
		w.count(WriteRejected)
		return Written{}, fmt.Errorf("%w: with guard_sequenced the guard sets seq and epoch: leave them 0", ErrNumbering)
	}
	if ev.Source == "" {
		ev.Source = GuardSource
	}
	c := w.counter(counterKey{ev.CallID, ev.Source})
	defer c.mu.Unlock()
	ev.Epoch, ev.Seq = w.epoch, c.last+1
	out, err := w.send(ctx, ev)
	var re *RejectError
	if !errors.As(err, &re) {
		c.last = ev.Seq // stored, or perhaps stored: never numbered again
	}
	c.used = w.now()
	if ev.Type == TypeCallEnded && err == nil {
		w.forget(counterKey{ev.CallID, ev.Source}, c)
	}
	return out, err
}

// send checks and publishes one numbered event.
func (w *Writer) send(ctx context.Context, ev Event) (Written, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		w.count(WriteRejected)
		return Written{}, fmt.Errorf("encode event: %w", err)
	}
	subject := w.prefix + "." + ev.CallID
	if _, err := Decode(w.prefix, subject, data, w.limits); err != nil {
		w.count(WriteRejected)
		rejected(w.log, w.m, w.store, w.prefix, subject, data, err, zap.String("via", "grpc"))
		return Written{}, err
	}
	ack, err := PublishAcked(ctx, w.js, subject, data, MsgID(ev))
	if err != nil {
		w.count(WriteFailed)
		return Written{}, err
	}
	if ack.Duplicate {
		w.count(WriteDuplicate)
	} else {
		w.count(WriteStored)
	}
	return Written{Source: ev.Source, Epoch: ev.Epoch, Seq: ev.Seq, StreamSeq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// counter returns k's counter, locked, creating it if needed.
func (w *Writer) counter(k counterKey) *counter {
	for {
		w.mu.Lock()
		w.sweep()
		c := w.counters[k]
		if c == nil {
			c = &counter{used: w.now()}
			w.counters[k] = c
		}
		w.mu.Unlock()
		c.mu.Lock()
		if !c.gone {
			return c
		}
		c.mu.Unlock()
	}
}

// forget drops c, which the caller holds locked.
func (w *Writer) forget(k counterKey, c *counter) {
	w.mu.Lock()
	if w.counters[k] == c {
		delete(w.counters, k)
	}
	w.mu.Unlock()
	c.gone = true
}

// sweep drops, at most once per tenth of IdleTTL, the counters not used
// for IdleTTL (the store forgets their calls then too). w.mu is held; a
// counter locked by a writer is left for the next sweep.
func (w *Writer) sweep() {
	now := w.now()
	if now.Sub(w.lastSweep) < w.limits.IdleTTL/10 {
		return
	}
	w.lastSweep = now
	for k, c := range w.counters {
		if !c.mu.TryLock() {
			continue
		}
		if now.Sub(c.used) > w.limits.IdleTTL {
			delete(w.counters, k)
			c.gone = true
		}
		c.mu.Unlock()
	}
}

// Counters is how many (call, source) counters the writer holds.
func (w *Writer) Counters() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.counters)
}

func (w *Writer) count(result string) {
	if w.m != nil && w.m.GRPCEvents != nil {
		w.m.GRPCEvents.WithLabelValues(result).Inc()
	}
}
