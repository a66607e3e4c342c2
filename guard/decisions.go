package guard

import (
	"sync"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// decisionStore keeps each call's latest decisions for ListDecisions. It is
// bounded: at most max decisions per call, and a call is forgotten ttl after
// its last decision.
//
// Calls are spread over decisionShards shards by a hash of the call id, each
// with its own lock, so that concurrent Checks of different calls rarely
// wait for each other to record.
type decisionStore struct {
	shards [decisionShards]decisionShard
	max    int
	ttl    time.Duration
}

const decisionShards = 32 // a power of two

type decisionShard struct {
	mu    sync.Mutex
	calls map[string]*callDecisions
	_     [48]byte // keeps neighbouring shards' locks off one cache line
}

type callDecisions struct {
	list []*yesguardv1.Decision // oldest first
	last time.Time
	// first is list's backing array until a second decision: a call's
	// first decision (most calls have one or two) is kept without an
	// allocation of its own.
	first [1]*yesguardv1.Decision
}

func newDecisionStore(max int, ttl time.Duration) *decisionStore {
	s := &decisionStore{max: max, ttl: ttl}
	for i := range s.shards {
		s.shards[i].calls = map[string]*callDecisions{}
	}
	return s
}

// shard picks the call's shard by an FNV-1a hash of its id.
func (s *decisionStore) shard(callID string) *decisionShard {
	h := uint32(2166136261)
	for i := 0; i < len(callID); i++ {
		h ^= uint32(callID[i])
		h *= 16777619
	}
	return &s.shards[h&(decisionShards-1)]
}

// add keeps d. d must not be changed afterwards: the sink and ListDecisions
// read it concurrently.
func (s *decisionStore) add(d *yesguardv1.Decision, now time.Time) {
	sh := s.shard(d.GetCallId())
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.calls[d.GetCallId()]
	if c == nil {
		c = &callDecisions{}
		c.list = c.first[:0]
		sh.calls[d.GetCallId()] = c
	}
	if len(c.list) >= s.max {
		copy(c.list, c.list[1:])
		c.list = c.list[:len(c.list)-1]
	}
	c.list = append(c.list, d)
	c.last = now
}

func (s *decisionStore) list(callID string) []*yesguardv1.Decision {
	sh := s.shard(callID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.calls[callID]
	if c == nil {
		return nil
	}
	return append([]*yesguardv1.Decision(nil), c.list...)
}

func (s *decisionStore) sweep(now time.Time) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, c := range sh.calls {
			if now.Sub(c.last) > s.ttl {
				delete(sh.calls, id)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Sweep forgets the decisions of calls with none for longer than
// DecisionTTL, and returns how many calls it forgot.
func (g *Guard) Sweep(now time.Time) int { return g.decisions.sweep(now) }
