package transcript

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// StreamConfig is the transcript stream: every event published on
// <prefix>.>, kept for maxAge, at most maxBytes in all and perCall
// events of one call (Limits.MaxEventsPerCall), with a duplicate window
// in which a message republished with the same Nats-Msg-Id is stored once
// (at-least-once publishers).
//
// Both bounds discard the new message, never an old one: a publish past
// them is refused, and its publisher's ack says so ("maximum bytes
// exceeded", "maximum messages per subject exceeded"), so that it can
// retry with the same Nats-Msg-Id. No event is lost without its publisher
// being told, and a flood on one call is refused at the stream, before the
// guard reads it.
func StreamConfig(name, prefix string, maxAge time.Duration, maxBytes, perCall int64, duplicates time.Duration, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 name,
		Description:          "yesguard: the transcript events of every call",
		Subjects:             []string{prefix + ".>"},
		Retention:            jetstream.LimitsPolicy,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: perCall > 0,
		MaxMsgsPerSubject:    perCall,
		MaxAge:               maxAge,
		MaxBytes:             maxBytes,
		Duplicates:           min(duplicates, maxAge),
		Storage:              jetstream.FileStorage,
		Replicas:             max(replicas, 1),
	}
}

// StreamIngester applies the transcript stream to a store. Each replica
// reads every event through its own consumer, ordered as the client's
// ordered consumer is: an ephemeral in memory, without acks, that the
// ingester recreates, from the stream sequence after the last one it
// applied, whenever it misses heartbeats, skips a delivery or is found
// stalled (consume, restart). No server-side state per replica to clean
// up; a durable would keep a position across restarts, but a restarted
// replica has lost the state that position belongs to, and must rebuild
// it from the stream anyway.
//
// Rules that hold:
//   - Events are applied in stream order, with the stream's timestamp as
//     their arrival (so a rebuilt yes is as old as it was) and their stream
//     sequence naming their utterances alike on every replica.
//   - After Start, and after Resync (a reconnect), it is behind until every
//     message the stream held then has been applied: CaughtUp is false,
//     and the guard refuses with REASON_TRANSCRIPT_GAP.
//   - It is behind, too, while it lags: messages are pending and the last
//     one applied was stored more than MaxLag ago; and when its consumer
//     stalls (probeLive: no answer, or nothing applied while events wait,
//     two probes running; heartbeats missed; a delivery skipped) until it
//     has caught up again on a consumer recreated.
//   - A start replays the last Rebuild of the stream, so that the calls in
//     progress are rebuilt.
//   - Stream sequences are applied without a hole: a jump (events the
//     stream discarded before this replica read them) makes every call
//     held uncertain until its agent speaks again.
type StreamIngester struct {
	js       jetstream.JetStream
	stream   string
	prefix   string
	store    *Store
	limits   Limits
	log      *zap.Logger
	m        *Metrics
	rebuild  time.Duration
	maxLag   time.Duration
	onChange func()

	mu       sync.Mutex
	consumer jetstream.Consumer
	jsStream jetstream.Stream
	cc       jetstream.ConsumeContext
	cancel   context.CancelFunc
	done     chan struct{} // closed when catchUpLoop and fullLoop have returned

	// settling are the waits for a stream sequence to be applied (Settle);
	// nSettling counts them, so that handle looks only when some wait.
	settleMu  sync.Mutex
	settling  settleHeap
	nSettling atomic.Int32
	// heldCur is the request for the stream's last sequence in flight,
	// heldNext the one the Settles that began since share (Settle).
	heldMu            sync.Mutex
	heldCur, heldNext *heldReq
	lookups           chan struct{} // the per-call lookups' slots
	// floor: the consumer started at the stream's end, this sequence; the
	// events up to it are older than the rebuild window.
	floor atomic.Uint64

	replayUntil atomic.Uint64 // messages at or below it are a replay
	applied     atomic.Uint64 // the last stream sequence applied
	pending     atomic.Uint64 // messages pending after it when delivered
	lastStored  atomic.Int64  // its stream timestamp, unix ns
	caughtUp    atomic.Bool
	resync      chan struct{} // a nudge for the catch-up loop
	// stalled says why the liveness probe found the consumer stalled (nil:
	// it did not, since the last catch-up). The probe's counters belong to
	// the catch-up loop's goroutine alone.
	stalled                atomic.Pointer[string]
	probeFails, probeStill int
	probeApplied           uint64
	// full says why the stream counts as full (nil: it does not): it
	// refuses events to their publishers, so every Check refuses.
	full atomic.Pointer[string]

	// start is where the first consumer starts (the rebuild window).
	start time.Time
	// handleMu serialises applying messages; gen names the current
	// consumer, whose messages alone are applied (consume).
	handleMu sync.Mutex
	gen      uint64
	// delivered is the current consumer's last delivery sequence applied
	// (handleMu).
	delivered uint64
	// restartWanted: the consumer was found stalled; the catch-up loop
	// recreates it. infoFails belongs to the catch-up loop's goroutine.
	restartWanted atomic.Bool
	infoFails     int // checkCaughtUp's, in a row

	// beforeHandle, when set (by tests, before Start), runs before each
	// message is handled: a test stalls the consumer with it.
	beforeHandle func(streamSeq uint64)
}

