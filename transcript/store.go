package transcript

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// numShards is how many independently locked maps the store splits calls
// over. A power of two, so the shard index is a mask of the hash.
const numShards = 64

type shard struct {
	mu    sync.RWMutex
	calls map[string]*call
	// pins counts the Checks in flight (Store.Hold) on calls of this
	// shard that are not held yet; a call made takes its pins over.
	pins map[string]int
	_    [64]byte // so neighbouring shards' locks never share a cache line
}

// callOverhead is what a call costs beyond its utterances, as counted
// against MaxTotalBytes: its struct, its map entry, its id.
const callOverhead = int64(unsafe.Sizeof(call{})) + 64

// utteranceBytes is what one held utterance costs: its struct and its
// strings.
func utteranceBytes(u *Utterance) int64 {
	return int64(unsafe.Sizeof(*u)) + int64(len(u.Source)+len(u.Text)+len(u.Lang)+len(u.ResponseID)+len(u.Speaker))
}

// limitOf is the limit label of a reason a limit gave; "" for others.
var limitOf = map[string]string{
	ReasonTextTooLong:       LimitTextBytes,
	ReasonLangTooLong:       LimitLangBytes,
	ReasonResponseIDTooLong: LimitResponseIDBytes,
	ReasonSourceTooLong:     LimitSourceBytes,
	ReasonTooManyCalls:      LimitCalls,
	ReasonStoreFull:         LimitTotalBytes,
	ReasonRateLimited:       LimitEventsPerSecond,
	ReasonPublisherCalls:    LimitPublisherCalls,
}

// explain says which limit a store reason hit, and which flag raises it.
func (l *Limits) explain(reason string) string {
	switch reason {
	case ReasonTooManyCalls:
		return fmt.Sprintf("the guard holds %d calls, its limit (%s): a new call's events are dropped until calls end or idle out", l.MaxCalls, LimitFlags[LimitCalls])
	case ReasonStoreFull:
		return fmt.Sprintf("the calls held take %d bytes, the limit (%s): the event is dropped", l.MaxTotalBytes, LimitFlags[LimitTotalBytes])
	case ReasonRateLimited:
		return fmt.Sprintf("more than %d events a second on this call (%s): the event is dropped", l.MaxEventsPerSecond, LimitFlags[LimitEventsPerSecond])
	case ReasonPublisherCalls:
		return fmt.Sprintf("this publisher (source) holds %d calls, its limit (%s), and none of them could be evicted (each had a Check): a new call's events are dropped until its calls end or idle out", l.MaxCallsPerPublisher, LimitFlags[LimitPublisherCalls])
	}
	return ""
}

// lostTo is what Snapshot.Gap says of a call an event was dropped from by
// a limit.
func lostTo(reason, detail string) string {
	return "an event of this call was dropped by the guard's limits (" + reason + ": " + detail + "); the caller's latest words may be missing until the agent speaks again"
}

// call is one call's state. Every field is guarded by its shard's lock.
type call struct {
	utts   []Utterance // final utterances, ordered; len <= MaxUtterances
	nextID uint64      // last Utterance.ID assigned

	inFlight    bool
	inFlightSeq uint64 // largest seq of the markers since the caller's last final (0: none given)
	inFlightSrc stream // the publisher that numbered inFlightSeq
	// lastCallerFinalSeq is the largest seq of a caller final; a marker with
	// a smaller seq from the same publisher was spoken before that final
	// and marks nothing.
	lastCallerFinalSeq uint64
	lastCallerFinalSrc stream

	ended   bool
	endedAt time.Time
	lang    string

	lastActive time.Time
	seqs       seqWindow // the seqs of events without a source
	// legacyJump is a seq of an event without a source that jumped too far
	// and was rejected (0: none since the agent last spoke).
	legacyJump uint64
	// lost says why events of the call may have been lost (a slow
	// consumer); "" when none since the agent last spoke.
	lost string
	// trackers follow the seqs of each (source, epoch), at most
	// maxTrackers of them.
	trackers []seqTracker
	// held is a gap that only agent speech of one response settled: a
	// Check that leaves that response out as its own filler still sees it
	// (Snapshot.HeldGap).
	held heldGap

	// bytes is what the call holds, as the store counts it against
	// MaxCallBytes and MaxTotalBytes (callBytes, utteranceBytes).
	bytes int64
	// tokens and refilled are the call's event rate bucket
	// (MaxEventsPerSecond): tokens left as of refilled.
	tokens   float64
	refilled time.Time

	// publisher is who made the call (publisherOf its first event).
	publisher string
	// checked: a Check asked about the call (Store.Hold); it is never
	// evicted to make room. holds counts the Checks in flight; a call
	// with one is not evicted at all.
	checked bool
	holds   int
	// stored counts the call's events applied from the transcript
	// stream, against MaxEventsPerCall.
	stored int

	// changed is closed at the next change a Snapshot can see, and at
	// eviction. It is made by the first Snapshot that needs it, not at each
	// change: most changes have no one waiting.
	changed chan struct{}
}

