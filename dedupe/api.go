// Package dedupe keeps the reservations that stop one yes, or one retried
// call, from running an action twice. A Book is where they are held:
// Memory keeps them in this process, for one replica; KV in a JetStream
// bucket that every replica on one NATS shares.
//
// Rules that hold:
//   - An ALLOW reserves its action key (call, tool, canonical arguments) for
//     the duplicate window, measured from the ALLOW. Of any number of
//     concurrent Allow calls for one key, exactly one succeeds.
//   - The caller turn that allowed a tool cannot allow that tool again, with
//     any arguments, for as long as the evidence is remembered (EvidenceTTL).
//   - A record tool's item is remembered for the quantity window.
//   - A failed completion releases the reservation and the item record, so
//     a retry of the same action is judged afresh: failures are never
//     replayed. The turn's evidence use stays, bound to the arguments it
//     allowed: the yes the caller gave to that action is not fresh consent
//     for other arguments (EvidenceUsed), only for the same action again.
//   - A reservation remembers who got its ALLOW (Request.Owner); Complete
//     by anyone else is ErrNotOwner and changes nothing, in every Book, so
//     that it holds across the replicas sharing a KV bucket.
//   - Everything expires; Sweep bounds memory.
package dedupe

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/metrics"
)

// Book holds the reservations, evidence uses and item records of every
// call. Implementations are safe for concurrent use. An error means the
// book could not answer (its store is unreachable): the caller must fail
// closed.
type Book interface {
	// Lookup tells, without reserving, what Allow would answer for req
	// now. It lets a Check skip the wait for the transcript when the
	// answer is already known. For Duplicate, EvidenceUsed and
	// QuantityRepeat it returns the reservation of the original decision.
	Lookup(ctx context.Context, req Request) (Verdict, Reservation, error)
	// Allow reserves req atomically: OK and a new reservation, or the
	// verdict that forbids it and the original's reservation. Of any
	// number of concurrent Allows for one key, exactly one is OK.
	Allow(ctx context.Context, req Request) (Verdict, Reservation, error)
	// Complete records the result of an allowed action and returns the
	// action's key. failed releases the reservation and the item record,
	// and leaves the evidence use for the same arguments only. It returns ErrUnknownDecision when decisionID holds
	// no reservation (never allowed, already failed, or expired) and
	// ErrAlreadyCompleted when it was already completed successfully.
	// owner must be the Owner of the ALLOW's Request, or AnyOwner (the
	// caller proved its authority otherwise); another is ErrNotOwner, and
	// nothing changes.
	Complete(ctx context.Context, decisionID, owner string, result *structpb.Struct, failed bool) (Key, error)
}

// Reservation is one allowed action, as a duplicate of it sees it.
type Reservation interface {
	// DecisionID is the ALLOW that made the reservation.
	DecisionID() string
	// Result returns the completion without waiting: done is false while
	// the action runs; failed tells a failed completion. The result is
	// shared by every reader and must not be modified.
	Result() (result *structpb.Struct, failed, done bool)
	// Wait blocks until the action completes or ctx ends, and returns
	// Result then.
	Wait(ctx context.Context) (result *structpb.Struct, failed, done bool)
}

var _ Book = (*Memory)(nil)

// ErrUnknownDecision is returned by Complete for a decision id that holds no
// reservation (never allowed, already failed, or expired).
var ErrUnknownDecision = errors.New("no reservation for that decision id")

// ErrAlreadyCompleted is returned by Complete for a decision whose
// reservation was already completed successfully. The first result stands.
var ErrAlreadyCompleted = errors.New("reservation already completed")

// ErrNotOwner is returned by Complete when its owner is not the one whose
// Check got the ALLOW.
var ErrNotOwner = errors.New("the reservation belongs to another caller")

// AnyOwner, as Complete's owner, completes whoever holds the reservation:
// for a caller that proved its authority otherwise (it presents the
// ALLOW's signed approval) and for the guard's own releases.
const AnyOwner = "\x00any"

// mayComplete reports whether owner may complete a reservation held by
// held.
func mayComplete(held, owner string) bool { return owner == AnyOwner || owner == held }

// MaxRunning bounds how long an action that was allowed but never completed
// keeps its key reserved past its window: a lost Complete cannot hold a key
// for longer than this from the ALLOW.
const MaxRunning = 10 * time.Minute

