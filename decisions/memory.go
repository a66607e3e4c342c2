package decisions

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Memory defaults.
const (
	DefaultMaxPerCall = 256
	DefaultMaxBytes   = 64 << 20
	DefaultTTL        = time.Hour
)

// MemoryLimits bound what a Memory holds; zero fields take the defaults.
type MemoryLimits struct {
	// MaxPerCall records are kept per call: at the bound, the oldest record
	// of the lowest Class the call holds is dropped (a repeat before a
	// refusal, a refusal before an action).
	MaxPerCall int
	// MaxBytes bounds the records' encoded size in all; above it the
	// calls with the oldest last record are forgotten first.
	MaxBytes int64
	// TTL: a call is forgotten this long after its last record.
	TTL time.Duration
}

func (l *MemoryLimits) setDefaults() {
	if l.MaxPerCall <= 0 {
		l.MaxPerCall = DefaultMaxPerCall
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.TTL <= 0 {
		l.TTL = DefaultTTL
	}
}

// Memory is a Store held in this process.
//
// Calls are spread over memoryShards shards by a hash of the call id, each
// with its own lock and an equal share of MaxBytes, so that concurrent
// Checks of different calls rarely wait for each other to record.
type Memory struct {
	shards [memoryShards]memoryShard
	limits MemoryLimits
}

var _ Store = (*Memory)(nil)

const memoryShards = 32 // a power of two

type memoryShard struct {
	mu    sync.Mutex
	calls map[string]*callRecords
	bytes int64    // the encoded size of every record held
	_     [40]byte // keeps neighbouring shards' locks off one cache line
}

type callRecords struct {
	list  []*yesguardv1.Decision // oldest first
	sizes []int                  // encoded size of each
	last  time.Time
}

// NewMemory returns an empty store.
func NewMemory(limits MemoryLimits) *Memory {
	limits.setDefaults()
	s := &Memory{limits: limits}
	for i := range s.shards {
		s.shards[i].calls = map[string]*callRecords{}
	}
	return s
}

// shard picks the call's shard by an FNV-1a hash of its id.
func (s *Memory) shard(callID string) *memoryShard {
	h := uint32(2166136261)
	for i := 0; i < len(callID); i++ {
		h ^= uint32(callID[i])
		h *= 16777619
	}
	return &s.shards[h&(memoryShards-1)]
}

// Add keeps d; it never fails.
func (s *Memory) Add(_ context.Context, d *yesguardv1.Decision) error {
	size := proto.Size(d)
	now := time.Now()
	if t := d.GetTime(); t != nil {
		now = t.AsTime()
	}
	sh := s.shard(d.GetCallId())
	budget := s.limits.MaxBytes / memoryShards
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.calls[d.GetCallId()]
	if c == nil {
		c = &callRecords{}
		sh.calls[d.GetCallId()] = c
	}
	if len(c.list) >= s.limits.MaxPerCall {
		sh.dropAt(c, lowest(c.list))
	}
	c.list = append(c.list, d)
	c.sizes = append(c.sizes, size)
	c.last = now
	sh.bytes += int64(size)
	// Over budget: other calls go first, oldest first, then this call's
	// own oldest records; its newest record always stays.
	for sh.bytes > budget && len(sh.calls) > 1 {
		sh.evictOldest(d.GetCallId())
	}
	for sh.bytes > budget && len(c.list) > 1 {
		sh.dropFirst(c)
	}
	return nil
}

// dropFirst drops the call's oldest record. The shard's lock must be held.
func (sh *memoryShard) dropFirst(c *callRecords) { sh.dropAt(c, 0) }

// dropAt drops the call's i-th record. The shard's lock must be held.
func (sh *memoryShard) dropAt(c *callRecords, i int) {
	sh.bytes -= int64(c.sizes[i])
	if i == 0 {
		c.list[0] = nil
		c.list, c.sizes = c.list[1:], c.sizes[1:]
		return
	}
	c.list = slices.Delete(c.list, i, i+1)
	c.sizes = slices.Delete(c.sizes, i, i+1)
}

// lowest is the index of the oldest record of the lowest class in list.
func lowest(list []*yesguardv1.Decision) int {
	at, class := 0, ClassAction+1
	for i, d := range list {
		if c := ClassOf(d); c < class {
			at, class = i, c
			if c == ClassRepeat {
				break
			}
		}
	}
	return at
}

// evictOldest forgets the call whose last record is oldest, but keep. The
// shard's lock must be held.
func (sh *memoryShard) evictOldest(keep string) {
	var oldest string
	var at time.Time
	for id, c := range sh.calls {
		if id != keep && (oldest == "" || c.last.Before(at)) {
			oldest, at = id, c.last
		}
	}
	sh.forget(oldest)
}

func (sh *memoryShard) forget(callID string) {
	c := sh.calls[callID]
	for _, n := range c.sizes {
		sh.bytes -= int64(n)
	}
	delete(sh.calls, callID)
}

// List returns a page of the call's records. Its token is the decision id
// of the last record returned: the next page starts after it.
func (s *Memory) List(_ context.Context, callID string, size int, token string) ([]*yesguardv1.Decision, string, error) {
	size = pageSize(size)
	sh := s.shard(callID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.calls[callID]
	if c == nil {
		return nil, "", nil
	}
	start := 0
	if token != "" {
		// Records are kept in the order of their ULIDs; one dropped since
		// the token was issued is passed over all the same.
		start = len(c.list)
		for i, d := range c.list {
			if strings.Compare(d.GetDecisionId(), token) > 0 {
				start = i
				break
			}
		}
	}
	end, used := start, 0
	for end < min(start+size, len(c.list)) {
		sz := proto.Size(c.list[end])
		if !fits(used, sz) {
			break // the page's byte budget (MaxPageBytes)
		}
		used += sz
		end++
	}
	page := append([]*yesguardv1.Decision(nil), c.list[start:end]...)
	next := ""
	if end < len(c.list) && len(page) > 0 {
		next = page[len(page)-1].GetDecisionId()
	}
	return page, next, nil
}

// Recent returns the newest record of each of up to limit calls, the
// call whose newest record is newest first. It holds one shard's lock at a
// time, so a Check recording meanwhile waits for one shard's scan at most.
func (s *Memory) Recent(_ context.Context, limit int) ([]*yesguardv1.Decision, error) {
	limit = recentLimit(limit)
	type recent struct{ newest, headline *yesguardv1.Decision }
	var calls []recent
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, c := range sh.calls {
			if n := len(c.list); n > 0 {
				var h *yesguardv1.Decision
				for _, d := range c.list {
					h = Headline(h, d)
				}
				calls = append(calls, recent{c.list[n-1], h})
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(calls, func(a, b recent) int {
		// Newest first; records of one instant by decision id, newest
		// first too (ULIDs sort by time).
		if c := b.newest.GetTime().AsTime().Compare(a.newest.GetTime().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(b.newest.GetDecisionId(), a.newest.GetDecisionId())
	})
	out := make([]*yesguardv1.Decision, 0, min(limit, len(calls)))
	for _, c := range calls[:min(limit, len(calls))] {
		out = append(out, c.headline)
	}
	return out, nil
}

// Sweep forgets the calls with no record for longer than the TTL, and
// returns how many it forgot.
func (s *Memory) Sweep(now time.Time) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, c := range sh.calls {
			if now.Sub(c.last) > s.limits.TTL {
				sh.forget(id)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Bytes is the encoded size of every record held.
func (s *Memory) Bytes() int64 {
	var n int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.bytes
		sh.mu.Unlock()
	}
	return n
}
