package transcript

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Limits bound what one event, one call and the whole store may hold, so
// that no publisher can grow the guard's memory without bound or starve
// the Checks of other calls. Each limit hit is counted
// (yesguard_transcript_limit_hits_total{limit}, and for a rejected event
// yesguard_transcript_events_rejected_total{reason}) and explained in a
// sampled log line, so that a flood cannot flood the log.
//
// An event a limit drops from a call the store holds makes that call
// uncertain (Snapshot.Gap) until its agent speaks again: a "Wait, no."
// lost to a limit must not leave the "Yes." before it standing.
type Limits struct {
	// MaxTextBytes: an event whose text is longer is rejected (reason
	// "text_too_long"). Default 4096.
	MaxTextBytes int
	// MaxLangBytes: an event whose lang is longer is rejected (reason
	// "lang_too_long"). Default 35 (the longest BCP 47 tag worth keeping).
	MaxLangBytes int
	// MaxResponseIDBytes: an event whose response_id is longer is rejected
	// (reason "response_id_too_long"). Default 256.
	MaxResponseIDBytes int
	// MaxSourceBytes: an event whose source is longer is rejected (reason
	// "source_too_long"). Default 64.
	MaxSourceBytes int
	// MaxUtterances kept per call, oldest dropped first. Default 64.
	MaxUtterances int
	// MaxCallBytes bounds what one call's history holds (its utterances'
	// strings and their bookkeeping): above it the oldest utterances are
	// dropped first (limit "call_bytes"). Default 128 KiB.
	MaxCallBytes int
	// MaxTotalBytes bounds what every call together holds: an event that
	// would take the store above it is rejected (reason "store_full").
	// Default 512 MiB.
	MaxTotalBytes int64
	// MaxEventsPerSecond bounds one call's events (a token bucket of as
	// many a second, holding twice as many): the events above it are
	// rejected (reason "rate_limited"). Default 200 (a recogniser sends tens a second, an
	// agent streaming tokens as interims up to a hundred or so). Measured on the
	// events' arrival (the stream's timestamps), so a replay after a
	// restart is not a burst.
	MaxEventsPerSecond int
	// IdleTTL: a call with no event for this long is evicted. Default 10m.
	IdleTTL time.Duration
	// EndedTTL: a call is evicted this long after its call_ended. Default 2m.
	EndedTTL time.Duration
	// MaxCalls bounds the calls held: an event that would start one more
	// is rejected (reason "too_many_calls"), so a flood of call ids
	// cannot push the calls in progress out. Default 100000. At the
	// bound, a new call first evicts a held call that never had a Check
	// (the least recently active of a sample; cause "pressure"), and is
	// rejected only when none can go.
	MaxCalls int
	// MaxCallsPerPublisher bounds the calls one publisher holds: the
	// source of the event that made the call ("" for events without one).
	// (JetStream strips the Nats-Request-Info header that names a
	// message's account and user before it stores the message, so the
	// transcript stream cannot say which connection published it.) A
	// publisher at its bound evicts its own
	// least recently active call that never had a Check to start
	// another; when every call of its own had one, its new call is
	// rejected (reason "publisher_calls"). So a flood of fresh call ids
	// from one publisher churns through its own share and never locks
	// another out. Default 25000.
	MaxCallsPerPublisher int
	// MaxEventsPerCall bounds the events of one call the transcript
	// stream holds (its MaxMsgsPerSubject, with DiscardNewPerSubject):
	// the stream refuses the call's next event to its publisher, so a
	// flood on one call's subject never reaches the guard. The call whose
	// events reach the bound is uncertain (Snapshot.Gap) until its agent
	// speaks again, since what its publisher sends next is refused.
	// Default 30000 (an hour at about eight events a second); 0 takes the
	// default, and only the JetStream state has the stream that applies it.
	MaxEventsPerCall int
}