// StreamOptions configure a StreamIngester.
type StreamOptions struct {
	// Rebuild is how far back a start replays the stream (default the
	// limits' IdleTTL: older calls would be evicted anyway).
	Rebuild time.Duration
	// MaxLag: while messages are pending and the last one applied was
	// stored longer ago than this, the ingester is behind (default 1s).
	MaxLag time.Duration
	// OnChange is called when CaughtUp or Behind may have changed (for
	// the health status).
	OnChange func()
}

// NewStreamIngester wires an ingester of stream; Start consumes it.
func NewStreamIngester(js jetstream.JetStream, stream, prefix string, store *Store, limits Limits, log *zap.Logger, m *Metrics, o StreamOptions) *StreamIngester {
	limits.SetDefaults()
	if log == nil {
		log = zap.NewNop()
	}
	if o.Rebuild <= 0 {
		o.Rebuild = limits.IdleTTL
	}
	if o.MaxLag <= 0 {
		o.MaxLag = time.Second
	}
	if o.OnChange == nil {
		o.OnChange = func() {}
	}
	log = log.Named("transcript").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, logTick, logFirst, 0)
	}))
	return &StreamIngester{
		js: js, stream: stream, prefix: prefix, store: store, limits: limits, log: log, m: m,
		rebuild: o.Rebuild, maxLag: o.MaxLag, onChange: o.OnChange, resync: make(chan struct{}, 1),
		lookups: make(chan struct{}, settleLookups),
	}
}

// Start creates the consumer, replaying the last Rebuild of the stream,
// and consumes it until Stop.
func (in *StreamIngester) Start(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cc != nil {
		return errors.New("transcript: stream ingester already started")
	}
	s, err := in.js.Stream(ctx, in.stream)
	if err != nil {
		return fmt.Errorf("transcript: stream %s: %w", in.stream, err)
	}
	in.replayUntil.Store(s.CachedInfo().State.LastSeq)
	in.start = time.Now().Add(-in.rebuild)
	cons, cc, err := in.consume(ctx)
	if err != nil {
		return err
	}
	in.consumer, in.jsStream, in.cc = cons, s, cc
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	in.cancel, in.done = cancel, make(chan struct{})
	var loops sync.WaitGroup
	loops.Go(func() { in.catchUpLoop(lctx) })
	// Apart: a stream info that waits on an election must not hold up
	// the catch-up loop's answers.
	loops.Go(func() { in.fullLoop(lctx) })
	go func() { loops.Wait(); close(in.done) }()
	return nil
}

