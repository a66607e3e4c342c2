package dedupe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/metrics"
)

// KV is a Book in a JetStream KV bucket that every replica on one NATS
// shares: one truth for reservations, evidence uses and item records.
//
// Rules that hold (beside Book's):
//   - Every claim is an atomic create of its key (a publish expecting no
//     last message on the key's subject), or a compare-and-set on the
//     revision read; never a get-then-put. So of any number of Allows for
//     one action, on any replicas, exactly one creates its key.
//   - Each key has its own TTL (nats-server 2.11 per-message TTL): a
//     reservation MaxRunning while it runs and its window once done, an
//     evidence use EvidenceTTL, an item record its quantity window. The
//     bucket's limit markers tell every replica when a key expired.
//   - Each replica watches the whole bucket into a local mirror: Lookup
//     reads the mirror (no round trip); a duplicate waiting for its
//     original is woken by the mirror's update of the key, whichever
//     replica wrote it (no polling, and no watch per waiter).
//   - An Allow that creates its reservation but finds the turn's evidence
//     or the item taken deletes the reservation again (by its revision);
//     a duplicate that saw it in between judges afresh, as after a failed
//     Complete.
type KV struct {
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	stream string // the bucket's stream
	prefix string // the bucket's subject prefix, "$KV.<bucket>."

	reservations prometheus.Gauge
	unreadable   prometheus.Counter // item records that did not decode

	mu   sync.Mutex
	keys map[string]*mirrored // by key
	// byDecision maps a reservation's decision id to its key.
	byDecision map[string]string
	applied    uint64        // the bucket's last revision the mirror applied
	changed    chan struct{} // closed and replaced at every applied update
	// waiters are closed at the next update of their key: what wakes a
	// duplicate waiting for its original.
	waiters map[string]chan struct{}
	ready   chan struct{} // closed once the initial values are in
	watcher jetstream.KeyWatcher
	stop    context.CancelFunc
	done    chan struct{}

	// abandoned maps the decisions whose claim failed to when they may be
	// forgotten; their keys are released (orphan.go).
	abandoned     map[string]time.Time
	reconcileQ    chan orphanJob
	reconcileDone chan struct{}
}

var _ Book = (*KV)(nil)

// mirrored is the mirror's copy of one key: its latest revision, and its
// value unless deleted (or expired).
type mirrored struct {
	rev     uint64
	deleted bool
	at      time.Time // when the mirror applied it, for sweeping tombstones
	res     *kvReservationValue
	uses    []kvUse // item records
	// badItem is when an item record that did not decode was written
	// (unix ns; 0 for a good one): it counts as a live use for the
	// quantity window from then (unreadableItemLive), so a poisoned
	// record fails closed.
	badItem int64
	// evidence names the decision of an evidence use; evArgs is the
	// arguments' hash it allowed, evFailed set once that action failed.
	evidence string
	evArgs   string
	evFailed bool
}

// evidenceBlocks reports whether an evidence use in the mirror forbids
// key: it does unless its action failed and key is that action again.
func (m *mirrored) evidenceBlocks(key Key) bool {
	return m != nil && !m.deleted && m.evidence != "" && !(m.evFailed && m.evArgs == key.ArgsHash)
}

// kvReservationValue is a reservation's value in the bucket.
type kvReservationValue struct {
	DecisionID string          `json:"d"`
	CallID     string          `json:"c"`
	Tool       string          `json:"t"`
	ArgsHash   string          `json:"h"`
	Reserved   int64           `json:"at"` // unix ns
	Window     int64           `json:"w"`  // ns
	TurnID     uint64          `json:"turn,omitempty"`
	TurnTTL    int64           `json:"ettl,omitempty"`
	Item       string          `json:"item,omitempty"`
	ItemWindow int64           `json:"iw,omitempty"`
	Done       bool            `json:"done,omitempty"`
	Result     json.RawMessage `json:"r,omitempty"`
	// Owner is Request.Owner: only it may Complete (every replica reads
	// it from here).
	Owner string `json:"o,omitempty"`
}

