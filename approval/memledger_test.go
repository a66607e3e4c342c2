package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestRedeemersAgree runs the lifecycle every Redeemer must follow on the
// JetStream ledger and on the memory one.
func TestRedeemersAgree(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) Redeemer{
		"jetstream": func(t *testing.T) Redeemer {
			return connectReplica(t, startJetStream(t), "approvals", "r", LedgerOptions{}).ledger
		},
		"memory": func(*testing.T) Redeemer { return NewMemoryLedger(LedgerOptions{}) },
	} {
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
			if err := l.Release(ctx, c.DecisionID); err != nil {
				t.Fatalf("Release of a decision never redeemed: %v", err)
			}
			if err := l.Redeem(ctx, c); err != nil {
				t.Fatal(err)
			}
			state(LedgerRedeemed)
			if err := l.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
				t.Fatalf("a second redeem: %v", err)
			}
			if err := l.Release(ctx, c.DecisionID); err != nil {
				t.Fatal(err)
			}
			state(LedgerOpen)
			if err := l.Redeem(ctx, c); err != nil {
				t.Fatalf("the retry after a release: %v", err)
			}
			if err := l.Done(ctx, c.DecisionID); err != nil {
				t.Fatal(err)
			}
			state(LedgerDone)
			if err := l.Done(ctx, c.DecisionID); err != nil {
				t.Errorf("Done twice: %v", err)
			}
			if err := l.Release(ctx, c.DecisionID); !errors.Is(err, ErrCompleted) {
				t.Errorf("Release after Done: %v, want ErrCompleted", err)
			}
			if err := l.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
				t.Errorf("a redeem after Done: %v", err)
			}
			c2 := ledgerClaims("01KB4Z3Q8K0V6YH1ZB2R9M7T4F", now.Add(DefaultTTL))
			if err := l.Done(ctx, c2.DecisionID); err != nil {
				t.Fatal(err)
			}
			if err := l.Redeem(ctx, c2); !errors.Is(err, ErrAlreadyRedeemed) {
				t.Errorf("a redeem after Done without a redeem: %v", err)
			}
			if err := l.Redeem(ctx, ledgerClaims("D-late", now.Add(-DefaultSkew))); !errors.Is(err, ErrExpired) {
				t.Errorf("an expired approval: %v, want ErrExpired", err)
			}
			if err := l.Redeem(ctx, ledgerClaims("D-far", now.Add(time.Hour))); !errors.Is(err, ErrMalformed) {
				t.Errorf("an approval living past the ledger's retention: %v, want ErrMalformed", err)
			}
			for _, id := range []string{"", "a.b", "a*", "a b"} {
				if err := l.Redeem(ctx, ledgerClaims(id, now.Add(DefaultTTL))); err == nil {
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
		errs := make([]error, 16)
		for i := range errs {
			wg.Go(func() {
				<-start
				errs[i] = l.Redeem(ctx, c)
			})
		}
		close(start)
		wg.Wait()
		wantOneWinner(t, fmt.Sprintf("round %d", round), errs)
		if err := l.Release(ctx, c.DecisionID); err != nil {
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
		if err := l.Redeem(ctx, c); err != nil {
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