// fnv32a hashes the call id to pick its shard (FNV-1a, inlined to avoid
// the allocation of hash/fnv's interface).
func fnv32a(s string) uint32 {
	const (
		offset = 2166136261
		prime  = 16777619
	)
	h := uint32(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= prime
	}
	return h
}

func (s *Store) shardOf(callID string) *shard {
	return &s.shards[fnv32a(callID)&(numShards-1)]
}

func newStore(limits Limits, m *Metrics) *Store {
	limits.SetDefaults()
	s := &Store{limits: limits, m: m}
	for i := range s.shards {
		s.shards[i].calls = make(map[string]*call)
		s.shards[i].pins = make(map[string]int)
	}
	s.pubs = make(map[string]int)
	ch := make(chan struct{})
	s.newCall.Store(&ch)
	if m != nil {
		s.events.vec = m.Events
	}
	return s
}

// notifyNewCall wakes everyone waiting on an unknown call.
func (s *Store) notifyNewCall() {
	next := make(chan struct{})
	old := s.newCall.Swap(&next) // each channel is swapped out, and closed, once
	close(*old)
}

// maxSeqJump bounds how far a publisher's seq may pass the largest it
// sent before (and, for its first event, how large it may be): an event
// beyond it is rejected and its call is uncertain until the agent speaks
// again.
const maxSeqJump = 1 << 20

// maxTrackers bounds the (source, epoch) pairs followed per call.
const maxTrackers = 8

// stream names a publisher's run: its source and epoch. The zero stream is
// the events without a source.
type stream struct {
	source string
	epoch  uint64
}

func streamOf(ev *Event) stream { return stream{ev.Source, ev.Epoch} }

// seqTracker follows one publisher run's seqs, for repeats and gaps.
type seqTracker struct {
	stream
	win seqWindow
	// first is the smallest seq seen; headMissing: seqs below it were
	// never seen. headReplayed: first came from a replay, where the head
	// may also be older than the window replayed; that cannot be told from
	// a head that never arrived, so it refuses all the same.
	first                     uint64
	headMissing, headReplayed bool
	// forgiven: seqs at or below it no longer make a gap (the agent spoke
	// after them).
	forgiven uint64
	// jumped is a seq rejected for jumping too far (0: none).
	jumped uint64
}

func (s *Store) apply(ev Event, now time.Time) (bool, string) {
	return s.applyMeta(ev, Meta{At: now})
}

func (s *Store) applyMeta(ev Event, meta Meta) (bool, string) {
	// Apply trusts Decode, but a direct caller may hand it anything; these
	// checks keep the store's invariants whoever calls.
	if ev.CallID == "" {
		return false, ReasonMissingCallID
	}
	ti := typeIndex(ev.Type)
	if ti < 0 {
		return false, ReasonUnknownType
	}
	si := speakerIndex(ev.Speaker)
	if si < 0 || (ev.Speaker == "" && ev.Type != TypeCallEnded) {
		return false, ReasonUnknownSpeaker
	}

	sh := s.shardOf(ev.CallID)
	pub := publisherOf(&ev)
	sh.mu.Lock()
	c := sh.calls[ev.CallID]
	created := false
	if c == nil {
		// The limits on calls held (in all and per publisher) and bytes
		// in all: a new call that would pass one first makes room by
		// evicting a call that never had a Check; when none can go it is
		// not made (its Checks find no call and refuse), so a flood of
		// call ids cannot push out the calls being checked.
		reason := s.full(pub, len(ev.CallID))
		if reason != "" {
			sh.mu.Unlock()
			s.makeRoom(pub, reason == ReasonPublisherCalls)
			sh.mu.Lock()
			if c = sh.calls[ev.CallID]; c == nil {
				reason = s.full(pub, len(ev.CallID))
			}
		}
		if c == nil && reason != "" {
			sh.mu.Unlock()
			return false, reason
		}
	}
	if c == nil {
		c = &call{bytes: callOverhead + int64(len(ev.CallID)), tokens: float64(s.burst()), refilled: meta.At, publisher: pub}
		s.bytes.Add(c.bytes)
		// A copy for the key: the event's id may share a larger string
		// (the fast decoder takes it from the subject).
		sh.calls[strings.Clone(ev.CallID)] = c
		if n := sh.pins[ev.CallID]; n > 0 {
			c.holds, c.checked = n, true
			delete(sh.pins, ev.CallID)
		}
		created = true
		// Under the lock, so a sweep evicting it cannot count it first.
		s.n.Add(1)
		s.pubMu.Lock()
		s.pubs[pub]++
		s.pubMu.Unlock()
		if s.m != nil {
			s.m.ActiveCalls.Inc()
		}
	}
	atLimit := false
	if meta.StreamSeq != 0 {
		c.stored++
		atLimit = c.stored == s.limits.MaxEventsPerCall
	}
	reason := ""
	if !c.takeToken(meta.At, float64(s.limits.MaxEventsPerSecond), float64(s.burst())) {
		reason = ReasonRateLimited
	} else if ev.Type == TypeTranscript && ev.Final &&
		s.bytes.Load()+int64(unsafe.Sizeof(Utterance{}))+int64(len(ev.Text)+len(ev.Lang)+len(ev.ResponseID)+len(ev.Source)+len(ev.Speaker)) > s.limits.MaxTotalBytes {
		reason = ReasonStoreFull
	}
	if reason != "" {
		// Dropped by a limit: what it said may be the caller's latest
		// words, so the call is uncertain until its agent speaks again.
		c.lost = lostTo(reason, s.limits.explain(reason))
		s.markAtLimit(c, atLimit)
		old := c.changed
		c.changed = nil
		sh.mu.Unlock()
		if created {
			s.notifyNewCall()
		}
		if old != nil {
			close(old)
		}
		return false, reason
	}
	if reason := c.admit(&ev, meta.Replay); reason != "" {
		var old chan struct{}
		if (reason == ReasonSeqJump || reason == ReasonStaleSeq || reason == ReasonSeqConflict || atLimit) && !created {
			// The call is uncertain now: waiters must see it.
			old, c.changed = c.changed, nil
		}
		s.markAtLimit(c, atLimit)
		sh.mu.Unlock()
		if created {
			s.notifyNewCall()
		}
		if old != nil {
			close(old)
		}
		return false, reason
	}
	var old chan struct{}
	before, trimmed := c.bytes, 0
	changed := c.apply(&ev, meta, s.limits.MaxUtterances, int64(s.limits.MaxCallBytes), &trimmed)
	// After apply: agent speech at the bound settles no gap, since what
	// follows it is refused.
	s.markAtLimit(c, atLimit)
	if (changed || atLimit) && !created {
		old = c.changed // nil when no one asked; the next Snapshot makes one
		c.changed = nil
	}
	s.bytes.Add(c.bytes - before)
	sh.mu.Unlock()
	if trimmed > 0 && s.m != nil {
		s.m.LimitHits.WithLabelValues(LimitCallBytes).Add(float64(trimmed))
	}

	// Count before waking anyone, so a woken waiter sees the metrics too.
	s.events.inc(ti, si)
	if created {
		s.notifyNewCall()
	}
	if old != nil {
		close(old)
	}
	return true, ""
}