// consume creates a consumer that delivers from the stream sequence after
// the last one applied (from the rebuild window's start when none was),
// and consumes it. It is what the client's ordered consumer is (an
// ephemeral in memory, no acks, heartbeats), but the ingester recreates it
// itself, with short timeouts (restart): the client's own reset waits 10 s
// for each attempt, and while a lost node's consumers are being
// reassigned one attempt after the other can take that long. Its messages
// are applied only while it is the ingester's current consumer (handleMu,
// gen) and only in its own delivery order (a delivery sequence skipped
// has it recreated), so none can be applied twice or out of order.
func (in *StreamIngester) consume(ctx context.Context) (jetstream.Consumer, jetstream.ConsumeContext, error) {
	in.handleMu.Lock()
	in.gen++
	gen := in.gen
	in.delivered = 0
	cfg := jetstream.ConsumerConfig{
		FilterSubjects:    []string{in.prefix + ".>"},
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: consumerInactive,
	}
	if a := in.applied.Load(); a > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, a+1
	} else {
		start := in.start
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	in.handleMu.Unlock()
	cons, err := in.js.CreateOrUpdateConsumer(ctx, in.stream, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("transcript: consumer of %s: %w", in.stream, err)
	}
	handle := func(msg jetstream.Msg) {
		in.handleMu.Lock()
		defer in.handleMu.Unlock()
		if gen != in.gen {
			return
		}
		meta, err := msg.Metadata()
		if err != nil {
			return
		}
		if meta.Sequence.Consumer != in.delivered+1 {
			// A delivery lost on the way (a reconnect, a slow consumer):
			// start again after the last one applied.
			in.gen++
			in.wantRestart("the transcript stream's consumer skipped deliveries " + strconv.FormatUint(in.delivered+1, 10) + " to " + strconv.FormatUint(meta.Sequence.Consumer-1, 10))
			return
		}
		in.delivered = meta.Sequence.Consumer
		in.handle(msg, meta)
	}
	cc, err := cons.Consume(handle, jetstream.PullMaxMessages(512), jetstream.PullHeartbeat(consumerHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			in.log.Warn("transcript stream consumer", zap.Error(err))
			if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
				errors.Is(err, nats.ErrNoResponders) {
				in.wantRestart("the transcript stream's consumer: " + err.Error())
			}
			in.Resync()
		}))
	if err != nil {
		return nil, nil, fmt.Errorf("transcript: consume %s: %w", in.stream, err)
	}
	return cons, cc, nil
}

// wantRestart has the catch-up loop recreate the consumer, and marks the
// ingester behind until it has caught up again.
func (in *StreamIngester) wantRestart(why string) {
	in.restartWanted.Store(true)
	in.stalled.Store(&why)
	in.Resync()
}

// consumerHeartbeat is how often the server tells an idle consumer it is
// alive; two missed have it recreated. consumerInactive: the server
// deletes a consumer no one pulled from for this long (one left behind by
// a restart, or by a replica that died).
const (
	consumerHeartbeat = time.Second
	consumerInactive  = 5 * time.Minute
)

// restartTimeout bounds one attempt to recreate a stalled consumer.
const restartTimeout = time.Second

// restart replaces a consumer found stalled (the liveness probe, missed
// heartbeats, a delivery skipped; its node lost, say) with a new one from
// the sequence after the last applied. The catch-up loop calls it, every
// catch-up step, until it succeeds: as soon as the stream has a leader
// again and the cluster has placed the new consumer.
func (in *StreamIngester) restart(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	cons, cc, err := in.consume(ictx)
	if err != nil {
		in.log.Warn("transcript stream consumer not recreated yet", zap.Error(err))
		return false
	}
	in.mu.Lock()
	old, oldCons := in.cc, in.consumer
	if old == nil { // stopped meanwhile
		in.mu.Unlock()
		cc.Stop()
		return true
	}
	in.consumer, in.cc = cons, cc
	in.mu.Unlock()
	old.Stop()
	go func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = in.js.DeleteConsumer(dctx, in.stream, oldCons.CachedInfo().Name)
	}()
	if in.m != nil {
		in.m.ConsumerRestarts.Inc()
	}
	in.log.Info("transcript stream consumer recreated", zap.Uint64("from_stream_seq", in.applied.Load()+1))
	return true
}

