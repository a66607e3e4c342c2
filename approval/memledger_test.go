package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// redeemers builds each Redeemer, for the tests every one must pass: the
// JetStream ledger on a fresh embedded server, and the memory one.
var redeemers = map[string]func(t *testing.T) Redeemer{
	"jetstream": func(t *testing.T) Redeemer {
		return connectReplica(t, startJetStream(t), "approvals", "r", LedgerOptions{}).ledger
	},
	"memory": func(*testing.T) Redeemer { return NewMemoryLedger(LedgerOptions{}) },
}

// TestRedeemersAgree runs the lifecycle every Redeemer must follow on the
// JetStream ledger and on the memory one.
func TestRedeemersAgree(t *testing.T) {
	for name, mk := range redeemers {
		t.Run(name, func(t *testing.T) {
			l := mk(t)
			ctx := context.Background()
			now := time.Now()
			c := ledgerClaims("01KB4Z3Q8K0V6YH1ZB2R9M7T4E", now.Add(DefaultTTL))
			state := func(want LedgerState) {
				t.Helper()
				if got, err := l.State(ctx, c.DecisionID); err != nil || got != want {
					t.Fatalf("State = %q, %v; want %q", got, err, want)
				}
			}
			state(LedgerOpen)
			if err := l.Release(ctx, c.DecisionID, ""); err != nil {
				t.Fatalf("Release of a decision never redeemed: %v", err)
			}
			if r, err := l.CheckRelease(ctx, c.DecisionID, ""); err != nil || r.State != LedgerOpen {
				t.Fatalf("CheckRelease of a decision never redeemed: %+v, %v", r, err)
			}
			receipt, err := l.Redeem(ctx, c)
			if err != nil || receipt == "" {
				t.Fatalf("Redeem: %q, %v", receipt, err)
			}
			state(LedgerRedeemed)
			if _, err := l.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
				t.Fatalf("a second redeem: %v", err)
			}
			// Only the redeemer, with its receipt, releases it.
			for _, bad := range []string{"", "AAAAAAAAAAAAAAAAAAAAAA"} {
				if err := l.Release(ctx, c.DecisionID, bad); !errors.Is(err, ErrNotRedeemer) {
					t.Fatalf("Release with receipt %q: %v, want ErrNotRedeemer", bad, err)
				}
				if r, err := l.CheckRelease(ctx, c.DecisionID, bad); !errors.Is(err, ErrNotRedeemer) || r.State != LedgerRedeemed || r.CallID != c.CallID || r.Tool != c.Tool {
					t.Fatalf("CheckRelease with receipt %q: %+v, %v", bad, r, err)
				}
				state(LedgerRedeemed)
			}
			if err := l.Release(ctx, c.DecisionID, receipt); err != nil {
				t.Fatal(err)
			}
			state(LedgerOpen)
			retry, err := l.Redeem(ctx, c)
			if err != nil {
				t.Fatalf("the retry after a release: %v", err)
			}
			if err := l.Release(ctx, c.DecisionID, receipt); !errors.Is(err, ErrNotRedeemer) || retry == receipt {
				t.Fatalf("the first redeem's receipt after the retry: %v, want ErrNotRedeemer", err)
			}
			if err := l.Done(ctx, c.DecisionID); err != nil {
				t.Fatal(err)
			}
			state(LedgerDone)
			if err := l.Done(ctx, c.DecisionID); err != nil {
				t.Errorf("Done twice: %v", err)
			}
			if err := l.Release(ctx, c.DecisionID, retry); !errors.Is(err, ErrCompleted) {
				t.Errorf("Release after Done: %v, want ErrCompleted", err)
			}
			if _, err := l.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
				t.Errorf("a redeem after Done: %v", err)
			}
			c2 := ledgerClaims("01KB4Z3Q8K0V6YH1ZB2R9M7T4F", now.Add(DefaultTTL))
			if err := l.Done(ctx, c2.DecisionID); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Redeem(ctx, c2); !errors.Is(err, ErrAlreadyRedeemed) {
				t.Errorf("a redeem after Done without a redeem: %v", err)
			}
			if _, err := l.Redeem(ctx, ledgerClaims("D-late", now.Add(-DefaultSkew))); !errors.Is(err, ErrExpired) {
				t.Errorf("an expired approval: %v, want ErrExpired", err)
			}
			if _, err := l.Redeem(ctx, ledgerClaims("D-far", now.Add(time.Hour))); !errors.Is(err, ErrMalformed) {
				t.Errorf("an approval living past the ledger's retention: %v, want ErrMalformed", err)
			}
			for _, id := range []string{"", "a.b", "a*", "a b"} {
				if _, err := l.Redeem(ctx, ledgerClaims(id, now.Add(DefaultTTL))); err == nil {
					t.Errorf("decision id %q redeemed", id)
				}
				if err := l.Done(ctx, id); err == nil {
					t.Errorf("decision id %q done", id)
				}
			}
		})
	}
}