// kvUse is one item record.
type kvUse struct {
	DecisionID string `json:"d"`
	Until      int64  `json:"u"` // unix ns
}

// kvEvidence is an evidence use's value: the decision that used the turn,
// the arguments' hash it allowed, and whether that action failed (then
// the same action may claim the turn again, and no other).
type kvEvidence struct {
	DecisionID string `json:"d"`
	ArgsHash   string `json:"h,omitempty"`
	Failed     bool   `json:"f,omitempty"`
}

// NewKV starts a book on the bucket kv, which must have been created with
// a LimitMarkerTTL (per-key TTLs); js is the connection's JetStream. It
// returns once the mirror holds the bucket's current values, or ctx ends.
func NewKV(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, reg prometheus.Registerer) (*KV, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("dedupe: bucket status: %w", err)
	}
	b := &KV{
		kv: kv, js: js, prefix: "$KV." + kv.Bucket() + ".",
		reservations: metrics.NewGauge(nil, metrics.Reservations), // registered once the book works
		unreadable:   metrics.NewCounter(nil, metrics.DedupeUnreadable),
		keys:         map[string]*mirrored{},
		byDecision:   map[string]string{},
		waiters:      map[string]chan struct{}{},
		changed:      make(chan struct{}),
		ready:        make(chan struct{}),
		done:         make(chan struct{}),

		abandoned:     map[string]time.Time{},
		reconcileQ:    make(chan orphanJob, reconcileQueue),
		reconcileDone: make(chan struct{}),
	}
	if si, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		b.stream = si.StreamInfo().Config.Name
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("dedupe: watch the bucket: %w", err)
	}
	b.watcher, b.stop = w, cancel
	go b.watch()
	go b.reconciler(wctx)
	select {
	case <-b.ready:
		if reg != nil {
			reg.MustRegister(b.reservations, b.unreadable)
		}
		return b, nil
	case <-ctx.Done():
		b.Close()
		return nil, fmt.Errorf("dedupe: the bucket's values did not arrive: %w", ctx.Err())
	}
}

// Close stops the mirror.
func (b *KV) Close() {
	b.stop()
	_ = b.watcher.Stop()
	<-b.done
	<-b.reconcileDone
}

func (b *KV) watch() {
	defer close(b.done)
	initial := true
	for e := range b.watcher.Updates() {
		if e == nil {
			if initial {
				initial = false
				close(b.ready)
			}
			continue
		}
		b.apply(e)
	}
}

// apply takes one update of the bucket into the mirror and wakes the
// waiters.
func (b *KV) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	m := &mirrored{rev: e.Revision(), at: time.Now()}
	if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
		m.deleted = true
	} else {
		switch key[0] {
		case 'r':
			v := new(kvReservationValue)
			if json.Unmarshal(e.Value(), v) == nil {
				m.res = v
			}
		case 'e':
			var v kvEvidence
			if json.Unmarshal(e.Value(), &v) == nil {
				m.evidence, m.evArgs, m.evFailed = v.DecisionID, v.ArgsHash, v.Failed
			}
		case 'i':
			if json.Unmarshal(e.Value(), &m.uses) != nil {
				m.uses, m.badItem = nil, e.Created().UnixNano()
				b.unreadable.Inc()
			}
		}
	}
	b.mu.Lock()
	if old := b.keys[key]; old != nil && old.rev > m.rev {
		b.mu.Unlock()
		return // a replay of an older revision after a watcher reset
	}
	if old := b.keys[key]; old != nil && old.res != nil && !old.deleted {
		if b.byDecision[old.res.DecisionID] == key && (m.res == nil || m.res.DecisionID != old.res.DecisionID) {
			delete(b.byDecision, old.res.DecisionID)
			b.reservations.Dec()
		}
	}
	if m.res != nil {
		if b.byDecision[m.res.DecisionID] != key {
			b.byDecision[m.res.DecisionID] = key
			b.reservations.Inc()
		}
	}
	b.keys[key] = m
	b.applied = max(b.applied, m.rev)
	old, w := b.changed, b.waiters[key]
	b.changed = make(chan struct{})
	delete(b.waiters, key)
	orphan := b.orphanOf(m)
	b.mu.Unlock()
	close(old)
	if w != nil {
		close(w)
	}
	if orphan != "" {
		// A claim whose Allow failed, stored after all.
		b.enqueue(orphanJob{id: orphan, keys: []string{key}, probes: 1})
	}
}

