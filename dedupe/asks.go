package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ask is a question the guard issued for one action (Key): its text, to be
// spoken as the agent's turn, and when it was issued and stops counting.
type Ask struct {
	ID   string `json:"id"`
	Text string `json:"t"`
	// Norm is Text as the matching folds it.
	Norm    string    `json:"n"`
	Lang    string    `json:"l"`
	Issued  time.Time `json:"i"`
	Expires time.Time `json:"x"`
}

// Asks remembers the guard's questions per action, each for its own life,
// in the shared state: a question issued by one replica is recognised by
// every other. An error means the store did not answer.
type Asks interface {
	// IssueAsk remembers a for key until a.Expires.
	IssueAsk(ctx context.Context, key Key, a Ask) error
	// AsksFor returns the questions issued for key that are live at now,
	// oldest first.
	AsksFor(ctx context.Context, key Key, now time.Time) ([]Ask, error)
}

var (
	_ Asks = (*Memory)(nil)
	_ Asks = (*KV)(nil)
)

// maxIssueAttempts bounds the compare-and-set rounds of one IssueAsk.
const maxIssueAttempts = 32

// maxAsks bounds the questions remembered for one action: the newest are
// kept.
const maxAsks = 8

// liveAsks returns those of asks live at now, at most the newest maxAsks.
func liveAsks(asks []Ask, now time.Time) []Ask {
	out := slices.DeleteFunc(slices.Clone(asks), func(a Ask) bool { return !now.Before(a.Expires) })
	if len(out) > maxAsks {
		out = out[len(out)-maxAsks:]
	}
	return out
}

type memAsks struct {
	mu sync.Mutex
	m  map[Key][]Ask
}

// IssueAsk is Asks.IssueAsk; it never fails.
func (b *Memory) IssueAsk(_ context.Context, key Key, a Ask) error {
	s := &b.asks
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[Key][]Ask{}
	}
	for k, v := range s.m {
		// Bounded memory: expired questions go at every issue.
		if v = liveAsks(v, a.Issued); len(v) == 0 {
			delete(s.m, k)
		} else {
			s.m[k] = v
		}
	}
	s.m[key] = liveAsks(append(s.m[key], a), a.Issued)
	return nil
}

// AsksFor is Asks.AsksFor; it never fails.
func (b *Memory) AsksFor(_ context.Context, key Key, now time.Time) ([]Ask, error) {
	s := &b.asks
	s.mu.Lock()
	defer s.mu.Unlock()
	return liveAsks(s.m[key], now), nil
}

func askKeyOf(k Key) string { return keyOf('a', k.CallID, k.Tool, k.ArgsHash) }

// IssueAsk adds a to the action's list by compare-and-set, the key living
// as long as its newest question.
func (b *KV) IssueAsk(ctx context.Context, key Key, a Ask) error {
	k := askKeyOf(key)
	for attempt := 0; attempt < maxIssueAttempts; attempt++ {
		if attempt > 0 {
			// Another replica's issue won the revision: read it again,
			// after a jittered pause so that the racers drift apart.
			select {
			case <-ctx.Done():
				return fmt.Errorf("remember the question: %w", ctx.Err())
			case <-time.After(time.Duration(rand.N(attempt*2+1)) * time.Millisecond):
			}
		}
		var prev []Ask
		var rev uint64
		e, err := b.kv.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read the questions issued: %w", err)
		default:
			rev = e.Revision()
			_ = json.Unmarshal(e.Value(), &prev) // an unreadable list is replaced
		}
		list := liveAsks(append(prev, a), a.Issued)
		data, _ := json.Marshal(list)
		ttl := time.Until(list[len(list)-1].Expires)
		for _, x := range list {
			ttl = max(ttl, x.Expires.Sub(a.Issued))
		}
		if rev == 0 {
			_, err = b.create(ctx, k, data, ttl)
		} else {
			_, err = b.update(ctx, k, data, rev, ttl)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isConflict(err) {
			return fmt.Errorf("remember the question: %w", err)
		}
	}
	return errors.New("remember the question: the list kept changing")
}

// AsksFor reads the bucket, not the mirror: a question issued on another
// replica moments ago must be found, and the mirror may lag it.
func (b *KV) AsksFor(ctx context.Context, key Key, now time.Time) ([]Ask, error) {
	e, err := b.kv.Get(ctx, askKeyOf(key))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the questions issued: %w", err)
	}
	var asks []Ask
	if json.Unmarshal(e.Value(), &asks) != nil {
		b.unreadable.Inc()
		return nil, nil
	}
	return liveAsks(asks, now), nil
}
