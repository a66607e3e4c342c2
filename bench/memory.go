package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/yesguard/yesguard/transcript"
)

// memFinals is how many final utterances each call holds when memory is
// measured: eight exchanges, a few minutes into a call.
const memFinals = 16

// memResult is the memory held per call at one call count.
type memResult struct {
	calls   int
	finals  int
	perCall float64 // bytes
	total   float64 // bytes
	took    time.Duration
}

// measureMemory fills a transcript store, the per-call state of the guard,
// with n calls of memFinals finals each (decoded from JSON as the ingester
// does, plus the speech markers a recogniser sends), and reports the live
// heap it grew by after a GC, per call.
func measureMemory(counts []int, seed uint64) ([]memResult, error) {
	var out []memResult
	for _, n := range counts {
		r, err := memoryAt(n, seed)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func memoryAt(n int, seed uint64) (memResult, error) {
	const prefix = "yesguard.transcript"
	before := heapInUse()
	start := time.Now()
	// The limits on calls and bytes held are lifted: this measures what a
	// call costs, not where the guard stops.
	store := transcript.NewStore(transcript.Limits{MaxCalls: n + 1, MaxTotalBytes: 1 << 40}, nil)

	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	now := time.Now()
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := w; i < n; i += workers {
				c := newConv(prefix, fmt.Sprintf("CA%016x%016x", rng.Uint64(), uint64(i)), rng)
				for k := 0; k < memFinals/2; k++ { // two finals an exchange
					c.final(transcript.Agent, pick(rng, agentSmallTalk))
					c.callerSpeaks(pick(rng, callerSmallTalk))
				}
				for _, m := range c.take() {
					ev, err := transcript.Decode(prefix, m.subject, m.data, transcript.Limits{})
					if err != nil {
						errs[w] = fmt.Errorf("memory: decode: %w", err)
						return
					}
					if ok, why := store.Apply(ev, now); !ok {
						errs[w] = fmt.Errorf("memory: apply: %s", why)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return memResult{}, err
		}
	}
	after := heapInUse()
	if store.Len() != n {
		return memResult{}, fmt.Errorf("memory: the store holds %d calls, want %d", store.Len(), n)
	}
	runtime.KeepAlive(store)
	total := float64(after) - float64(before)
	return memResult{calls: n, finals: memFinals, perCall: total / float64(n), total: total, took: took}, nil
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