// waiterLocked returns the channel closed at key's next update. b.mu must
// be held.
func (b *KV) waiterLocked(key string) chan struct{} {
	w := b.waiters[key]
	if w == nil {
		w = make(chan struct{})
		b.waiters[key] = w
	}
	return w
}

// Sweep forgets the mirror's tombstones older than a minute (a deleted
// key's revision is kept that long so that a late replay of it is told
// apart), and returns how many.
func (b *KV) Sweep(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for k, m := range b.keys {
		if m.deleted && now.Sub(m.at) > time.Minute {
			delete(b.keys, k)
			n++
		}
	}
	return n + b.sweepAbandonedLocked(now)
}

// Keys of the bucket: r. reservations, e. evidence uses, i. item records,
// a. the guard's questions issued for an action, each a hash of what names it (KV keys take few characters).
func keyOf(kind byte, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return string(kind) + "." + hex.EncodeToString(h.Sum(nil)[:20])
}

func reservationKey(k Key) string { return keyOf('r', k.CallID, k.Tool, k.ArgsHash) }
func evidenceKeyOf(call string, turn uint64, tool string) string {
	return keyOf('e', call, strconv.FormatUint(turn, 10), tool)
}
func itemKeyOf(call, tool, item string) string { return keyOf('i', call, tool, item) }

// live reports whether the reservation value v reserves its key at now:
// within its window, or, while running, within MaxRunning of the ALLOW.
// (Its key's TTL says the same on the server.)
func (v *kvReservationValue) live(now time.Time) bool {
	reserved := time.Unix(0, v.Reserved)
	if now.Before(reserved.Add(time.Duration(v.Window))) {
		return true
	}
	return !v.Done && now.Before(reserved.Add(MaxRunning))
}

// Lookup reads the mirror; it never fails.
func (b *KV) Lookup(_ context.Context, req Request) (Verdict, Reservation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.checkLocked(&req)
}

// checkLocked runs Allow's three checks on the mirror. b.mu must be held.
func (b *KV) checkLocked(req *Request) (Verdict, Reservation, error) {
	now := req.Now
	if m := b.keys[reservationKey(req.Key)]; m != nil && !m.deleted && m.res != nil && m.res.live(now) && b.orphanOf(m) == "" {
		return Duplicate, b.handle(reservationKey(req.Key), m.rev, m.res.DecisionID), nil
	}
	if req.TurnID != 0 {
		if m := b.keys[evidenceKeyOf(req.Key.CallID, req.TurnID, req.Key.Tool)]; m.evidenceBlocks(req.Key) {
			return EvidenceUsed, b.handleOf(m.evidence), nil
		}
	}
	if req.Item != "" && !req.ExplicitQuantity {
		if m := b.keys[itemKeyOf(req.Key.CallID, req.Key.Tool, req.Item)]; m != nil && !m.deleted {
			if u, ok := liveUse(m.uses, now); ok {
				return QuantityRepeat, b.handleOf(u.DecisionID), nil
			}
			if m.badItem != 0 && unreadableItemLive(m.badItem, req) {
				return QuantityRepeat, b.handleOf(""), nil
			}
		}
	}
	return OK, nil, nil
}

