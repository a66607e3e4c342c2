package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/metrics"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/service"
	"github.com/yesguard/yesguard/transcript"
)

// The JetStream names the guard creates (or updates) on its NATS. The
// transcript stream of a subject prefix other than the default is
// TranscriptStream_<PREFIX> (TranscriptStreamName), so that shards on one
// NATS each have their own; the decision stream and the state bucket are
// shared (their keys and subjects hold the call id).
const (
	TranscriptStream = "YESGUARD_TRANSCRIPT"
	DecisionStream   = "YESGUARD_DECISIONS"
	StateBucket      = "yesguard_state"
)

// TranscriptStreamName is the transcript stream of a subject prefix.
func TranscriptStreamName(prefix string) string {
	if prefix == DefaultSubjectPrefix {
		return TranscriptStream
	}
	b := []byte(strings.ToUpper(prefix))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return TranscriptStream + "_" + string(b)
}

// jsSetupStep is the pause between attempts to set up the JetStream state.
const jsSetupStep = 500 * time.Millisecond

// jsSetupTimeout bounds one attempt to set up the JetStream state.
const jsSetupTimeout = 20 * time.Second

// errStateNotReady is what the book and the store answer until the
// JetStream state is set up: the engine refuses, the service answers
// Unavailable.
var errStateNotReady = errors.New("the shared state (JetStream) is not set up yet")

// jsState is a server's JetStream state, set up in the background until it
// succeeds (an external NATS may be unreachable at start). Until then the
// book and the store fail, and the feed is behind: every Check refuses.
type jsState struct {
	book     atomic.Pointer[dedupe.KV]
	store    atomic.Pointer[decisions.Stream]
	ingester atomic.Pointer[transcript.StreamIngester]
	ledger   atomic.Pointer[approval.Ledger]
	// writer stores PublishTranscript's events; set once the transcript
	// stream is ensured.
	writer atomic.Pointer[transcript.Writer]
	// ready is closed once the first four are set.
	ready chan struct{}
	// lastErr is why the last set-up attempt failed ("" before any).
	// noJetStream is closed when NATS answered that it has no JetStream:
	// no retry will succeed, and Start fails at once saying so.
	lastErr     atomic.Pointer[string]
	noJetStream chan struct{}
	noJSOnce    sync.Once
}

// errNoJetStream: the NATS server (or the guard's account) has no
// JetStream, which the JetStream state needs.
var errNoJetStream = errors.New("NATS has no JetStream (the server runs without -js / jetstream {}, or the guard's account has none): --state jetstream needs it; enable JetStream, or run one replica with --state memory")