// markAtLimit makes c uncertain when its events just reached
// MaxEventsPerCall: the transcript stream refuses the call's next ones to
// their publisher, so the guard will not see the caller's next words. It
// counts the hit.
func (s *Store) markAtLimit(c *call, atLimit bool) {
	if !atLimit {
		return
	}
	c.lost = fmt.Sprintf("the transcript stream holds %d events of this call, its limit (%s): it refuses the call's next events to their publisher, so the caller's latest words may be missing until older events age out and the agent speaks again",
		s.limits.MaxEventsPerCall, LimitFlags[LimitEventsPerCall])
	if s.m != nil {
		s.m.LimitHits.WithLabelValues(LimitEventsPerCall).Inc()
	}
}

// publisherOf names who published ev, for MaxCallsPerPublisher: the
// source the event claims.
func publisherOf(ev *Event) string { return ev.Source }

// full says which limit a new call of pub with an id of idLen bytes
// would pass ("" when none): MaxCallsPerPublisher, MaxCalls or
// MaxTotalBytes.
func (s *Store) full(pub string, idLen int) string {
	s.pubMu.Lock()
	n := s.pubs[pub]
	s.pubMu.Unlock()
	switch {
	case n >= s.limits.MaxCallsPerPublisher && s.limits.MaxCallsPerPublisher < s.limits.MaxCalls:
		// (A bound at MaxCalls or above is MaxCalls' own.)
		return ReasonPublisherCalls
	case s.n.Load() >= int64(s.limits.MaxCalls):
		return ReasonTooManyCalls
	case s.bytes.Load()+callOverhead+int64(idLen) > s.limits.MaxTotalBytes:
		return ReasonStoreFull
	}
	return ""
}

// Bounds of makeRoom's search: it looks at up to roomSample calls in each
// of up to roomShards shards, and for one of pub's own at up to roomScan
// calls a shard in every shard until it found some, and evicts the
// roomBatch least recently active it may: one search makes room for the
// next calls of a flood too.
const (
	roomShards = 8
	roomSample = 16
	roomScan   = 512
	roomBatch  = 16
)

// makeRoom evicts up to roomBatch calls that never had a Check and have
// none in flight (cause "pressure"), the least recently active of a
// sample: of pub's own calls when own, else of anyone's. It reports
// whether it evicted one. The caller holds no shard lock.
func (s *Store) makeRoom(pub string, own bool) bool {
	type candidate struct {
		c      *call
		id     string
		sh     *shard
		active time.Time // c.lastActive, read under the shard's lock
	}
	var found []candidate
	start := rand.N(numShards)
	for k := 0; k < numShards; k++ {
		if k >= roomShards && (!own || len(found) > 0) {
			break
		}
		sh := &s.shards[(start+k)%numShards]
		sh.mu.RLock()
		seen, looked := 0, 0
		for id, c := range sh.calls { // map order is random: a sample
			if looked++; looked > roomScan || seen >= roomSample {
				break
			}
			if c.checked || c.holds > 0 || own && c.publisher != pub {
				continue
			}
			seen++
			found = append(found, candidate{c, id, sh, c.lastActive})
		}
		sh.mu.RUnlock()
	}
	// A call touched since it was sampled only sorts a little wrong; one
	// checked since is kept (below).
	slices.SortFunc(found, func(a, b candidate) int { return a.active.Compare(b.active) })
	evicted := false
	for _, f := range found[:min(len(found), roomBatch)] {
		f.sh.mu.Lock()
		if c := f.sh.calls[f.id]; c == f.c && !c.checked && c.holds == 0 {
			s.evictLocked(f.sh, f.id, c, "pressure")
			evicted = true
		}
		f.sh.mu.Unlock()
	}
	return evicted
}