// unreadableItemLive reports whether an item record that did not decode,
// written at written (unix ns), still counts as a live use for req: for
// the quantity window from its write. Fail closed, and bounded: the same
// item again is QUANTITY_REPEAT until then, never allowed on a record the
// guard cannot read.
func unreadableItemLive(written int64, req *Request) bool {
	return req.Now.UnixNano() < written+int64(req.ItemWindow)
}

func liveUse(uses []kvUse, now time.Time) (kvUse, bool) {
	for i := len(uses) - 1; i >= 0; i-- {
		if now.UnixNano() < uses[i].Until {
			return uses[i], true
		}
	}
	return kvUse{}, false
}

// handleOf is the reservation of decisionID as the mirror knows it (or a
// handle that only names it, for an original whose reservation is gone).
// b.mu must be held.
func (b *KV) handleOf(decisionID string) *kvReservation {
	key := b.byDecision[decisionID]
	rev := uint64(0)
	if m := b.keys[key]; m != nil {
		rev = m.rev
	}
	return b.handle(key, rev, decisionID)
}

func (b *KV) handle(key string, rev uint64, decisionID string) *kvReservation {
	return &kvReservation{b: b, key: key, rev: rev, decisionID: decisionID}
}

// ttlOf rounds d up to whole seconds, at least one: the per-message TTL's
// grain.
func ttlOf(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// Allow claims the reservation, then the turn's evidence, then the item,
// each atomically; a later claim that fails releases the earlier ones. An
// Allow that fails abandons its decision: whatever of its claims reaches
// the bucket later is released (orphan.go).
func (b *KV) Allow(ctx context.Context, req Request) (Verdict, Reservation, error) {
	v, r, err := b.allow(ctx, req)
	if err != nil {
		b.abandon(&req)
	}
	return v, r, err
}

func (b *KV) allow(ctx context.Context, req Request) (Verdict, Reservation, error) {
	b.mu.Lock()
	v, orig, _ := b.checkLocked(&req)
	b.mu.Unlock()
	if v != OK {
		return v, orig, nil
	}
	rkey := reservationKey(req.Key)
	val := kvReservationValue{
		DecisionID: req.DecisionID, CallID: req.Key.CallID, Tool: req.Key.Tool, ArgsHash: req.Key.ArgsHash,
		Reserved: req.Now.UnixNano(), Window: int64(req.Window), Owner: req.Owner,
	}
	if req.TurnID != 0 && req.EvidenceTTL > 0 {
		val.TurnID, val.TurnTTL = req.TurnID, int64(req.EvidenceTTL)
	}
	if req.Item != "" && req.ItemWindow > 0 {
		val.Item, val.ItemWindow = req.Item, int64(req.ItemWindow)
	}
	data, _ := json.Marshal(&val)
	var rev uint64
	for attempt := 0; ; attempt++ {
		var err error
		rev, err = b.create(ctx, rkey, data, MaxRunning)
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return OK, nil, fmt.Errorf("claim the reservation: %w", err)
		}
		// Another replica's ALLOW holds it: a duplicate of that one,
		// unless it was released meanwhile.
		v, orig, again, err := b.existing(ctx, rkey)
		if !again || attempt == 3 {
			return v, orig, err
		}
	}
	release := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catchUpWait)
		defer cancel()
		if b.kv.Delete(dctx, rkey, jetstream.LastRevision(rev)) == nil {
			b.waitRevision(ctx, rkey, rev)
		} else {
			b.abandon(&req) // not a claim any longer: released once NATS takes it
		}
	}

	retaken := false
	if val.TurnID != 0 {
		ekey := evidenceKeyOf(req.Key.CallID, req.TurnID, req.Key.Tool)
		ev, _ := json.Marshal(kvEvidence{DecisionID: req.DecisionID, ArgsHash: req.Key.ArgsHash})
		_, err := b.create(ctx, ekey, ev, req.EvidenceTTL)
		if errors.Is(err, jetstream.ErrKeyExists) {
			// The same action again after it failed takes the turn over,
			// by the revision of the failed use; anything else is refused.
			err = b.retakeEvidence(ctx, ekey, req.Key, ev, req.EvidenceTTL)
			retaken = err == nil
		}
		if err != nil {
			release()
			if errors.Is(err, jetstream.ErrKeyExists) || isConflict(err) {
				return EvidenceUsed, b.ownerOf(ctx, ekey), nil
			}
			return OK, nil, fmt.Errorf("claim the evidence: %w", err)
		}
	}
	if val.Item != "" {
		if v, orig, err := b.recordItem(ctx, &req); err != nil || v != OK {
			release()
			switch {
			case retaken:
				// The turn held a failed use of this same action: it goes
				// back to that, not to nobody (other arguments stay
				// refused on it, as in the memory book).
				b.failEvidence(context.WithoutCancel(ctx), &val)
			case val.TurnID != 0:
				b.deleteIf(context.WithoutCancel(ctx), evidenceKeyOf(req.Key.CallID, req.TurnID, req.Key.Tool), req.DecisionID)
			}
			return v, orig, err
		}
	}
	return OK, b.handle(rkey, rev, req.DecisionID), nil
}