// setUpError says why the state is not set up yet, for the feed's reason
// and Start's error.
func (js *jsState) setUpError() string {
	if p := js.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// stateBook is the dedupe.Book of the JetStream state, failing until it is
// set up.
type stateBook struct{ js *jsState }

var _ dedupe.Book = stateBook{}

func (b stateBook) Lookup(ctx context.Context, req dedupe.Request) (dedupe.Verdict, dedupe.Reservation, error) {
	if kv := b.js.book.Load(); kv != nil {
		return kv.Lookup(ctx, req)
	}
	return dedupe.OK, nil, errStateNotReady
}

func (b stateBook) Allow(ctx context.Context, req dedupe.Request) (dedupe.Verdict, dedupe.Reservation, error) {
	if kv := b.js.book.Load(); kv != nil {
		return kv.Allow(ctx, req)
	}
	return dedupe.OK, nil, errStateNotReady
}

func (b stateBook) Complete(ctx context.Context, id, owner string, result *structpb.Struct, failed bool) (dedupe.Key, error) {
	if kv := b.js.book.Load(); kv != nil {
		return kv.Complete(ctx, id, owner, result, failed)
	}
	return dedupe.Key{}, errStateNotReady
}

var _ dedupe.Asks = stateBook{}

func (b stateBook) IssueAsk(ctx context.Context, key dedupe.Key, a dedupe.Ask) error {
	if kv := b.js.book.Load(); kv != nil {
		return kv.IssueAsk(ctx, key, a)
	}
	return errStateNotReady
}

func (b stateBook) AsksFor(ctx context.Context, key dedupe.Key, now time.Time) ([]dedupe.Ask, error) {
	if kv := b.js.book.Load(); kv != nil {
		return kv.AsksFor(ctx, key, now)
	}
	return nil, errStateNotReady
}

// stateWriter is the service.TranscriptWriter of the JetStream state,
// failing until the transcript stream is set up.
type stateWriter struct{ js *jsState }

var _ service.TranscriptWriter = stateWriter{}

func (w stateWriter) Write(ctx context.Context, ev transcript.Event, guardSequenced bool) (transcript.Written, error) {
	if tw := w.js.writer.Load(); tw != nil {
		return tw.Write(ctx, ev, guardSequenced)
	}
	return transcript.Written{}, service.ErrNoTranscriptStream
}

// stateStore is the decisions.Store of the JetStream state.
type stateStore struct{ js *jsState }

var _ decisions.Store = stateStore{}

func (s stateStore) Add(ctx context.Context, d *yesguardv1.Decision) error {
	if st := s.js.store.Load(); st != nil {
		return st.Add(ctx, d)
	}
	return errStateNotReady
}

func (s stateStore) List(ctx context.Context, call string, size int, token string) ([]*yesguardv1.Decision, string, error) {
	if st := s.js.store.Load(); st != nil {
		return st.List(ctx, call, size, token)
	}
	return nil, "", errStateNotReady
}

// Recent serves the timeline page's list of calls (decisions.Store on
// main has it).
func (s stateStore) Recent(ctx context.Context, limit int) ([]*yesguardv1.Decision, error) {
	if st := s.js.store.Load(); st != nil {
		return st.Recent(ctx, limit)
	}
	return nil, errStateNotReady
}

// settle is the engine's Settle: with the JetStream state, it waits for
// this replica to have applied every event of the call the stream holds.
func (s *Server) settle(ctx context.Context, callID string) error {
	if s.js == nil {
		return nil
	}
	in := s.js.ingester.Load()
	if in == nil {
		return errStateNotReady
	}
	return in.Settle(ctx, callID)
}

// registerMetrics registers the JetStream state's series on reg: read
// from the ingester and the decision store when scraped (0 until they are
// set up).
func (js *jsState) registerMetrics(reg prometheus.Registerer) {
	metrics.NewGaugeFunc(reg, metrics.TranscriptCaughtUp, func() float64 {
		if in := js.ingester.Load(); in != nil && in.CaughtUp() {
			return 1
		}
		return 0
	})
	metrics.NewGaugeFunc(reg, metrics.TranscriptPending, func() float64 {
		if in := js.ingester.Load(); in != nil {
			return float64(in.Pending())
		}
		return 0
	})
	metrics.NewGaugeFunc(reg, metrics.DecisionsQueued, func() float64 {
		if st := js.store.Load(); st != nil {
			return float64(st.Queued())
		}
		return 0
	})
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metrics.DecisionsDropped.Name, Help: metrics.DecisionsDropped.Help}, func() float64 {
		if st := js.store.Load(); st != nil {
			return float64(st.Dropped())
		}
		return 0
	}))
}