// Default limits.
const (
	DefaultMaxTextBytes       = 4096
	DefaultMaxLangBytes       = 35
	DefaultMaxResponseIDBytes = 256
	DefaultMaxSourceBytes     = 64
	DefaultMaxUtterances      = 64
	DefaultMaxCallBytes       = 128 << 10
	DefaultMaxTotalBytes      = 512 << 20
	DefaultMaxEventsPerSecond = 200
	DefaultIdleTTL            = 10 * time.Minute
	DefaultEndedTTL           = 2 * time.Minute
	DefaultMaxCalls           = 100000
	DefaultMaxCallsPerPub     = 25000
	DefaultMaxEventsPerCall   = 30000
)

// SetDefaults fills zero fields with their defaults.
func (l *Limits) SetDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxTextBytes, DefaultMaxTextBytes)
	def(&l.MaxLangBytes, DefaultMaxLangBytes)
	def(&l.MaxResponseIDBytes, DefaultMaxResponseIDBytes)
	def(&l.MaxSourceBytes, DefaultMaxSourceBytes)
	def(&l.MaxUtterances, DefaultMaxUtterances)
	def(&l.MaxCallBytes, DefaultMaxCallBytes)
	def(&l.MaxEventsPerSecond, DefaultMaxEventsPerSecond)
	def(&l.MaxCalls, DefaultMaxCalls)
	def(&l.MaxCallsPerPublisher, min(DefaultMaxCallsPerPub, l.MaxCalls))
	def(&l.MaxEventsPerCall, DefaultMaxEventsPerCall)
	if l.MaxTotalBytes == 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.IdleTTL == 0 {
		l.IdleTTL = DefaultIdleTTL
	}
	if l.EndedTTL == 0 {
		l.EndedTTL = DefaultEndedTTL
	}
}

// MaxEventBytes is the largest event message the limits let through:
// every bounded string at its limit, and room for the rest of the JSON.
// The transcript stream refuses larger messages at the publish.
func (l Limits) MaxEventBytes() int {
	l.SetDefaults()
	// JSON escaping can take a string to 6 times its bytes (\u00XX); the
	// fields without their own limit (call_id, the numbers) fit in 1 KiB.
	return 6*(l.MaxTextBytes+l.MaxLangBytes+l.MaxResponseIDBytes+l.MaxSourceBytes) + 1024
}

// Utterance is one final transcript event as stored.
type Utterance struct {
	// ID is a per-call counter assigned on arrival; stable while the call
	// is held, so a turn can be named by the smallest ID of its utterances.
	// ID is the stream sequence of its event when it came from the
	// transcript stream, so that every replica names it alike.
	ID uint64
	// Source and Epoch name the publisher's run that sent it; Seq is its
	// number in that run (or in the call, for events without a source).
	Source     string
	Epoch      uint64
	Seq        uint64
	Speaker    Speaker
	Text       string
	StartMS    int64 // 0 when HasTimes is false
	EndMS      int64
	Lang       string
	ResponseID string
	Confidence float64
	ReceivedAt time.Time
	// The flags last, together: a call holds up to MaxUtterances of these,
	// and padding after each would cost 8 bytes apiece.
	HasTimes    bool
	Interrupted bool
}

// Turn is consecutive utterances of one speaker, joined.
type Turn struct {
	ID          uint64 // the smallest ID of its utterances: the first to arrive (see makeTurn)
	Speaker     Speaker
	Utterances  []Utterance
	Text        string // utterance texts joined with " "
	StartMS     int64
	EndMS       int64
	HasTimes    bool
	FirstSeq    uint64
	LastSeq     uint64
	Lang        string // the last non-empty lang of its utterances
	ResponseID  string // the last non-empty response id
	Source      string // the last non-empty source of its utterances
	Interrupted bool   // any utterance was interrupted
	ReceivedAt  time.Time
}