// hold is Store.Hold.
func (s *Store) hold(callID string) func() {
	sh := s.shardOf(callID)
	sh.mu.Lock()
	if c := sh.calls[callID]; c != nil {
		c.holds++
		c.checked = true
	} else {
		sh.pins[callID]++
	}
	sh.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			sh.mu.Lock()
			defer sh.mu.Unlock()
			if c := sh.calls[callID]; c != nil && c.holds > 0 {
				c.holds--
				return
			}
			if sh.pins[callID]--; sh.pins[callID] <= 0 {
				delete(sh.pins, callID)
			}
		})
	}
}

// admit decides whether a numbered event is new: "" to apply it, else the
// reason it is dropped (a repeat, or a seq jump, which also marks the call
// uncertain). replay: the event comes from catching up with the stream
// after a start, where a run first seen above seq 1 may be missing its head
// or may have begun before the window replayed: it refuses either way (a
// replica must not allow after a restart what it refused before), and its
// gap says both.
func (c *call) admit(ev *Event, replay bool) string {
	if ev.Seq == 0 {
		return ""
	}
	st := streamOf(ev)
	if st == (stream{}) {
		switch c.seenSeq(st, ev.Seq, &c.seqs) {
		case seqSeen:
			return c.repeat(st, ev)
		case seqTooOld:
			return c.stale(st, ev.Seq, "older than the last "+strconv.Itoa(seqWindowSize)+" seqs of the call")
		}
		if ev.Seq > c.seqs.max+maxSeqJump {
			c.legacyJump = ev.Seq
			return ReasonSeqJump
		}
		c.seqs.add(ev.Seq)
		return ""
	}
	tr := c.tracker(st)
	if tr == nil {
		// A run older than the two newest of its source: a repeat cannot
		// be told from a late event, and a re-sent "Yes." must not land
		// after a later question.
		return c.stale(st, ev.Seq, "from a run older than the two newest of its source")
	}
	if tr.first != 0 {
		switch c.seenSeq(st, ev.Seq, &tr.win) {
		case seqSeen:
			return c.repeat(st, ev)
		case seqTooOld:
			return c.stale(st, ev.Seq, "older than the last "+strconv.Itoa(seqWindowSize)+" seqs of its run")
		}
	}
	if ev.Seq > tr.win.max+maxSeqJump {
		tr.jumped = ev.Seq
		return ReasonSeqJump
	}
	tr.win.add(ev.Seq)
	switch {
	case tr.first == 0:
		tr.first = ev.Seq
		tr.headMissing, tr.headReplayed = ev.Seq > 1, replay
	case ev.Seq < tr.first:
		tr.first = ev.Seq
		if ev.Seq == 1 {
			tr.headMissing = false
		}
	}
	return ""
}

// tracker returns the tracker of st, made when st is new; nil when st is
// an older epoch of its source than the two it keeps.
func (c *call) tracker(st stream) *seqTracker {
	newer := 0
	for i := range c.trackers {
		tr := &c.trackers[i]
		if tr.stream == st {
			return tr
		}
		if tr.source == st.source && tr.epoch > st.epoch {
			newer++
		}
	}
	if newer >= 2 {
		return nil
	}
	if len(c.trackers) >= maxTrackers {
		// Forget the oldest run without a gap; when every run has one,
		// the oldest, whose gap the call keeps (c.lost): bounded state
		// must not forget what keeps a call refused.
		drop := 0
		for i := range c.trackers {
			if c.trackers[i].gap() == "" {
				drop = i
				break
			}
		}
		if why := c.trackers[drop].gap(); why != "" && c.lost == "" {
			c.lost = why + fmt.Sprintf(" (that run is no longer followed: more than %d publisher runs in the call)", maxTrackers)
		}
		c.trackers = slices.Delete(c.trackers, drop, drop+1)
	}
	c.trackers = append(c.trackers, seqTracker{stream: st})
	return &c.trackers[len(c.trackers)-1]
}

// What seenSeq knows of a seq.
const (
	seqNew    = iota
	seqSeen   // applied before: a repeat
	seqTooOld // older than the window and not held: a repeat or a very late event, which cannot be told apart
)

