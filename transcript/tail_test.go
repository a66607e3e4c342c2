package transcript

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSnapshotTurns checks that the tail holds exactly the last turns of
// the whole snapshot, whatever the speakers, the skipped response and the
// number of turns asked for.
func TestSnapshotTurns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		s := NewStore(Limits{MaxUtterances: 1 + rng.IntN(20)}, nil)
		call := fmt.Sprint("c", round)
		n := rng.IntN(30)
		for i := 1; i <= n; i++ {
			sp := Caller
			if rng.IntN(2) == 0 {
				sp = Agent
			}
			ev := final(call, uint64(i), sp, fmt.Sprint("u", i))
			if sp == Agent {
				ev.ResponseID = fmt.Sprint("r", rng.IntN(3))
			}
			mustApply(t, s, ev, t0)
		}
		full, fullCh := s.Snapshot(call)
		for _, skip := range []string{"", "r0", "r1", "nope"} {
			want := full.Turns(skip)
			for maxTurns := -1; maxTurns <= 8; maxTurns++ {
				tail, ch := s.SnapshotTurns(call, skip, maxTurns)
				if ch != fullCh {
					t.Fatalf("round %d: the tail's channel is not the call's", round)
				}
				if tail.Exists != full.Exists || tail.CallID != full.CallID || tail.Lang != full.Lang ||
					tail.CallerInFlight != full.CallerInFlight || tail.Ended != full.Ended {
					t.Fatalf("round %d: tail %+v differs from %+v beyond its utterances", round, tail, full)
				}
				w := want
				if maxTurns > 0 && len(w) > maxTurns {
					w = w[len(w)-maxTurns:]
				}
				got := tail.Turns(skip)
				if len(got) != len(w) {
					t.Fatalf("round %d skip %q max %d: %d turns, want %d", round, skip, maxTurns, len(got), len(w))
				}
				for i := range w {
					if !turnEqual(got[i], w[i]) || !slices.EqualFunc(got[i].Utterances, w[i].Utterances, func(a, b Utterance) bool { return a == b }) {
						t.Fatalf("round %d skip %q max %d: turn %d\n got  %+v\n want %+v", round, skip, maxTurns, i, got[i], w[i])
					}
				}
				if maxTurns > 0 && len(tail.Utterances) > len(full.Utterances) {
					t.Fatalf("tail longer than the call")
				}
			}
		}
	}
	// An unknown call.
	if snap, _ := NewStore(Limits{}, nil).SnapshotTurns("x", "", 3); snap.Exists || snap.CallID != "x" {
		t.Fatalf("unknown call: %+v", snap)
	}
}