// create publishes value to key if the key holds nothing (or a delete
// marker), with the key's own TTL.
func (b *KV) create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	return b.kv.Create(ctx, key, value, jetstream.KeyTTL(ttlOf(ttl)))
}

// update publishes value to key if its last revision is rev, with a TTL.
func (b *KV) update(ctx context.Context, key string, value []byte, rev uint64, ttl time.Duration) (uint64, error) {
	ack, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: b.prefix + key, Data: value},
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttlOf(ttl)))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// existing answers Duplicate with the reservation another Allow created,
// found in the mirror or read from the bucket. A read may come from a
// follower that has not seen the key yet: then it waits (bounded) for the
// mirror to. again: the key was deleted meanwhile, so the claim may be
// tried again.
func (b *KV) existing(ctx context.Context, key string) (v Verdict, orig Reservation, again bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	// reclaim releases this replica's own refused claim of id, so that the
	// claim is tried again.
	reclaim := func(id string) (Verdict, Reservation, bool, error) {
		if err := b.releaseOrphan(wctx, key, id); err != nil && !isConflict(err) {
			return OK, nil, false, fmt.Errorf("release an abandoned claim: %w", err)
		}
		return OK, nil, true, nil
	}
	for {
		b.mu.Lock()
		m := b.keys[key]
		if id := b.orphanOf(m); id != "" {
			b.mu.Unlock()
			return reclaim(id)
		}
		if m != nil && !m.deleted && m.res != nil {
			h := b.handle(key, m.rev, m.res.DecisionID)
			b.mu.Unlock()
			return Duplicate, h, false, nil
		}
		changed := b.waiterLocked(key)
		b.mu.Unlock()
		if m != nil && m.deleted {
			return OK, nil, true, nil
		}
		e, err := b.kv.Get(wctx, key)
		if err == nil {
			var val kvReservationValue
			if err := json.Unmarshal(e.Value(), &val); err != nil {
				return OK, nil, false, fmt.Errorf("read the reservation held: %w", err)
			}
			b.mu.Lock()
			orphan := !val.Done && b.abandonedLocked(val.DecisionID)
			b.mu.Unlock()
			if orphan {
				return reclaim(val.DecisionID)
			}
			return Duplicate, b.handle(key, e.Revision(), val.DecisionID), false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
			return OK, nil, false, fmt.Errorf("read the reservation held: %w", err)
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
		case <-wctx.Done():
			return OK, nil, true, nil
		}
	}
}

// retakeEvidence claims an evidence key that a failed use of the same
// action holds, by compare-and-set on that use's revision. It answers
// ErrKeyExists when the use is not one key may retake.
func (b *KV) retakeEvidence(ctx context.Context, ekey string, key Key, value []byte, ttl time.Duration) error {
	e, err := b.kv.Get(ctx, ekey)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return jetstream.ErrKeyExists // gone meanwhile: let the caller judge it held, and fail closed
		}
		return err
	}
	var v kvEvidence
	if json.Unmarshal(e.Value(), &v) != nil || !v.Failed || v.ArgsHash != key.ArgsHash {
		return jetstream.ErrKeyExists
	}
	_, err = b.update(ctx, ekey, value, e.Revision(), ttl)
	return err
}