// seenSeq says whether the run's seq was already applied to the call: it
// is in the recent window, or it is older than the window and a held
// utterance of the run carries it. An older seq no held utterance carries
// is seqTooOld.
func (c *call) seenSeq(st stream, seq uint64, w *seqWindow) int {
	seen, inWindow := w.seen(seq)
	switch {
	case inWindow && seen:
		return seqSeen
	case inWindow:
		return seqNew
	}
	for i := range c.utts {
		if u := &c.utts[i]; u.Seq == seq && u.Source == st.source && u.Epoch == st.epoch {
			return seqSeen
		}
	}
	return seqTooOld
}

// repeat drops an event whose seq the run already used: a repeat, unless
// it is a final that differs from the final held under that seq (or no
// final is held under it). Then the publisher restarted without a new
// epoch and counts from 1 again (a contract violation), and what it says
// now may be the caller's "Wait, no.": the event is dropped all the same
// (it cannot be placed), and the call is uncertain until its agent speaks
// again.
func (c *call) repeat(st stream, ev *Event) string {
	if ev.Type != TypeTranscript || !ev.Final {
		return ReasonDuplicateSeq // no text to compare: a marker or an interim
	}
	for i := range c.utts {
		u := &c.utts[i]
		if u.Seq == ev.Seq && u.Source == st.source && u.Epoch == st.epoch {
			if u.Text == ev.Text && u.Speaker == ev.Speaker {
				return ReasonDuplicateSeq
			}
			break
		}
	}
	who := "the call's events without a source"
	if st != (stream{}) {
		who = fmt.Sprintf("source %q (epoch %d)", st.source, st.epoch)
	}
	c.lost = fmt.Sprintf("%s sent seq %d again with other words: the publisher restarted without a new epoch, so its new events cannot be told from repeats", who, ev.Seq)
	return ReasonSeqConflict
}

// stale rejects an event whose seq the call cannot place (why): an
// at-least-once publisher re-sending an old "Yes." would otherwise land it
// after a later question, and a truly late event may be the caller's
// "Wait, no.". The call is uncertain until its agent speaks again.
func (c *call) stale(st stream, seq uint64, why string) string {
	who := "an event without a source"
	if st != (stream{}) {
		who = fmt.Sprintf("source %q (epoch %d)", st.source, st.epoch)
	}
	c.lost = fmt.Sprintf("%s: seq %d arrived %s, and was rejected: a repeat cannot be told from a late event", who, seq, why)
	return ReasonStaleSeq
}

// heldGap is a gap settled only by agent speech of response id by.
type heldGap struct {
	by, why string
}

// forgive clears the call's gaps: the agent spoke (with responseID) after
// them, so what they hid is no longer the caller's current turn. A Check
// carrying responseID leaves that speech out as its filler, and for it the
// speech settles nothing: the gap is held for it (c.held) until agent
// speech of another response, or of none, follows.
func (c *call) forgive(responseID string) {
	switch why := c.gap(); {
	case why != "" && responseID != "":
		c.held = heldGap{by: responseID, why: why}
	case responseID == "" || responseID != c.held.by:
		c.held = heldGap{}
	}
	c.legacyJump, c.lost = 0, ""
	for i := range c.trackers {
		tr := &c.trackers[i]
		tr.forgiven, tr.jumped, tr.headMissing = tr.win.max, 0, false
	}
}

// gap says which numbered events of the call have not arrived, or were
// rejected, since the agent last spoke; "" when none.
func (c *call) gap() string {
	if c.lost != "" {
		return c.lost
	}
	if c.legacyJump != 0 {
		return fmt.Sprintf("an event's seq jumped to %d, more than %d past the call's last, and was rejected", c.legacyJump, maxSeqJump)
	}
	for i := range c.trackers {
		if why := c.trackers[i].gap(); why != "" {
			return why
		}
	}
	return ""
}

// gap says which of the run's events have not arrived, or were rejected,
// since the agent last spoke; "" when none.
func (tr *seqTracker) gap() string {
	switch {
	case tr.jumped != 0:
		return fmt.Sprintf("source %q (epoch %d): seq %d jumped more than %d past %d and was rejected", tr.source, tr.epoch, tr.jumped, maxSeqJump, tr.win.max)
	case tr.headMissing && tr.first > tr.forgiven+1 && tr.headReplayed:
		return fmt.Sprintf("source %q (epoch %d): its events before seq %d have not arrived, or are older than what the guard replayed at its start", tr.source, tr.epoch, tr.first)
	case tr.headMissing && tr.first > tr.forgiven+1:
		return fmt.Sprintf("source %q (epoch %d): its events before seq %d have not arrived", tr.source, tr.epoch, tr.first)
	}
	if seq := tr.missing(); seq != 0 {
		return fmt.Sprintf("source %q (epoch %d): seq %d has not arrived (seq %d has)", tr.source, tr.epoch, seq, tr.win.max)
	}
	return ""
}

// missing returns the largest seq between first and the largest seen,
// above forgiven and within the window, that has not arrived; 0 if none.
func (tr *seqTracker) missing() uint64 {
	low := max(tr.first, tr.forgiven+1)
	if tr.win.max > seqWindowSize && low < tr.win.max-seqWindowSize+1 {
		low = tr.win.max - seqWindowSize + 1
	}
	for seq := tr.win.max; seq > low; {
		seq--
		if seen, _ := tr.win.seen(seq); !seen {
			return seq
		}
	}
	return 0
}