// Key names one action.
type Key struct {
	CallID   string
	Tool     string
	ArgsHash string
}

// Request is what an ALLOW would reserve.
type Request struct {
	Key        Key
	DecisionID string
	Now        time.Time
	// Window is the duplicate window for Key.
	Window time.Duration
	// TurnID names the caller turn used as evidence; 0 means none (e.g.
	// NOT_REQUIRED), and then no evidence is recorded.
	TurnID uint64
	// EvidenceTTL is how long the turn's use is remembered.
	EvidenceTTL time.Duration
	// Item names the recorded item for a record tool ("" when not one).
	Item string
	// ItemWindow is the quantity window.
	ItemWindow time.Duration
	// ExplicitQuantity lets a repeat of Item through.
	ExplicitQuantity bool
	// Owner is who asked (the service's caller identity; "" is the one
	// identity of a guard without tokens): only Owner may Complete the
	// reservation.
	Owner string
}

// Verdict is the result of Allow or Lookup.
type Verdict int

// Verdicts.
const (
	OK Verdict = iota
	Duplicate
	EvidenceUsed
	QuantityRepeat
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case OK:
		return "ok"
	case Duplicate:
		return "duplicate"
	case EvidenceUsed:
		return "evidence_used"
	case QuantityRepeat:
		return "quantity_repeat"
	}
	return "unknown"
}

// reservation is one allowed action held in memory.
type reservation struct {
	decisionID string
	key        Key
	reserved   time.Time
	window     time.Duration
	turnID     uint64
	item       string
	owner      string

	// done is closed once, by Complete, after result and failed are set;
	// the close publishes them to readers that saw it closed.
	done   chan struct{}
	result *structpb.Struct
	failed bool

	// completed is guarded by the lock of the call's shard.
	completed bool
}

// DecisionID is the ALLOW that made the reservation.
func (r *reservation) DecisionID() string { return r.decisionID }

// Wait blocks until the reservation's action completes or ctx ends. done is
// false when ctx ended first; failed tells a failed completion.
//
// The result is shared by every waiter and must not be modified.
func (r *reservation) Wait(ctx context.Context) (result *structpb.Struct, failed, done bool) {
	select {
	case <-r.done:
		return r.result, r.failed, true
	case <-ctx.Done():
		// A completion that raced the context still counts.
		return r.Result()
	}
}

// Result returns the completion without waiting.
//
// The result is shared by every waiter and must not be modified.
func (r *reservation) Result() (result *structpb.Struct, failed, done bool) {
	select {
	case <-r.done:
		return r.result, r.failed, true
	default:
		return nil, false, false
	}
}

// live reports whether r still reserves its key at now: within its window,
// or, while not completed, within MaxRunning of the ALLOW.
func (r *reservation) live(now time.Time) bool {
	if now.Before(r.reserved.Add(r.window)) {
		return true
	}
	return !r.completed && now.Before(r.reserved.Add(MaxRunning))
}

type evidenceKey struct {
	callID string
	turnID uint64
	tool   string
}

type itemKey struct {
	callID string
	tool   string
	item   string
}

// use is one remembered evidence use or item record.
type use struct {
	res   *reservation
	until time.Time
}

// retries reports whether an evidence use leaves key through: its action
// failed (the reservation is released), and key is that same action
// again. The shard's lock must be held (Complete sets failed under it).
func (u use) retries(key Key) bool { return u.res.failed && u.res.key == key }

// shardCount must be a power of two.
const shardCount = 64

// callShard holds everything about the calls that hash to it, so that the
// three checks of one call and their updates happen under one lock.
type callShard struct {
	mu       sync.Mutex
	keys     map[Key]*reservation
	evidence map[evidenceKey]use
	// items holds, per item, the records of every ALLOW still remembered,
	// oldest first; more than one only when ExplicitQuantity let a repeat
	// through, so that a failed repeat releases its own record alone.
	items map[itemKey][]use
	// held is every reservation of this shard that Complete can still
	// reach; it is the authority on whether a decision id is known.
	held map[*reservation]struct{}

	_ [cacheLine]byte // keep neighbouring shards' locks apart
}