// ownerOf is the reservation of the decision that holds an evidence key.
func (b *KV) ownerOf(ctx context.Context, key string) Reservation {
	b.mu.Lock()
	if m := b.keys[key]; m != nil && !m.deleted && m.evidence != "" {
		defer b.mu.Unlock()
		return b.handleOf(m.evidence)
	}
	b.mu.Unlock()
	id := ""
	if e, err := b.kv.Get(ctx, key); err == nil {
		var v kvEvidence
		if json.Unmarshal(e.Value(), &v) == nil {
			id = v.DecisionID
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.handleOf(id)
}

// recordItem adds req's use to its item's record, by compare-and-set.
func (b *KV) recordItem(ctx context.Context, req *Request) (Verdict, Reservation, error) {
	key := itemKeyOf(req.Key.CallID, req.Key.Tool, req.Item)
	for range 8 {
		var uses []kvUse
		rev := uint64(0)
		e, err := b.kv.Get(ctx, key)
		switch {
		case err == nil:
			rev = e.Revision()
			if json.Unmarshal(e.Value(), &uses) != nil {
				// Not a record this guard wrote: a live use until its
				// window from the write ends (counted by the mirror).
				if !req.ExplicitQuantity && unreadableItemLive(e.Created().UnixNano(), req) {
					b.mu.Lock()
					h := b.handleOf("")
					b.mu.Unlock()
					return QuantityRepeat, h, nil
				}
				uses = nil
			}
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return OK, nil, fmt.Errorf("read the item record: %w", err)
		}
		now := req.Now.UnixNano()
		if u, ok := liveUse(uses, req.Now); ok && !req.ExplicitQuantity {
			b.mu.Lock()
			h := b.handleOf(u.DecisionID)
			b.mu.Unlock()
			return QuantityRepeat, h, nil
		}
		kept := uses[:0]
		for _, u := range uses {
			if u.Until > now {
				kept = append(kept, u)
			}
		}
		kept = append(kept, kvUse{DecisionID: req.DecisionID, Until: now + int64(req.ItemWindow)})
		data, _ := json.Marshal(kept)
		if rev == 0 {
			_, err = b.create(ctx, key, data, req.ItemWindow)
		} else {
			_, err = b.update(ctx, key, data, rev, req.ItemWindow)
		}
		if err == nil {
			return OK, nil, nil
		}
		if !isConflict(err) {
			return OK, nil, fmt.Errorf("record the item: %w", err)
		}
	}
	return OK, nil, errors.New("record the item: too many concurrent writers")
}

// isConflict reports whether err is a lost compare-and-set.
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}

// failEvidence marks v's evidence use failed, by compare-and-set, where it
// still names v's decision; it keeps the use's expiry.
func (b *KV) failEvidence(ctx context.Context, v *kvReservationValue) {
	key := evidenceKeyOf(v.CallID, v.TurnID, v.Tool)
	left := time.Until(time.Unix(0, v.Reserved).Add(time.Duration(v.TurnTTL)))
	if left <= 0 {
		return // expired: nothing left to mark
	}
	data, _ := json.Marshal(kvEvidence{DecisionID: v.DecisionID, ArgsHash: v.ArgsHash, Failed: true})
	for range 8 {
		e, err := b.kv.Get(ctx, key)
		if err != nil {
			return
		}
		var cur kvEvidence
		if json.Unmarshal(e.Value(), &cur) != nil || cur.DecisionID != v.DecisionID {
			return
		}
		rev, err := b.update(ctx, key, data, e.Revision(), left)
		if err == nil {
			b.waitRevision(ctx, key, rev-1)
			return
		}
		if !isConflict(err) {
			return
		}
	}
}

// deleteIf deletes an evidence key if it still names decisionID, by the
// revision the mirror holds (a read from a follower may be stale), else the
// one read.
func (b *KV) deleteIf(ctx context.Context, key, decisionID string) {
	b.mu.Lock()
	m := b.keys[key]
	b.mu.Unlock()
	if m != nil && !m.deleted && m.evidence == decisionID {
		if err := b.kv.Delete(ctx, key, jetstream.LastRevision(m.rev)); err == nil {
			b.waitRevision(ctx, key, m.rev)
			return
		}
	}
	e, err := b.kv.Get(ctx, key)
	if err != nil {
		return
	}
	var v kvEvidence
	if json.Unmarshal(e.Value(), &v) == nil && v.DecisionID == decisionID {
		_ = b.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
	}
}

// catchUpWait bounds how long Complete waits for the mirror to learn of a
// reservation another replica made moments ago.
const catchUpWait = 2 * time.Second

// find returns the key and mirror entry of decisionID's reservation,
// waiting (bounded) for the mirror to apply every update the bucket held
// when it was called.
func (b *KV) find(ctx context.Context, decisionID string) (string, *mirrored, error) {
	b.mu.Lock()
	key := b.byDecision[decisionID]
	m := b.keys[key]
	b.mu.Unlock()
	if key != "" && m != nil {
		return key, m, nil
	}
	info, err := b.js.Stream(ctx, b.streamName())
	if err != nil {
		return "", nil, fmt.Errorf("read the bucket's state: %w", err)
	}
	last := info.CachedInfo().State.LastSeq
	wctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	for {
		b.mu.Lock()
		key, applied, changed := b.byDecision[decisionID], b.applied, b.changed
		m = b.keys[key]
		b.mu.Unlock()
		if key != "" && m != nil {
			return key, m, nil
		}
		if applied >= last {
			return "", nil, ErrUnknownDecision
		}
		select {
		case <-changed:
		case <-wctx.Done():
			return "", nil, ErrUnknownDecision
		}
	}
}

func (b *KV) streamName() string {
	if b.stream != "" {
		return b.stream
	}
	return "KV_" + b.kv.Bucket()
}

// Complete records the result by compare-and-set on the reservation's
// revision; failed deletes it, and its evidence use and item record.
func (b *KV) Complete(ctx context.Context, decisionID, owner string, result *structpb.Struct, failed bool) (Key, error) {
	for range 8 {
		key, m, err := b.find(ctx, decisionID)
		if err != nil {
			return Key{}, err
		}
		if m.deleted || m.res == nil || m.res.DecisionID != decisionID {
			return Key{}, ErrUnknownDecision
		}
		v := *m.res
		k := Key{CallID: v.CallID, Tool: v.Tool, ArgsHash: v.ArgsHash}
		if !mayComplete(v.Owner, owner) {
			return k, ErrNotOwner
		}
		if v.Done {
			return k, ErrAlreadyCompleted
		}
		if failed {
			err = b.kv.Delete(ctx, key, jetstream.LastRevision(m.rev))
		} else {
			v.Done = true
			if result != nil {
				v.Result, _ = protojson.Marshal(result)
			}
			data, _ := json.Marshal(&v)
			left := time.Until(time.Unix(0, v.Reserved).Add(time.Duration(v.Window)))
			_, err = b.update(ctx, key, data, m.rev, left)
		}
		if err == nil {
			if failed {
				b.releaseRecords(context.WithoutCancel(ctx), &v)
			}
			// What this replica answers next reflects the Complete.
			b.waitRevision(ctx, key, m.rev)
			return k, nil
		}
		if !isConflict(err) {
			return k, fmt.Errorf("complete the reservation: %w", err)
		}
		// Another replica changed it first: wait for the mirror to see
		// that, then decide again.
		b.waitRevision(ctx, key, m.rev)
	}
	return Key{}, errors.New("complete the reservation: too many concurrent writers")
}

// releaseRecords marks the evidence use of a failed reservation failed
// (the same action may use the turn again, no other) and deletes its
// item record, where they still name it.
func (b *KV) releaseRecords(ctx context.Context, v *kvReservationValue) {
	if v.TurnID != 0 {
		b.failEvidence(ctx, v)
	}
	if v.Item == "" {
		return
	}
	key := itemKeyOf(v.CallID, v.Tool, v.Item)
	for range 8 {
		e, err := b.kv.Get(ctx, key)
		if err != nil {
			return
		}
		var uses []kvUse
		_ = json.Unmarshal(e.Value(), &uses)
		kept := uses[:0]
		latest := int64(0)
		for _, u := range uses {
			if u.DecisionID != v.DecisionID {
				kept = append(kept, u)
				latest = max(latest, u.Until)
			}
		}
		if len(kept) == len(uses) {
			return
		}
		if len(kept) == 0 {
			err = b.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		} else {
			data, _ := json.Marshal(kept)
			_, err = b.update(ctx, key, data, e.Revision(), time.Until(time.Unix(0, latest)))
		}
		if err == nil || !isConflict(err) {
			return
		}
	}
}

// waitRevision waits (bounded) until the mirror holds a revision of key
// newer than rev.
func (b *KV) waitRevision(ctx context.Context, key string, rev uint64) {
	wctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	for {
		b.mu.Lock()
		m := b.keys[key]
		changed := b.waiterLocked(key)
		b.mu.Unlock()
		if m != nil && m.rev > rev {
			return
		}
		select {
		case <-changed:
		case <-wctx.Done():
			return
		}
	}
}

// kvReservation is a reservation as the mirror shows it.
type kvReservation struct {
	b          *KV
	key        string
	rev        uint64 // the revision it was known at: older news is not news
	decisionID string
}

func (r *kvReservation) DecisionID() string { return r.decisionID }

// Result reads the mirror: done once the value says so (with its result),
// failed once the key is deleted, expired or taken by another decision.
func (r *kvReservation) Result() (*structpb.Struct, bool, bool) {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.resultLocked()
}

func (r *kvReservation) resultLocked() (*structpb.Struct, bool, bool) {
	if r.key == "" {
		return nil, false, false // nothing to follow: still running, as far as anyone knows
	}
	m := r.b.keys[r.key]
	switch {
	case m == nil || m.rev < r.rev:
		return nil, false, false // the mirror has not caught up with it yet
	case m.deleted || m.res == nil || m.res.DecisionID != r.decisionID:
		return nil, true, true
	case !m.res.Done:
		return nil, false, false
	}
	if len(m.res.Result) == 0 {
		return nil, false, true
	}
	res := new(structpb.Struct)
	if err := protojson.Unmarshal(m.res.Result, res); err != nil {
		return nil, false, true
	}
	return res, false, true
}

// Wait waits on the mirror's updates.
func (r *kvReservation) Wait(ctx context.Context) (*structpb.Struct, bool, bool) {
	if r.key == "" {
		<-ctx.Done()
		return r.Result()
	}
	for {
		r.b.mu.Lock()
		res, failed, done := r.resultLocked()
		var changed chan struct{}
		if !done {
			changed = r.b.waiterLocked(r.key)
		}
		r.b.mu.Unlock()
		if done {
			return res, failed, done
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return r.Result()
		}
	}
}

// BucketConfig is the bucket a KV book needs: per-key TTLs (with limit
// markers, so that every replica's mirror learns of an expiry), one
// revision per key, values up to a reservation with its largest result,
// and replicas copies on a cluster.
func BucketConfig(bucket string, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         bucket,
		Description:    "yesguard: reservations, evidence uses and item records",
		History:        1,
		MaxValueSize:   256 << 10,
		LimitMarkerTTL: time.Minute,
		Storage:        jetstream.FileStorage,
		Replicas:       max(replicas, 1),
	}
}