// takeToken takes one event from the call's rate bucket at now, refilled
// at rate a second up to burst; false when it is empty. Time going back
// (a replay's older timestamps) refills nothing.
func (c *call) takeToken(now time.Time, rate, burst float64) bool {
	if d := now.Sub(c.refilled); d > 0 {
		c.tokens = min(burst, c.tokens+d.Seconds()*rate)
		c.refilled = now
	}
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

// burst is how many events a call may send at once: two seconds' worth.
func (s *Store) burst() int { return 2 * s.limits.MaxEventsPerSecond }

// apply applies ev to the call and reports whether anything a Snapshot
// shows changed. It adds the utterances MaxCallBytes dropped to *trimmed.
func (c *call) apply(ev *Event, meta Meta, maxUtts int, maxBytes int64, trimmed *int) bool {
	now := meta.At
	c.lastActive = now
	switch ev.Type {
	case TypeTranscript:
		if ev.Final {
			crossed := c.addFinal(ev, meta, maxUtts)
			*trimmed += c.trim(maxBytes)
			if ev.Speaker == Agent {
				c.forgive(ev.ResponseID)
			}
			if crossed != nil {
				// After forgive: this agent speech is itself what the
				// clocks may have misplaced.
				c.lost = fmt.Sprintf("source %q (epoch %d) stamped %q audio time %d ms, before %q of source %q (epoch %d) at %d ms that arrived earlier: "+
					"the two publishers' clocks may not agree, so the order of the caller's and the agent's words is uncertain",
					ev.Source, ev.Epoch, ev.Speaker, crossed.u, crossed.heldSpeaker, crossed.heldSource, crossed.heldEpoch, crossed.held)
			}
			return true
		}
		if ev.Speaker == Caller {
			return c.markInFlight(streamOf(ev), ev.Seq)
		}
	case TypeSpeechStarted:
		if ev.Speaker == Caller {
			return c.markInFlight(streamOf(ev), ev.Seq)
		}
	case TypeSpeechStopped:
		// Only a final ends the caller's turn: the recogniser may still
		// deliver it after the speech stopped.
	case TypeCallEnded:
		if !c.ended {
			c.ended = true
			c.endedAt = now
			return true
		}
	}
	return false
}

func (c *call) markInFlight(st stream, seq uint64) bool {
	if seq != 0 && st == c.lastCallerFinalSrc && seq < c.lastCallerFinalSeq {
		return false // spoken before a final we already hold
	}
	if st != c.inFlightSrc || seq > c.inFlightSeq {
		c.inFlightSeq, c.inFlightSrc = seq, st
	}
	if c.inFlight {
		return false
	}
	c.inFlight = true
	return true
}

// crossing is an utterance placed, by audio time, before a held utterance
// of the other speaker from another publisher run, that arrived earlier.
type crossing struct {
	u, held     int64
	heldSpeaker Speaker
	heldSource  string
	heldEpoch   uint64
}

// addFinal places the final event among the held utterances. It returns
// the crossing when audio time placed it before a held utterance of the
// other speaker from another run: two clocks (two publishers, or one
// across a restart, which may count from 0 again) decided who spoke last,
// and they may not agree; nil otherwise.
func (c *call) addFinal(ev *Event, meta Meta, maxUtts int) *crossing {
	now := meta.At
	c.nextID++
	id := c.nextID
	if meta.StreamSeq != 0 {
		// Every replica reading the stream names the utterance alike.
		id = meta.StreamSeq
	}
	u := Utterance{
		ID:          id,
		Source:      ev.Source,
		Epoch:       ev.Epoch,
		Seq:         ev.Seq,
		Speaker:     ev.Speaker,
		Text:        ev.Text,
		Lang:        ev.Lang,
		ResponseID:  ev.ResponseID,
		Interrupted: ev.Interrupted,
		ReceivedAt:  now,
	}
	if ev.Confidence != nil {
		u.Confidence = *ev.Confidence
	}
	switch {
	case ev.StartMS != nil && ev.EndMS != nil:
		u.StartMS, u.EndMS, u.HasTimes = *ev.StartMS, *ev.EndMS, true
	case ev.EndMS != nil:
		u.StartMS, u.EndMS, u.HasTimes = *ev.EndMS, *ev.EndMS, true
	}

	// Place it. An event without a source goes after every held utterance
	// with a smaller seq, before the first held one with a larger seq;
	// seq-less utterances keep arrival order. An event with a source goes
	// by audio time first, then by its run's seq, then by stream order
	// (arrival). Late events are rare and recent, so scan from the end.
	pos := len(c.utts)
	if st := streamOf(ev); st != (stream{}) {
		for i := len(c.utts) - 1; i >= 0; i-- {
			if before(&c.utts[i], &u) {
				break
			}
			pos = i
		}
	} else if u.Seq != 0 {
		for i := len(c.utts) - 1; i >= 0; i-- {
			s := c.utts[i].Seq
			if s == 0 {
				continue
			}
			if s < u.Seq {
				break
			}
			pos = i
		}
	}
	latest := pos == len(c.utts)
	var crossed *crossing
	if u.HasTimes && ev.Source != "" {
		for i := pos; i < len(c.utts); i++ {
			if h := &c.utts[i]; h.HasTimes && h.Speaker != u.Speaker && (h.Source != u.Source || h.Epoch != u.Epoch) {
				crossed = &crossing{u: u.StartMS, held: h.StartMS, heldSpeaker: h.Speaker, heldSource: h.Source, heldEpoch: h.Epoch}
				break
			}
		}
	}
	if len(c.utts) >= maxUtts {
		if pos == 0 {
			// Older than everything held, and there is no room: it would be
			// the one dropped.
			c.clearInFlightFor(u.Speaker, streamOf(ev), u.Seq)
			return crossed
		}
		// Drop the oldest.
		c.bytes -= utteranceBytes(&c.utts[0])
		copy(c.utts, c.utts[1:])
		c.utts = c.utts[:len(c.utts)-1]
		pos--
	}
	c.utts = slices.Insert(c.utts, pos, u)
	c.bytes += utteranceBytes(&u)

	if u.Lang != "" && latest {
		// A late final carries older news: it does not override the
		// language of a later one.
		c.lang = u.Lang
	}
	c.clearInFlightFor(u.Speaker, streamOf(ev), u.Seq)
	return crossed
}

// trim drops the oldest utterances while the call holds more than
// maxBytes (keeping the latest, which a Check judges), and returns how
// many it dropped.
func (c *call) trim(maxBytes int64) int {
	n := 0
	for c.bytes > maxBytes && len(c.utts) > 1 {
		c.bytes -= utteranceBytes(&c.utts[0])
		c.utts = slices.Delete(c.utts, 0, 1)
		n++
	}
	return n
}

// before reports whether held belongs before u, an utterance with a source:
// by audio time where both have it, else by seq within one run, else held
// came first.
func before(held, u *Utterance) bool {
	if held.HasTimes && u.HasTimes {
		return held.StartMS <= u.StartMS
	}
	if held.Source == u.Source && held.Epoch == u.Epoch && held.Seq != 0 && u.Seq != 0 {
		return held.Seq < u.Seq
	}
	return true
}

// clearInFlightFor applies a final of speaker with seq to the in-flight
// marker: a caller final ends the caller's turn, unless the marker came from
// a later event of the same publisher (the caller already speaks again).
func (c *call) clearInFlightFor(speaker Speaker, st stream, seq uint64) {
	if speaker != Caller {
		return
	}
	if st != c.lastCallerFinalSrc || seq > c.lastCallerFinalSeq {
		c.lastCallerFinalSeq, c.lastCallerFinalSrc = seq, st
	}
	if seq != 0 && st == c.inFlightSrc && c.inFlightSeq > seq {
		return
	}
	c.inFlight = false
	c.inFlightSeq = 0
}

// snapshot copies the call's state with the utterances from index from on.
func (c *call) snapshot(callID string, from int) Snapshot {
	snap := Snapshot{
		CallID:         callID,
		Exists:         true,
		CallerInFlight: c.inFlight,
		Ended:          c.ended,
		Lang:           c.lang,
		Gap:            c.gap(),
		HeldGap:        c.held.why,
		HeldGapBy:      c.held.by,
	}
	if from < len(c.utts) {
		snap.Utterances = slices.Clone(c.utts[from:])
	}
	return snap
}

// tailStart returns the index of the first utterance of the call's last
// maxTurns turns, grouped as groupTurns groups them after leaving out agent
// utterances answering skipResponseID; 0 when maxTurns <= 0. Utterances left
// out that fall after it stay in the tail, where groupTurns leaves them out
// again.
func (c *call) tailStart(skipResponseID string, maxTurns int) int {
	if maxTurns <= 0 {
		return 0
	}
	start, turns := len(c.utts), 0
	var cur Speaker
	for i := len(c.utts) - 1; i >= 0; i-- {
		u := &c.utts[i]
		if skipped(u, skipResponseID) {
			continue
		}
		if turns == 0 || u.Speaker != cur {
			if turns == maxTurns {
				break
			}
			turns++
			cur = u.Speaker
		}
		start = i
	}
	return start
}

func (s *Store) snapshot(callID string) (Snapshot, <-chan struct{}) {
	return s.snapshotTail(callID, "", 0)
}

func (s *Store) snapshotTail(callID, skipResponseID string, maxTurns int) (Snapshot, <-chan struct{}) {
	// Load the new-call channel before looking the call up: if the call is
	// created after the lookup, this channel is closed after it.
	newCall := *s.newCall.Load()
	sh := s.shardOf(callID)
	sh.mu.RLock()
	c := sh.calls[callID]
	if c == nil {
		sh.mu.RUnlock()
		return Snapshot{CallID: callID}, newCall
	}
	if ch := c.changed; ch != nil {
		snap := c.snapshot(callID, c.tailStart(skipResponseID, maxTurns))
		sh.mu.RUnlock()
		return snap, ch
	}
	sh.mu.RUnlock()

	// The first reader since the last change makes the channel, under the
	// write lock.
	sh.mu.Lock()
	c = sh.calls[callID]
	if c == nil { // evicted meanwhile
		sh.mu.Unlock()
		return Snapshot{CallID: callID}, newCall
	}
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	snap, ch := c.snapshot(callID, c.tailStart(skipResponseID, maxTurns)), c.changed
	sh.mu.Unlock()
	return snap, ch
}

// markLost marks every call held uncertain, for why: events may have been
// lost (a slow consumer's dropped messages) and nothing tells which call's.
// Each stays uncertain until its agent speaks again; calls made later are
// not affected.
func (s *Store) markLost(why string) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		var wake []chan struct{}
		sh.mu.Lock()
		for _, c := range sh.calls {
			c.lost = why
			if c.changed != nil {
				wake = append(wake, c.changed)
				c.changed = nil
			}
			n++
		}
		sh.mu.Unlock()
		for _, ch := range wake {
			close(ch)
		}
	}
	return n
}