// Snapshot is a copy of one call's state at one moment. It shares nothing
// with the store.
type Snapshot struct {
	CallID string
	// Exists is false when the store holds nothing for the call.
	Exists bool
	// Utterances are the call's final utterances, oldest first.
	Utterances []Utterance
	// CallerInFlight is true when a caller speech_started or interim result
	// came after the caller's last final: a turn is being spoken.
	CallerInFlight bool
	// Ended is true after call_ended.
	Ended bool
	// Lang is the call's last known language ("" when none was given).
	Lang string
	// Gap, when not empty, says which events the call's publishers
	// numbered have not arrived: the call cannot be judged until they do
	// or the agent speaks again.
	Gap string
	// HeldGap is a gap that only agent speech with response id HeldGapBy
	// settled: a Check that leaves that speech out of the turns (its own
	// filler, "One moment.") must treat HeldGap as Gap, since for it
	// nothing the agent said came after the missing events. Agent speech
	// of another response id, or of none, settles it for every Check.
	HeldGap, HeldGapBy string
}

// GapFor is the gap a Check that leaves out agent speech with response id
// skip (its own filler; "" for none) must judge by: Gap, or HeldGap when
// the only agent speech that settled it is the speech left out.
func (s Snapshot) GapFor(skip string) string {
	if s.Gap == "" && skip != "" && skip == s.HeldGapBy {
		return s.HeldGap
	}
	return s.Gap
}

// Turns groups the snapshot's utterances into turns, after leaving out agent
// utterances whose ResponseID equals skipResponseID (when it is not empty).
// The turns' utterances may share memory with the snapshot's (never with
// the store's); appending to one turn's cannot change another's.
func (s Snapshot) Turns(skipResponseID string) []Turn {
	return groupTurns(s.Utterances, skipResponseID)
}

// Store holds the per-call state. It is safe for concurrent use.
//
// Calls live in 64 shards chosen by an FNV-1a hash of the call id,
// each with its own lock, so events of different calls rarely contend and
// readers of one call never wait for writers of another.
type Store struct {
	limits Limits
	m      *Metrics
	events eventCounters

	shards [numShards]shard
	n      atomic.Int64 // calls held
	bytes  atomic.Int64 // what they hold, against MaxTotalBytes

	// pubs counts the calls held per publisher (publisherOf), against
	// MaxCallsPerPublisher. Taken after a shard's lock, never before.
	pubMu sync.Mutex
	pubs  map[string]int

	// newCall is closed and replaced whenever a call is created; waiters
	// on unknown calls select on it.
	newCall atomic.Pointer[chan struct{}]
}

// NewStore returns an empty store. m may be nil.
func NewStore(limits Limits, m *Metrics) *Store {
	return newStore(limits, m)
}

// Apply applies one validated event received at now. It returns false and a
// reason label when the event is dropped (e.g. "duplicate_seq").
func (s *Store) Apply(ev Event, now time.Time) (bool, string) {
	return s.apply(ev, now)
}

// Meta is how an event reached the store.
type Meta struct {
	// At is when it was received: the stream's timestamp of its message,
	// or its arrival.
	At time.Time
	// StreamSeq is its message's sequence in the transcript stream; 0
	// when it did not come from one.
	StreamSeq uint64
	// Replay: it was applied while catching up with the stream after a
	// start. A run first seen above seq 1 still makes a gap (its head may
	// never have arrived); the gap says it may also be older than the
	// replay.
	Replay bool
}

// ApplyMeta is Apply with how the event arrived.
func (s *Store) ApplyMeta(ev Event, meta Meta) (bool, string) {
	return s.applyMeta(ev, meta)
}

// Snapshot returns a copy of the call's state and a channel that is closed
// at the call's next change (for an unknown call: when any call is
// created). Waiters select on it; nothing polls.
func (s *Store) Snapshot(callID string) (Snapshot, <-chan struct{}) {
	return s.snapshot(callID)
}