// setUpJetStream creates or updates the streams and the bucket, then
// starts the book and the transcript ingester, retrying until it succeeds
// or ctx ends.
func (s *Server) setUpJetStream(ctx context.Context) {
	for {
		err := s.trySetUpJetStream(ctx)
		if err == nil {
			close(s.js.ready)
			s.updateFeedHealth()
			// Then keep the engine's clock on NATS's (clock.go).
			if js, err := jetstream.New(s.nc.Load()); err == nil {
				s.clock.run(ctx, js, TranscriptStreamName(s.cfg.SubjectPrefix), s.log)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		msg := err.Error()
		s.js.lastErr.Store(&msg)
		if errors.Is(err, errNoJetStream) {
			s.js.noJSOnce.Do(func() { close(s.js.noJetStream) })
			s.log.Error("JetStream state cannot be set up; retrying; every Check is refused meanwhile", zap.Error(err))
		} else {
			s.log.Warn("JetStream state not set up yet; retrying; every Check is refused meanwhile", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(jsSetupStep):
		}
	}
}

func (s *Server) trySetUpJetStream(ctx context.Context) error {
	nc := s.nc.Load()
	if !nc.IsConnected() {
		return errors.New("NATS is not connected")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, jsSetupTimeout)
	defer cancel()
	// Without JetStream every request below would time out; ask first, so
	// that the cause is named.
	if _, err := js.AccountInfo(actx); errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w: %v", errNoJetStream, err)
	}
	c := &s.cfg
	tstream := TranscriptStreamName(c.SubjectPrefix)
	tcfg := transcript.StreamConfig(tstream, c.SubjectPrefix, c.TranscriptRetention, c.TranscriptMaxBytes, int64(c.Limits.MaxEventsPerCall), c.DuplicateWindow, c.JSReplicas)
	// A message larger than the limits let an event be is refused at the
	// publish (the publisher's ack says so), never stored.
	tcfg.MaxMsgSize = int32(min(c.Limits.MaxEventBytes(), 1<<30))
	// Replicas starting together each ensure the objects (jsobjects.go):
	// no create is trusted to answer.
	for _, obj := range []jsObject{
		streamObject(js, tcfg),
		streamObject(js, decisions.StreamConfig(DecisionStream, decisions.DefaultSubjectPrefix,
			c.DecisionRetention, c.DecisionMaxBytes, int64(c.DecisionsPerCall), c.JSReplicas)),
		bucketObject(js, dedupe.BucketConfig(StateBucket, c.JSReplicas)),
		bucketObject(js, ledgerBucketConfig(c.JSReplicas)),
	} {
		if err := ensure(actx, s.log, obj); err != nil {
			return err
		}
	}
	if s.ingestNC != nil && s.js.writer.Load() == nil {
		ijs, err := jetstream.New(s.ingestNC)
		if err != nil {
			return fmt.Errorf("gRPC transcript ingestion: %w", err)
		}
		s.js.writer.Store(transcript.NewWriter(ijs, c.SubjectPrefix, s.store, c.Limits, s.log, s.tmetrics))
	}
	kv, err := openBucket(actx, js, StateBucket)
	if err != nil {
		return fmt.Errorf("state bucket %s: %w", StateBucket, err)
	}
	if s.js.book.Load() == nil {
		book, err := dedupe.NewKV(actx, js, kv, s.reg)
		if err != nil {
			return err
		}
		s.js.book.Store(book)
	}
	if s.js.store.Load() == nil {
		st := decisions.NewStream(js, DecisionStream, decisions.DefaultSubjectPrefix)
		// ListDecisions and the call pages read on a connection of their
		// own: a slow reader of large pages can never slow, or get
		// dropped, the connection the Checks run on.
		if ajs, err := s.auditJetStream(); err != nil {
			s.log.Warn("the decision records are read on the guard's own NATS connection", zap.Error(err))
		} else {
			st.ReadOn(ajs)
		}
		// Records queued in an outage survive a crash (spool.go).
		spool := filepath.Join(c.DataDir, "spool")
		if n, err := st.OpenSpool(spool); err != nil {
			s.log.Warn("decision records queued in an outage are kept in memory only (they are in the decision log)", zap.Error(err))
		} else if n > 0 {
			s.log.Info("decision records left queued by an earlier run are stored again", zap.Int("records", n), zap.String("spool", spool))
		}
		s.js.store.Store(st)
	}
	if err := s.setUpLedger(actx, js); err != nil {
		return err
	}
	in := transcript.NewStreamIngester(js, tstream, c.SubjectPrefix, s.store, c.Limits, s.log, s.tmetrics,
		transcript.StreamOptions{OnChange: s.updateFeedHealth, MaxLag: c.TranscriptMaxLag})
	if err := in.Start(actx); err != nil {
		return err
	}
	s.js.ingester.Store(in)
	if s.ns != nil && in.HeldAtStart() > 0 {
		// The embedded server restarted with this process (a crash, a
		// redeploy): the pipeline's publishers were connected to it and
		// are reconnecting now.
		s.startGrace("the embedded NATS server restarted on a transcript stream that holds events")
	}
	// The first Check already measures on NATS's clock (clock.go).
	if off, err := s.clock.sample(actx, js, tstream); err != nil {
		s.log.Warn("could not compare this replica's clock with NATS's yet; using its own", zap.Error(err))
	} else {
		s.log.Info("clock compared with NATS's", zap.Duration("offset", off))
	}
	s.log.Info("JetStream state set up",
		zap.String("transcript_stream", tstream), zap.String("decision_stream", DecisionStream),
		zap.String("bucket", StateBucket), zap.String("approvals_bucket", ApprovalsBucket), zap.Int("replicas", c.JSReplicas))
	return nil
}

// auditJetStream connects the audit connection (once), on which the
// decision records are read: the guard's credentials and inbox, no
// handlers (its state drives no health), reconnecting as the main one.
func (s *Server) auditJetStream() (jetstream.JetStream, error) {
	nc := s.auditNC.Load()
	if nc == nil {
		opts := append([]nats.Option{
			nats.Name("yesguard-audit"),
			nats.CustomInboxPrefix(InboxPrefix),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(natsReconnectWait),
			nats.ReconnectBufSize(-1),
		}, s.natsAuth...)
		if s.ns != nil {
			opts = append(opts, nats.InProcessServer(s.ns))
		} else {
			opts = append(opts, nats.RetryOnFailedConnect(true))
		}
		c, err := nats.Connect(s.natsURL, opts...)
		if err != nil {
			return nil, fmt.Errorf("audit connection: %s", auth.RedactURLs(err.Error()))
		}
		s.auditNC.Store(c)
		nc = c
	}
	return jetstream.New(nc)
}

// waitJetStream waits, within ctx, for the state to be set up.
func (s *Server) waitJetStream(ctx context.Context) error {
	select {
	case <-s.js.ready:
	case <-s.js.noJetStream:
		return errors.New(s.js.setUpError())
	case <-ctx.Done():
		if why := s.js.setUpError(); why != "" {
			return fmt.Errorf("%w; the last attempt: %s", ctx.Err(), why)
		}
		return ctx.Err()
	}
	return nil
}

// waitCaughtUp waits, at most s.catchUpWait (catchUpStartWait) and within
// ctx, for the transcript to be caught up, so that the guard serves from
// its first Check after a short replay. After a long one it returns with
// the replay still under way (logged): the guard listens and refuses
// until it is done.
func (s *Server) waitCaughtUp(ctx context.Context) {
	in := s.js.ingester.Load()
	limit := catchUpStartWait
	if s.catchUpWait != nil {
		limit = *s.catchUpWait
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	for !in.CaughtUp() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.log.Warn("still replaying the transcript stream; listening meanwhile: health is NOT_SERVING and every Check is refused until it is caught up",
				zap.Uint64("stream_seq_applied", in.Applied()), zap.Uint64("pending", in.Pending()))
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stopJetStream stops the ingester and the book, and gives the queued
// records until ctx ends.
func (s *Server) stopJetStream(ctx context.Context) error {
	var errs []error
	if in := s.js.ingester.Load(); in != nil {
		if err := in.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if b := s.js.book.Load(); b != nil {
		b.Close()
	}
	if st := s.js.store.Load(); st != nil {
		// Records the stream never took are in the decision log; losing
		// them from the stream is reported, and does not fail the stop.
		if err := st.Close(ctx); err != nil {
			s.log.Error("decision records queued for the decision stream were not stored before the stop (they are in the decision log)", zap.Error(err))
		}
	}
	if nc := s.auditNC.Load(); nc != nil {
		nc.Close()
	}
	return errors.Join(errs...)
}