// evictLocked removes the call; sh.mu must be held.
func (s *Store) evictLocked(sh *shard, callID string, c *call, cause string) {
	delete(sh.calls, callID)
	if c.changed != nil {
		close(c.changed) // waiters re-read and see Exists=false
	}
	s.n.Add(-1)
	s.bytes.Add(-c.bytes)
	s.pubMu.Lock()
	if s.pubs[c.publisher]--; s.pubs[c.publisher] <= 0 {
		delete(s.pubs, c.publisher)
	}
	s.pubMu.Unlock()
	if s.m != nil {
		s.m.ActiveCalls.Dec()
		s.m.CallsEvicted.WithLabelValues(cause).Inc()
	}
}

func (s *Store) sweep(now time.Time) int {
	evicted := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, c := range sh.calls {
			switch {
			case c.holds > 0:
				// A Check in flight keeps its call.
			case c.ended && now.Sub(c.endedAt) > s.limits.EndedTTL:
				s.evictLocked(sh, id, c, "ended")
				evicted++
			case now.Sub(c.lastActive) > s.limits.IdleTTL:
				s.evictLocked(sh, id, c, "idle")
				evicted++
			}
		}
		sh.mu.Unlock()
	}

	return evicted
}

// seqWindow remembers which of the last 256 seqs (counting down from the
// largest seen) were applied, like an anti-replay window: 40 bytes per
// call whatever the traffic.
type seqWindow struct {
	max  uint64    // largest seq seen; 0 when none
	bits [4]uint64 // bit i: seq max-i was seen
}