// indexShard maps decision ids to reservations, for Complete.
type indexShard struct {
	mu  sync.Mutex
	ids map[string]*reservation

	_ [cacheLine]byte
}

const cacheLine = 64

// Memory is a Book held in this process: the state of one replica, lost
// at its restart. It is safe for concurrent use.
//
// Lock order: a call shard's lock may be held while taking an index shard's
// lock, never the reverse.
type Memory struct {
	seed  maphash.Seed
	calls [shardCount]callShard
	index [shardCount]indexShard
	asks  memAsks

	reservations prometheus.Gauge
}

// NewMemory returns an empty book whose gauge is registered on reg (nil:
// unregistered).
func NewMemory(reg prometheus.Registerer) *Memory {
	b := &Memory{seed: maphash.MakeSeed(), reservations: metrics.NewGauge(reg, metrics.Reservations)}
	for i := range b.calls {
		s := &b.calls[i]
		s.keys = make(map[Key]*reservation)
		s.evidence = make(map[evidenceKey]use)
		s.items = make(map[itemKey][]use)
		s.held = make(map[*reservation]struct{})
	}
	for i := range b.index {
		b.index[i].ids = make(map[string]*reservation)
	}
	return b
}

func (b *Memory) callShard(callID string) *callShard {
	return &b.calls[maphash.String(b.seed, callID)&(shardCount-1)]
}

func (b *Memory) indexShard(decisionID string) *indexShard {
	return &b.index[maphash.String(b.seed, decisionID)&(shardCount-1)]
}

// Lookup is Book.Lookup; it never fails.
func (b *Memory) Lookup(_ context.Context, req Request) (Verdict, Reservation, error) {
	s := b.callShard(req.Key.CallID)
	s.mu.Lock()
	defer s.mu.Unlock()
	v, r := s.check(&req)
	return v, reservationOrNil(r), nil
}

// reservationOrNil keeps a nil *reservation from becoming a non-nil
// Reservation.
func reservationOrNil(r *reservation) Reservation {
	if r == nil {
		return nil
	}
	return r
}

// Allow is Book.Allow; it never fails.
func (b *Memory) Allow(_ context.Context, req Request) (Verdict, Reservation, error) {
	v, r := b.allow(req)
	return v, reservationOrNil(r), nil
}

func (b *Memory) allow(req Request) (Verdict, *reservation) {
	s := b.callShard(req.Key.CallID)
	s.mu.Lock()
	defer s.mu.Unlock()

	if v, orig := s.check(&req); v != OK {
		return v, orig
	}

	r := &reservation{
		decisionID: req.DecisionID,
		key:        req.Key,
		reserved:   req.Now,
		window:     req.Window,
		turnID:     req.TurnID,
		item:       req.Item,
		owner:      req.Owner,
		done:       make(chan struct{}),
	}
	s.keys[req.Key] = r
	if req.TurnID != 0 && req.EvidenceTTL > 0 {
		ek := evidenceKey{req.Key.CallID, req.TurnID, req.Key.Tool}
		s.evidence[ek] = use{res: r, until: req.Now.Add(req.EvidenceTTL)}
	}
	if req.Item != "" && req.ItemWindow > 0 {
		ik := itemKey{req.Key.CallID, req.Key.Tool, req.Item}
		uses := pruneUses(s.items[ik], req.Now, nil)
		s.items[ik] = append(uses, use{res: r, until: req.Now.Add(req.ItemWindow)})
	}
	s.held[r] = struct{}{}
	b.gaugeAdd(1)

	is := b.indexShard(req.DecisionID)
	is.mu.Lock()
	// Decision ids are unique in practice; a reused one routes Complete to
	// the newest reservation, and the older one expires by Sweep.
	is.ids[req.DecisionID] = r
	is.mu.Unlock()

	return OK, r
}

// check runs the three checks of Allow, in order, without changing anything.
// The shard's lock must be held.
func (s *callShard) check(req *Request) (Verdict, *reservation) {
	now := req.Now
	if r, ok := s.keys[req.Key]; ok && r.live(now) {
		return Duplicate, r
	}
	if req.TurnID != 0 {
		ek := evidenceKey{req.Key.CallID, req.TurnID, req.Key.Tool}
		if u, ok := s.evidence[ek]; ok && now.Before(u.until) && !u.retries(req.Key) {
			return EvidenceUsed, u.res
		}
	}
	if req.Item != "" && !req.ExplicitQuantity {
		uses := s.items[itemKey{req.Key.CallID, req.Key.Tool, req.Item}]
		for i := len(uses) - 1; i >= 0; i-- {
			if now.Before(uses[i].until) {
				return QuantityRepeat, uses[i].res
			}
		}
	}
	return OK, nil
}

