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

// memGoal is issue 15's bound on the memory an active call holds.
const memGoal = 6 << 10

// memFlat is how far the slope may stray from the per-call figure at the
// most calls and still count as flat: a call costs what it costs, however
// many others are held.
const memFlat = 0.15

// memoryRows are the memory phase's rows: per call at each count, against
// the goal, and the slope between the fewest and the most calls (the bytes
// each added call costs), which must be within the goal and flat.
func memoryRows(mem []memResult) []row {
	var rows []row
	for _, m := range mem {
		rows = append(rows, row{
			measure: fmt.Sprintf("memory per active call, %d calls", m.calls),
			guard:   bytesStr(m.perCall),
			floor:   "-", ratio: "-",
			goal: fmt.Sprintf("≤ 6 KiB (%d finals each; %.0f MiB in all; filled in %s)", m.finals, m.total/(1<<20), m.took.Round(10*time.Millisecond)),
			met:  atMost(m.perCall, memGoal),
		})
	}
	if len(mem) < 2 {
		return rows
	}
	lo, hi := mem[0], mem[0]
	for _, m := range mem {
		if m.calls < lo.calls {
			lo = m
		}
		if m.calls > hi.calls {
			hi = m
		}
	}
	if lo.calls == hi.calls {
		return rows
	}
	slope := (hi.total - lo.total) / float64(hi.calls-lo.calls)
	// Flat: an added call costs what a call costs with only the fewest
	// held (the slope against the per-call figure at lo, not at hi, which
	// the slope is nearly made of).
	flat := slope > 0 && slope <= memGoal && slope >= lo.perCall*(1-memFlat) && slope <= lo.perCall*(1+memFlat)
	return append(rows, row{
		measure: fmt.Sprintf("memory slope, %d to %d calls (bytes per added call) vs per call at %d", lo.calls, hi.calls, lo.calls),
		guard:   bytesStr(slope),
		floor:   bytesStr(lo.perCall), ratio: ratio(slope, lo.perCall),
		goal: fmt.Sprintf("≤ 6 KiB and flat: within %.0f%% of the per-call figure at %d", memFlat*100, lo.calls),
		met:  verdict(flat),
	})
}