// Many goroutines redeem one approval at once, round after round, with a
// release between rounds: exactly one wins each round.
func TestMemoryLedgerRaceExactlyOneRedeems(t *testing.T) {
	l := NewMemoryLedger(LedgerOptions{})
	ctx := context.Background()
	c := ledgerClaims("01KB4Z3Q8K0V6YH1ZB2R9M7T4E", time.Now().Add(DefaultTTL))
	for round := range 100 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs, receipts := make([]error, 16), make([]string, 16)
		for i := range errs {
			wg.Go(func() {
				<-start
				receipts[i], errs[i] = l.Redeem(ctx, c)
			})
		}
		close(start)
		wg.Wait()
		receipt := wantOneWinner(t, fmt.Sprintf("round %d", round), errs, receipts)
		if err := l.Release(ctx, c.DecisionID, receipt); err != nil {
			t.Fatal(err)
		}
	}
}

// Entries leave when their time is up: a redeemed one once its token can
// no longer be accepted, a completed one after the retention; the ledger
// does not grow with the approvals it has seen.
func TestMemoryLedgerIsBounded(t *testing.T) {
	clock := newClock()
	l := NewMemoryLedger(LedgerOptions{Now: clock.Now})
	ctx := context.Background()
	exp := clock.Now().Add(DefaultTTL)
	for i := range 100 {
		c := ledgerClaims(fmt.Sprintf("M%03d", i), exp)
		if _, err := l.Redeem(ctx, c); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := l.Done(ctx, c.DecisionID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Past every redeemed entry's token (expiry, skew, margin), within
	// the retention of the completed ones.
	clock.Advance(DefaultTTL + DefaultSkew + ledgerMargin + time.Second)
	if st, _ := l.State(ctx, "M001"); st != LedgerOpen {
		t.Errorf("a redeemed entry past its token's life: %q, want open", st)
	}
	if st, _ := l.State(ctx, "M000"); st != LedgerDone {
		t.Errorf("a completed entry within the retention: %q, want done", st)
	}
	if err := l.Done(ctx, "M-sweep"); err != nil { // a write sweeps
		t.Fatal(err)
	}
	if n := l.Len(); n != 51 {
		t.Errorf("after the redeemed entries' time: %d entries, want 51 (50 completed + 1)", n)
	}
	clock.Advance(l.opts.retain())
	if err := l.Done(ctx, "M-sweep-2"); err != nil {
		t.Fatal(err)
	}
	if n := l.Len(); n != 1 {
		t.Errorf("after the retention: %d entries, want 1", n)
	}
}

// yesClaims is an approval of decision id resting on one caller turn: two
// of them are two approvals of the same yes (a failure let the guard allow
// the action again).
func yesClaims(id string, exp time.Time) *Claims {
	c := ledgerClaims(id, exp)
	c.Turn = &Turn{TextHash: TextHash("Yes."), StartMs: 1200, EndMs: 1500, ReceivedAt: exp.Add(-DefaultTTL).Truncate(time.Millisecond)}
	return c
}

// One caller yes executes once, whatever approvals it was given in: a
// second approval of it is refused while the first is redeemed, redeems
// once the first is released, and never once one of them completed.
func TestOneYesRedeemsOnce(t *testing.T) {
	for name, mk := range redeemers {
		t.Run(name, func(t *testing.T) {
			l := mk(t)
			ctx := context.Background()
			exp := time.Now().Add(DefaultTTL)
			first, second := yesClaims("Y-first", exp), yesClaims("Y-second", exp)
			firstReceipt, err := l.Redeem(ctx, first)
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Redeem(ctx, second)
			if !errors.Is(err, ErrYesRedeemed) || !errors.Is(err, ErrAlreadyRedeemed) {
				t.Fatalf("a second approval of a redeemed yes: %v, want ErrYesRedeemed", err)
			}
			if st, _ := l.State(ctx, second.DecisionID); st != LedgerOpen {
				t.Errorf("the refused approval's decision is %q, want open (given back)", st)
			}
			// The first failed: the yes is free again, for either approval.
			if err := l.Release(ctx, first.DecisionID, firstReceipt); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Redeem(ctx, second); err != nil {
				t.Fatalf("the second approval after the first was released: %v", err)
			}
			if _, err := l.Redeem(ctx, first); !errors.Is(err, ErrYesRedeemed) {
				t.Fatalf("the first approval while the second holds the yes: %v", err)
			}
			// The second succeeded: the yes never executes again.
			if err := l.Done(ctx, second.DecisionID); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx, first.DecisionID, firstReceipt); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Redeem(ctx, first); !errors.Is(err, ErrYesRedeemed) {
				t.Fatalf("an approval of a yes whose action completed: %v", err)
			}
			// Another turn, or the same turn for another tool, is another yes.
			other := yesClaims("Y-other", exp)
			other.Turn.EndMs++
			if _, err := l.Redeem(ctx, other); err != nil {
				t.Errorf("an approval of another turn: %v", err)
			}
			tool := yesClaims("Y-tool", exp)
			tool.Tool = "pay_bill"
			if _, err := l.Redeem(ctx, tool); err != nil {
				t.Errorf("the same turn for another tool: %v", err)
			}
		})
	}
}

// Two approvals of one yes redeemed at once on two replicas: exactly one
// wins, round after round.
func TestOneYesRaceAcrossReplicas(t *testing.T) {
	ns := startJetStream(t)
	a := connectReplica(t, ns, "approvals", "replica-a", LedgerOptions{})
	b := connectReplica(t, ns, "approvals", "replica-b", LedgerOptions{})
	ctx := context.Background()
	exp := time.Now().Add(DefaultTTL)
	for i := range 50 {
		c1, c2 := yesClaims(fmt.Sprintf("YA%03d", i), exp), yesClaims(fmt.Sprintf("YB%03d", i), exp)
		c2.Turn, c1.Turn.EndMs = c1.Turn, int64(i) // one turn per round
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs, receipts := make([]error, 2), make([]string, 2)
		wg.Go(func() { <-start; receipts[0], errs[0] = a.ledger.Redeem(ctx, c1) })
		wg.Go(func() { <-start; receipts[1], errs[1] = b.ledger.Redeem(ctx, c2) })
		close(start)
		wg.Wait()
		wantOneWinner(t, fmt.Sprintf("round %d", i), errs, receipts)
	}
}

// A release that freed the decision but not its yes (a crash between
// the two writes) leaves the yes to that decision: its own retry takes
// the claim back.
func TestYesLeftClaimedByItsOwnDecision(t *testing.T) {
	r := connectReplica(t, startJetStream(t), "approvals", "r", LedgerOptions{})
	ctx := context.Background()
	c := yesClaims("Y-self", time.Now().Add(DefaultTTL))
	if _, err := r.kv.Create(ctx, r.ledger.YesKey(c), r.ledger.value(ledgerEntry{State: stateRedeemed, Decision: c.DecisionID})); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ledger.Redeem(ctx, c); err != nil {
		t.Fatalf("the retry of the decision holding the yes: %v", err)
	}
	other := yesClaims("Y-other", c.ExpiresAt)
	if _, err := r.ledger.Redeem(ctx, other); !errors.Is(err, ErrYesRedeemed) {
		t.Fatalf("another approval of that yes: %v", err)
	}
}