func (b *Memory) gaugeAdd(n int) {
	if n != 0 {
		b.reservations.Add(float64(n))
	}
}

// Complete is Book.Complete; it fails only with ErrUnknownDecision (also
// for a swept reservation), ErrNotOwner and ErrAlreadyCompleted.
func (b *Memory) Complete(_ context.Context, decisionID, owner string, result *structpb.Struct, failed bool) (Key, error) {
	is := b.indexShard(decisionID)
	is.mu.Lock()
	r := is.ids[decisionID]
	is.mu.Unlock()
	if r == nil {
		return Key{}, ErrUnknownDecision
	}

	s := b.callShard(r.key.CallID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[r]; !ok {
		// Failed or swept between the index read and now.
		return Key{}, ErrUnknownDecision
	}
	if !mayComplete(r.owner, owner) {
		return r.key, ErrNotOwner
	}
	if r.completed {
		return r.key, ErrAlreadyCompleted
	}
	r.completed = true
	if failed {
		r.failed = true
	} else {
		r.result = result
	}
	close(r.done)

	if failed {
		s.release(r)
		b.drop(s, r)
	}
	return r.key, nil
}

// release removes what r reserved and the item it recorded, where r's
// entries are still the ones held; its evidence use stays, for the same
// action only (use.retries). The shard's lock must be held.
func (s *callShard) release(r *reservation) {
	if s.keys[r.key] == r {
		delete(s.keys, r.key)
	}
	// The evidence use stays (use.retries lets the same action through).
	if r.item != "" {
		ik := itemKey{r.key.CallID, r.key.Tool, r.item}
		if uses, ok := s.items[ik]; ok {
			kept := uses[:0]
			for _, u := range uses {
				if u.res != r {
					kept = append(kept, u)
				}
			}
			setUses(s.items, ik, uses, kept)
		}
	}
}

// drop forgets r: it leaves the shard's held set and the decision index.
// The call shard's lock must be held.
func (b *Memory) drop(s *callShard, r *reservation) {
	delete(s.held, r)
	b.gaugeAdd(-1)
	is := b.indexShard(r.decisionID)
	is.mu.Lock()
	if is.ids[r.decisionID] == r {
		delete(is.ids, r.decisionID)
	}
	is.mu.Unlock()
}

// pruneUses drops, in place, the uses that have expired at now, counting
// them into *n when n is not nil.
func pruneUses(uses []use, now time.Time, n *int) []use {
	kept := uses[:0]
	for _, u := range uses {
		if now.Before(u.until) {
			kept = append(kept, u)
		} else if n != nil {
			*n++
		}
	}
	// Clear the tail so dropped reservations can be collected.
	clear(uses[len(kept):])
	return kept
}

// setUses stores kept (a prefix-filtered view of old) under k, deleting k
// when nothing is left.
func setUses(m map[itemKey][]use, k itemKey, old, kept []use) {
	clear(old[len(kept):])
	if len(kept) == 0 {
		delete(m, k)
		return
	}
	m[k] = kept
}

// Sweep drops what has expired at now and returns how many entries it
// dropped: reservations whose window has passed and that are completed (or
// older than MaxRunning), evidence uses older than their TTL, and item
// records older than their window. A dropped reservation is no longer known
// to Complete.
func (b *Memory) Sweep(now time.Time) int {
	n := 0
	for i := range b.calls {
		s := &b.calls[i]
		s.mu.Lock()
		for r := range s.held {
			if r.live(now) {
				continue
			}
			if s.keys[r.key] == r {
				delete(s.keys, r.key)
			}
			b.drop(s, r)
			n++
		}
		for k, u := range s.evidence {
			if !now.Before(u.until) {
				delete(s.evidence, k)
				n++
			}
		}
		for k, uses := range s.items {
			setUses(s.items, k, uses, pruneUses(uses, now, &n))
		}
		s.mu.Unlock()
	}
	return n
}
