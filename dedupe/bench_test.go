package dedupe

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// benchKeys is how many distinct keys a benchmark cycles through. With one
// simulated second per Allow, a key comes round again after benchKeys
// seconds, past MaxRunning, so every Allow is OK whether or not its
// predecessor was completed.
const benchKeys = 1024

func init() {
	if benchKeys*time.Second <= MaxRunning {
		panic("benchKeys too small for MaxRunning")
	}
}

type benchSet struct {
	args, ids []string
}

func newBenchSet(prefix string) benchSet {
	s := benchSet{args: make([]string, benchKeys), ids: make([]string, benchKeys)}
	for i := range benchKeys {
		s.args[i] = fmt.Sprintf("%064x", i)
		s.ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return s
}

func benchRequest(s *benchSet, call string, i int64, now time.Time) Request {
	k := i % benchKeys
	return Request{
		Key:         Key{CallID: call, Tool: "book_appointment", ArgsHash: s.args[k]},
		DecisionID:  s.ids[k],
		Now:         now,
		Window:      30 * time.Second,
		TurnID:      uint64(i + 1),
		EvidenceTTL: 5 * time.Minute,
	}
}

// BenchmarkAllow measures one OK Allow, with metrics, on an uncontended book
// holding about MaxRunning worth of reservations; sweeps are included.
func BenchmarkAllow(b *testing.B) {
	book := NewMemory(prometheus.NewRegistry())
	set := newBenchSet("d")
	b.ReportAllocs()
	var i int64
	for b.Loop() {
		now := t0.Add(time.Duration(i) * time.Second)
		if v, _, _ := book.Allow(bg, benchRequest(&set, "call-1", i, now)); v != OK {
			b.Fatalf("Allow %d = %v", i, v)
		}
		if i%benchKeys == benchKeys-1 {
			book.Sweep(now)
		}
		i++
	}
}

// BenchmarkAllowParallel measures OK Allows from many goroutines, each its
// own call, so contention is that of the shards.
func BenchmarkAllowParallel(b *testing.B) {
	book := NewMemory(prometheus.NewRegistry())
	var worker, clock atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		call := fmt.Sprintf("call-%d", w)
		set := newBenchSet(call)
		var i int64
		for pb.Next() {
			// One simulated second per Allow on a clock shared by all
			// goroutines, so Sweep expires everyone's reservations.
			now := t0.Add(time.Duration(clock.Add(1)) * time.Second)
			if v, _, _ := book.Allow(bg, benchRequest(&set, call, i, now)); v != OK {
				b.Errorf("Allow %s %d = %v", call, i, v)
				return
			}
			if i%benchKeys == benchKeys-1 {
				book.Sweep(now)
			}
			i++
		}
	})
}