const seqWindowSize = 256

// seen reports whether seq was seen; inWindow is false when seq is too old
// for the window to know.
func (w *seqWindow) seen(seq uint64) (seen, inWindow bool) {
	if w.max == 0 || seq > w.max {
		return false, true
	}
	d := w.max - seq
	if d >= seqWindowSize {
		return false, false
	}
	return w.bits[d/64]&(1<<(d%64)) != 0, true
}

func (w *seqWindow) add(seq uint64) {
	if seq > w.max {
		w.shift(seq - w.max)
		w.max = seq
		w.bits[0] |= 1
		return
	}
	if d := w.max - seq; d < seqWindowSize {
		w.bits[d/64] |= 1 << (d % 64)
	}
}

// shift moves every bit n places towards older.
func (w *seqWindow) shift(n uint64) {
	if n >= seqWindowSize {
		w.bits = [4]uint64{}
		return
	}
	ws, bs := int(n/64), n%64
	for k := 3; k >= 0; k-- {
		var v uint64
		if j := k - ws; j >= 0 {
			v = w.bits[j] << bs
			if bs != 0 && j-1 >= 0 {
				v |= w.bits[j-1] >> (64 - bs)
			}
		}
		w.bits[k] = v
	}
}

// eventCounters caches the events_total children: WithLabelValues on every
// event would hash the labels each time.
type eventCounters struct {
	vec *prometheus.CounterVec
	c   [4][3]struct {
		once sync.Once
		c    prometheus.Counter
	}
}

var (
	typeNames    = [4]string{string(TypeTranscript), string(TypeSpeechStarted), string(TypeSpeechStopped), string(TypeCallEnded)}
	speakerNames = [3]string{string(Caller), string(Agent), "none"}
)

func typeIndex(t EventType) int {
	switch t {
	case TypeTranscript:
		return 0
	case TypeSpeechStarted:
		return 1
	case TypeSpeechStopped:
		return 2
	case TypeCallEnded:
		return 3
	}
	return -1
}

func speakerIndex(sp Speaker) int {
	switch sp {
	case Caller:
		return 0
	case Agent:
		return 1
	case "":
		return 2
	}
	return -1
}

func (e *eventCounters) inc(ti, si int) {
	if e.vec == nil {
		return
	}
	slot := &e.c[ti][si]
	slot.once.Do(func() { slot.c = e.vec.WithLabelValues(typeNames[ti], speakerNames[si]) })
	slot.c.Inc()
}