// Stop stops consuming after the message being applied.
func (in *StreamIngester) Stop() error {
	in.mu.Lock()
	cc, cancel, done := in.cc, in.cancel, in.done
	in.cc = nil
	in.mu.Unlock()
	if cc == nil {
		return nil
	}
	cancel()
	<-done
	cc.Stop()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-cc.Closed():
		return nil
	case <-t.C:
		return fmt.Errorf("transcript: the stream consumer did not stop within %s", drainTimeout)
	}
}

// Resync marks the ingester behind until it has applied every message the
// stream holds now: after a reconnect, events published meanwhile are on
// their way.
func (in *StreamIngester) Resync() {
	if in.caughtUp.Swap(false) {
		in.onChange()
	}
	select {
	case in.resync <- struct{}{}:
	default:
	}
}

// CaughtUp reports whether every message the stream held at the last
// Start or Resync has been applied.
func (in *StreamIngester) CaughtUp() bool { return in.caughtUp.Load() }

// HeldAtStart is the stream's last sequence when Start was called (0: the
// stream was empty).
func (in *StreamIngester) HeldAtStart() uint64 { return in.replayUntil.Load() }

// Applied is the last stream sequence applied.
func (in *StreamIngester) Applied() uint64 { return in.applied.Load() }

// Pending is how many stream messages followed the last one applied when
// it was delivered.
func (in *StreamIngester) Pending() uint64 { return in.pending.Load() }

// Behind says why the transcript may be incomplete now, or "" when it is
// not: still catching up, or lagging.
func (in *StreamIngester) Behind(now time.Time) string {
	if p := in.stalled.Load(); p != nil && !in.caughtUp.Load() {
		return *p
	}
	if !in.caughtUp.Load() {
		why := "the guard is catching up with the transcript stream (after a start or a reconnect); events may not have been applied yet"
		if a := in.applied.Load(); a > 0 {
			why += " (applied up to stream sequence " + strconv.FormatUint(a, 10) + ", " + strconv.FormatUint(in.pending.Load(), 10) + " pending then)"
		}
		return why
	}
	if p := in.pending.Load(); p > 0 {
		if lag := now.Sub(time.Unix(0, in.lastStored.Load())); lag > in.maxLag {
			return "the guard lags the transcript stream: " + strconv.FormatUint(p, 10) + " events pending, the last applied stored " + lag.Round(time.Millisecond).String() + " ago"
		}
	}
	return ""
}

