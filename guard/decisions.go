package guard

import (
	"context"
	"sync"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// decisionStore keeps each call's latest decisions for ListDecisions. It is
// bounded: at most max decisions per call, and a call is forgotten ttl after
// its last decision.
type decisionStore struct {
	mu    sync.Mutex
	calls map[string]*callDecisions
	max   int
	ttl   time.Duration
}

type callDecisions struct {
	list []*yesguardv1.Decision // oldest first
	last time.Time
}

func newDecisionStore(max int, ttl time.Duration) *decisionStore {
	return &decisionStore{calls: map[string]*callDecisions{}, max: max, ttl: ttl}
}

// add keeps d. d must not be changed afterwards: the sink and ListDecisions
// read it concurrently.
func (s *decisionStore) add(d *yesguardv1.Decision, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls[d.GetCallId()]
	if c == nil {
		c = &callDecisions{}
		s.calls[d.GetCallId()] = c
	}
	if len(c.list) >= s.max {
		copy(c.list, c.list[1:])
		c.list = c.list[:len(c.list)-1]
	}
	c.list = append(c.list, d)
	c.last = now
}

func (s *decisionStore) list(callID string) []*yesguardv1.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls[callID]
	if c == nil {
		return nil
	}
	return append([]*yesguardv1.Decision(nil), c.list...)
}

func (s *decisionStore) sweep(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, c := range s.calls {
		if now.Sub(c.last) > s.ttl {
			delete(s.calls, id)
			n++
		}
	}
	return n
}

// RunSweeper forgets old decisions every interval until ctx is done.
func (g *Guard) RunSweeper(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.decisions.sweep(g.now())
		}
	}
}