// SnapshotTurns is Snapshot with only the utterances of the call's last
// maxTurns turns, as Turns(skipResponseID) groups them: Turns of the result
// is the last maxTurns turns of Turns of the whole snapshot, and the rest of
// the history is not copied. maxTurns <= 0 copies everything.
func (s *Store) SnapshotTurns(callID, skipResponseID string, maxTurns int) (Snapshot, <-chan struct{}) {
	return s.snapshotTail(callID, skipResponseID, maxTurns)
}

// MarkLost marks every call held uncertain (Snapshot.Gap says why) until
// its agent speaks again: events may have been lost, and nothing tells
// which call's. It returns how many calls it marked.
func (s *Store) MarkLost(why string) int { return s.markLost(why) }

// Hold marks the call as having had a Check and pins it while the Check
// runs: a call that had a Check is never evicted to make room for
// another (Limits.MaxCalls, MaxCallsPerPublisher), and one with a Check
// in flight is not evicted at all, not even idle. A call not held yet is
// pinned when it arrives. The returned release must be called once, when
// the Check ends.
func (s *Store) Hold(callID string) (release func()) { return s.hold(callID) }

// Sweep evicts idle and ended calls. It returns how many it evicted.
func (s *Store) Sweep(now time.Time) int {
	return s.sweep(now)
}

// Len returns how many calls the store holds.
func (s *Store) Len() int {
	return int(s.n.Load())
}

// Bytes is what the calls held take, as counted against MaxTotalBytes.
func (s *Store) Bytes() int64 { return s.bytes.Load() }

// Limits are the store's limits, defaults filled in.
func (s *Store) Limits() Limits { return s.limits }

// MarkDropped makes a held call uncertain (Snapshot.Gap says why) until
// its agent speaks again: an event of it was dropped before the store saw
// it (a limit of Decode), and may have held the caller's latest words. It
// reports whether the call is held.
func (s *Store) MarkDropped(callID, why string) bool {
	sh := s.shardOf(callID)
	sh.mu.Lock()
	c := sh.calls[callID]
	if c == nil {
		sh.mu.Unlock()
		return false
	}
	c.lost = why
	old := c.changed
	c.changed = nil
	sh.mu.Unlock()
	if old != nil {
		close(old)
	}
	return true
}

// Decode parses and validates one NATS message on subject, where prefix is
// the subject prefix (e.g. "yesguard.transcript"). An error is a
// *RejectError carrying a bounded reason label.
func Decode(prefix, subject string, data []byte, limits Limits) (Event, error) {
	return decode(prefix, subject, data, limits)
}

// RejectError is why an event was dropped.
type RejectError struct {
	Reason string // bounded label: one of the Reason* constants
	// Limit names the limit hit ("text_bytes", ...), or "" when the event
	// was malformed rather than too large.
	Limit  string
	Detail string
}

func (e *RejectError) Error() string {
	return "transcript event rejected: " + e.Reason + ": " + e.Detail
}

// Ingester subscribes to <prefix>.> on a NATS connection and applies each
// event to a store.
//
// One core NATS subscription delivers every call's events to a single
// callback, so events of one call are applied in the order NATS delivered
// them.
type Ingester struct {
	nc     *nats.Conn
	prefix string
	store  *Store
	limits Limits
	log    *zap.Logger // sampled: a flood of bad events cannot flood the log
	m      *Metrics

	mu  sync.Mutex
	sub *nats.Subscription
}

// NewIngester wires an ingester; Start subscribes.
func NewIngester(nc *nats.Conn, prefix string, store *Store, limits Limits, log *zap.Logger, m *Metrics) *Ingester {
	return newIngester(nc, prefix, store, limits, log, m)
}

// Start subscribes.
func (in *Ingester) Start() error { return in.start() }

// Stop unsubscribes after the messages already received are applied.
func (in *Ingester) Stop() error { return in.stop() }

// Handle decodes and applies one message; exported for benchmarks and fuzz
// tests.
func (in *Ingester) Handle(subject string, data []byte) { in.handle(subject, data) }