// catchUpLoop finds when the ingester has caught up, also when no message
// is left to deliver (so none would say so): the consumer has nothing
// pending and everything it delivered has been applied. It asks the server
// while behind, at most every catchUpStep; it does nothing while caught up.
func (in *StreamIngester) catchUpLoop(ctx context.Context) {
	t := time.NewTicker(catchUpStep)
	defer t.Stop()
	for n := 0; ; n++ {
		if in.restartWanted.Load() {
			if in.restartWanted.Store(false); !in.restart(ctx) {
				in.restartWanted.Store(true)
			}
		}
		if !in.caughtUp.Load() {
			in.checkCaughtUp(ctx)
		} else if n%probeEvery == 0 {
			in.probeLive(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-in.resync:
		case <-t.C:
		}
	}
}

// catchUpStep is how often a behind ingester asks whether it caught up.
const catchUpStep = 100 * time.Millisecond

// A caught-up ingester probes its consumer every probeEvery catch-up steps
// (300 ms); probeStalled probes in a row that find it stalled mark it
// behind, and have it recreated.
const (
	probeEvery   = 3
	probeStalled = 2
)

// probeTimeout bounds one probe, or one question whether a behind
// ingester caught up; restartAfter of the latter in a row that get no
// answer have the consumer recreated.
const (
	probeTimeout = 500 * time.Millisecond
	restartAfter = 3
)

// probeLive asks the server about the consumer of a caught-up ingester.
// The ordered consumer notices a dead node, a lost consumer or a stalled
// delivery only when its heartbeats stop (seconds), and meanwhile the
// ingester would say it is caught up while events go unapplied: Checks
// would be judged on a transcript missing them (a new call refused as
// unknown, an old one judged without its latest words). Two probes in a
// row (about 2 s) that get no answer, or that find events pending or
// delivered yet nothing applied since the last, mark it behind
// (Resync), saying why; catching up again clears it.
func (in *StreamIngester) probeLive(ctx context.Context) {
	in.mu.Lock()
	cons := in.consumer
	in.mu.Unlock()
	if cons == nil {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, probeTimeout)
	info, err := cons.Info(ictx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	applied := in.applied.Load()
	why := ""
	switch {
	case err != nil:
		in.probeFails++
		in.probeStill = 0
		if in.probeFails >= probeStalled {
			why = "the transcript stream's consumer does not answer (" + err.Error() + "); events may not be reaching this replica"
		}
	case (info.NumPending > 0 || info.Delivered.Stream > applied) && applied == in.probeApplied:
		in.probeFails = 0
		in.probeStill++
		if in.probeStill >= probeStalled {
			why = "the transcript stream's consumer is stalled: " + strconv.FormatUint(info.NumPending, 10) + " events pending and stream sequence " +
				strconv.FormatUint(info.Delivered.Stream, 10) + " delivered, but nothing applied after " + strconv.FormatUint(applied, 10)
		}
	default:
		in.probeFails, in.probeStill = 0, 0
	}
	in.probeApplied = applied
	if why != "" {
		in.probeFails, in.probeStill = 0, 0
		in.log.Warn("transcript stream consumer stalled; every Check is refused until it catches up", zap.String("why", why))
		in.wantRestart(why)
	}
}

// Full says why the transcript stream counts as full, or "" when it does
// not: it may refuse the next event to its publisher, and the guard cannot
// know whose it refused, so every Check must refuse.
func (in *StreamIngester) Full() string {
	if p := in.full.Load(); p != nil {
		return *p
	}
	return ""
}

// roomShare: from 1/roomShare free or less, the ingester makes room in
// the stream.
const roomShare = 10

// fullLoop runs watchFull until ctx ends: every catch-up step (100 ms)
// while the stream is at least half full, else every second (a stream
// filling from half to 90% within a second takes a flood of 400 MB/s on
// the default 1 GiB).
func (in *StreamIngester) fullLoop(ctx context.Context) {
	for {
		pause := time.Second
		if in.watchFull(ctx) {
			pause = catchUpStep
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// watchFull asks the stream how full it is, and reports whether it is at
// least half full.
// Past its MaxBytes the stream refuses new events (DiscardNew): their
// publishers are told and retry with the same message id, but the guard
// never sees what was refused. So:
//   - From 90% full it makes room: it purges the older half of the
//     stream's messages, never one this replica has not applied. What it
//     purges it holds already; a restart replays less of it (a call whose
//     first events are gone is uncertain until its agent speaks again),
//     and a replica that had not applied it sees the hole and marks its
//     calls uncertain, as for any discard.
//   - When there is no room left for one more event of the largest size
//     (it could not purge: this replica lags the flood), the stream may be
//     refusing events: the ingester counts as full (Full), every call held
//     is marked uncertain and every Check refuses, until there is room
//     again, when every call held is marked uncertain once more (a call
//     made meanwhile may be missing what was refused). Each stays
//     uncertain until its agent speaks again.
func (in *StreamIngester) watchFull(ctx context.Context) (half bool) {
	in.mu.Lock()
	s := in.jsStream
	in.mu.Unlock()
	if s == nil {
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, err := s.Info(ictx)
	if err != nil || info.Config.MaxBytes <= 0 {
		return err != nil // unanswered: look again soon
	}
	max := uint64(info.Config.MaxBytes)
	st := info.State
	if st.Bytes+max/roomShare >= max && st.Msgs > 1 {
		older := st.FirstSeq + st.Msgs/2
		if upTo := min(older, in.applied.Load()+1); upTo > st.FirstSeq {
			if err := s.Purge(ictx, jetstream.WithPurgeSequence(upTo)); err != nil {
				in.log.Warn("transcript stream nearly full, and making room failed", zap.Error(err))
			} else {
				if in.m != nil {
					in.m.LimitHits.WithLabelValues(LimitStreamBytes).Inc()
				}
				in.log.Warn("transcript stream nearly full: purged its oldest events, all applied here, to make room (--transcript-max-bytes)",
					zap.Uint64("bytes", st.Bytes), zap.Uint64("max_bytes", max), zap.Uint64("purged_below_seq", upTo))
				if info, err = s.Info(ictx); err != nil {
					return true
				}
				st = info.State
			}
		}
	}
	half = st.Bytes >= max/2
	full := st.Bytes+uint64(msgSizeOr(info.Config.MaxMsgSize, 1<<20)) > max
	if full == (in.full.Load() != nil) {
		return half
	}
	if full {
		why := fmt.Sprintf("the transcript stream holds %d of its %d bytes (%s) and this replica could not make room: it refuses new events to their publishers, who retry them, and the guard cannot tell whose were refused",
			st.Bytes, max, LimitFlags[LimitStreamBytes])
		in.full.Store(&why)
		calls := in.store.MarkLost(why)
		if in.m != nil {
			in.m.LimitHits.WithLabelValues(LimitStreamBytes).Inc()
		}
		in.log.Error("transcript stream full; every Check is refused until it has room", zap.String("why", why), zap.Int("calls_uncertain", calls))
	} else {
		in.full.Store(nil)
		calls := in.store.MarkLost("the transcript stream was full moments ago and refused events to their publishers; the caller's latest words may be missing until the agent speaks again")
		in.log.Info("transcript stream has room again", zap.Uint64("bytes", st.Bytes), zap.Int("calls_uncertain", calls))
	}
	in.onChange()
	return half
}

// msgSizeOr is a stream's MaxMsgSize, or def when it sets none (-1 or 0).
func msgSizeOr(v int32, def int) int {
	if v <= 0 {
		return def
	}
	return int(v)
}

func (in *StreamIngester) checkCaughtUp(ctx context.Context) {
	in.mu.Lock()
	cons := in.consumer
	in.mu.Unlock()
	if cons == nil {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	info, err := cons.Info(ictx)
	if err != nil {
		// Reset under way, or not connected: try again. A consumer that
		// does not answer for a while (its node lost) is recreated.
		if in.infoFails++; in.infoFails >= restartAfter {
			in.infoFails = 0
			in.restartWanted.Store(true)
		}
		return
	}
	in.infoFails = 0
	// Nothing pending, and everything delivered applied. A consumer that
	// has delivered nothing at all (a restart after the stream's events
	// aged past the rebuild window: it starts at the stream's end, and
	// Delivered.Stream names that end) has nothing to apply either.
	if info.NumPending == 0 && (in.applied.Load() >= info.Delivered.Stream || info.Delivered.Consumer == 0) {
		if info.Delivered.Consumer == 0 && info.Delivered.Stream > in.floor.Load() {
			in.floor.Store(info.Delivered.Stream)
			in.wakeSettled(in.covered())
		}
		in.markCaughtUp()
	}
}

func (in *StreamIngester) markCaughtUp() {
	if !in.caughtUp.Swap(true) {
		in.stalled.Store(nil)
		in.log.Info("caught up with the transcript stream", zap.Uint64("stream_seq", in.applied.Load()))
		in.onChange()
	}
}

func (in *StreamIngester) handle(msg jetstream.Msg, meta *jetstream.MsgMetadata) {
	seq := meta.Sequence.Stream
	if in.beforeHandle != nil {
		in.beforeHandle(seq)
	}
	if prev := in.applied.Load(); prev != 0 && seq > prev+1 {
		in.discarded(prev+1, seq-1)
	}
	ev, err := Decode(in.prefix, msg.Subject(), msg.Data(), in.limits)
	if err != nil {
		rejected(in.log, in.m, in.store, in.prefix, msg.Subject(), msg.Data(), err, zap.Uint64("stream_seq", seq))
	} else if ok, reason := in.store.ApplyMeta(ev, Meta{At: meta.Timestamp, StreamSeq: seq, Replay: seq <= in.replayUntil.Load()}); !ok {
		dropped(in.log, in.m, in.store, ev, reason, zap.Uint64("stream_seq", seq))
	}
	in.lastStored.Store(meta.Timestamp.UnixNano())
	in.pending.Store(meta.NumPending)
	in.applied.Store(seq)
	if meta.NumPending == 0 {
		in.markCaughtUp()
	}
	if in.nSettling.Load() > 0 {
		in.wakeSettled(seq)
	}
}

// discarded marks every call held uncertain: the stream sequences from
// first to last were never applied. The stream holds only transcript
// events, so they were events the stream discarded (its max bytes or max
// age, a purge) before this replica read them (it was stalled: a VM pause,
// a partition), and nothing tells which calls they belonged to. A call
// made after them is not affected: what the stream discarded came before
// every event of it that is kept.
func (in *StreamIngester) discarded(first, last uint64) {
	n := last - first + 1
	why := fmt.Sprintf("the transcript stream discarded %d events (stream sequences %d to %d) before this replica applied them; nothing tells which calls they belonged to", n, first, last)
	calls := in.store.MarkLost(why)
	if in.m != nil {
		in.m.EventsRejected.WithLabelValues(ReasonStreamDiscarded).Add(float64(n))
	}
	in.log.Warn("transcript events discarded by the stream before they were applied; every call held is uncertain until its agent speaks again",
		zap.Uint64("first_stream_seq", first), zap.Uint64("last_stream_seq", last), zap.Int("calls_uncertain", calls))
}

// Settle waits, within ctx, until every event of the call that the stream
// held when it was called has been applied: an ALLOW then rests on every
// word the pipeline published before it, whichever replica judges.
//
// It asks the stream for its last sequence, but never once per Check: one
// request is in flight at a time, and every Settle that begins meanwhile
// shares the next one (sent when it returns, so that it answers for a
// moment after each of them began). A burst of Checks costs two round
// trips, not a queue of JetStream API requests. When this replica has
// not applied that sequence yet (it lags a flood on other calls), a few
// Settles at a time (settleLookups) also ask for their own call's last
// event and wait only for that; the others wait for the whole stream.
func (in *StreamIngester) Settle(ctx context.Context, callID string) error {
	in.mu.Lock()
	s := in.jsStream
	in.mu.Unlock()
	if s == nil {
		return errors.New("transcript: the stream ingester is not started")
	}
	r := in.joinHeld(s)
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("transcript: the stream's last sequence: %w", ctx.Err())
	}
	if r.err != nil {
		return fmt.Errorf("transcript: the stream's last sequence: %w", r.err)
	}
	target, applied := r.seq, r.applied
	select {
	case <-applied:
		return nil
	default:
	}
	select {
	case in.lookups <- struct{}{}:
		defer func() { <-in.lookups }()
		msg, err := s.GetLastMsgForSubject(ctx, in.prefix+"."+callID)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return nil // nothing of the call in the stream
		case err != nil:
			return fmt.Errorf("transcript: the call's last event in the stream: %w", err)
		}
		if msg.Sequence < target {
			target = msg.Sequence
			w := in.waitApplied(target)
			defer in.cancelWait(w)
			applied = w.done
		}
	default:
	}
	select {
	case <-applied:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("transcript: stream sequence %d not applied yet (applied %d): %w", target, in.covered(), ctx.Err())
	}
}

// settleLookups bounds the Settles that look up their own call's last
// event while the replica lags.
const settleLookups = 16

// heldTimeout bounds one request for the stream's last sequence.
const heldTimeout = 2 * time.Second

// heldReq is one request for the stream's last sequence, shared by every
// Settle that began before it was sent. done is closed when it returns;
// then applied is closed once that sequence has been applied.
type heldReq struct {
	done    chan struct{}
	seq     uint64
	err     error
	applied chan struct{}
}

// joinHeld returns the request that will answer for this moment: the one
// waiting to be sent, or a new one (sent now when none is in flight).
func (in *StreamIngester) joinHeld(s jetstream.Stream) *heldReq {
	in.heldMu.Lock()
	defer in.heldMu.Unlock()
	if in.heldNext != nil {
		return in.heldNext
	}
	r := &heldReq{done: make(chan struct{})}
	if in.heldCur != nil {
		in.heldNext = r
		return r
	}
	in.heldCur = r
	go in.askHeld(s, r)
	return r
}

// askHeld sends r, then each request that was joined meanwhile, one at a
// time.
func (in *StreamIngester) askHeld(s jetstream.Stream, r *heldReq) {
	for r != nil {
		// The stream's last message, which only its leader answers (a
		// stream info is answered by every replica while the stream has
		// no leader, from copies that may lack what the leader
		// acknowledged last).
		ctx, cancel := context.WithTimeout(context.Background(), heldTimeout)
		msg, err := s.GetLastMsgForSubject(ctx, in.prefix+".>")
		cancel()
		if in.m != nil {
			in.m.SettleRequests.Inc()
		}
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound): // an empty stream
			r.applied = in.waitApplied(0).done
		case err != nil:
			r.err = err
		default:
			r.seq = msg.Sequence
			r.applied = in.waitApplied(r.seq).done
		}
		close(r.done)
		in.heldMu.Lock()
		in.heldCur, in.heldNext = in.heldNext, nil
		r = in.heldCur
		in.heldMu.Unlock()
	}
}

// covered is the last stream sequence this replica holds everything up
// to: the last one applied, or the stream's end when its consumer started
// there (every event before it older than the rebuild window).
func (in *StreamIngester) covered() uint64 { return max(in.applied.Load(), in.floor.Load()) }

// waitApplied registers a wait for stream sequence seq; its done is
// closed once covered reaches seq (at once if it has).
func (in *StreamIngester) waitApplied(seq uint64) *settleWait {
	w := &settleWait{seq: seq, done: make(chan struct{})}
	in.settleMu.Lock()
	heap.Push(&in.settling, w)
	in.nSettling.Add(1)
	in.settleMu.Unlock()
	in.wakeSettled(in.covered()) // covered meanwhile
	return w
}

// cancelWait drops a wait that nobody waits for any more.
func (in *StreamIngester) cancelWait(w *settleWait) {
	in.settleMu.Lock()
	defer in.settleMu.Unlock()
	if w.index >= 0 {
		heap.Remove(&in.settling, w.index)
		in.nSettling.Add(-1)
	}
}

// wakeSettled releases the waits for sequences up to seq.
func (in *StreamIngester) wakeSettled(seq uint64) {
	in.settleMu.Lock()
	defer in.settleMu.Unlock()
	for len(in.settling) > 0 && in.settling[0].seq <= seq {
		w := heap.Pop(&in.settling).(*settleWait)
		close(w.done)
		in.nSettling.Add(-1)
	}
}

// settleWait is a wait for a stream sequence; index is its place in the
// heap (-1: released or dropped).
type settleWait struct {
	seq   uint64
	done  chan struct{}
	index int
}

// settleHeap is a min-heap of waits by sequence: applying a message looks
// only at its top.
type settleHeap []*settleWait

func (h settleHeap) Len() int           { return len(h) }
func (h settleHeap) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h settleHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *settleHeap) Push(x any) {
	w := x.(*settleWait)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *settleHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
