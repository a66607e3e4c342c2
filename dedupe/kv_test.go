package dedupe

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/internal/natstest"
)

// replicaBook is one replica's KV book on its own connection.
func replicaBook(t *testing.T, url string) *KV {
	t.Helper()
	_, js := natstest.Connect(t, url)
	return bookOn(t, js)
}

// bookOn is a KV book on js's test bucket, closed when the test ends.
func bookOn(t *testing.T, js jetstream.JetStream) *KV {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(ctx, BucketConfig("yesguard_test", 1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewKV(ctx, js, kv, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func kvRequest(id, call string, turn uint64) Request {
	return Request{Key: Key{CallID: call, Tool: "book", ArgsHash: "h1"}, DecisionID: id, Now: time.Now(),
		Window: 15 * time.Second, TurnID: turn, EvidenceTTL: time.Minute}
}

// TestKVOneAllowAcrossReplicas: identical Allows on three replicas, many
// rounds: exactly one is OK each round, and the rest name it.
func TestKVOneAllowAcrossReplicas(t *testing.T) {
	ns := natstest.JetStream(t)
	books := []*KV{replicaBook(t, ns.ClientURL()), replicaBook(t, ns.ClientURL()), replicaBook(t, ns.ClientURL())}
	for round := range 20 {
		call := fmt.Sprint("race-", round)
		var wg sync.WaitGroup
		verdicts := make([]Verdict, 9)
		ress := make([]Reservation, 9)
		for i := range 9 {
			wg.Go(func() {
				v, r, err := books[i%3].Allow(t.Context(), kvRequest(fmt.Sprint(call, "-d", i), call, uint64(1+i%2)))
				if err != nil {
					t.Error(err)
				}
				verdicts[i], ress[i] = v, r
			})
		}
		wg.Wait()
		winner := ""
		for i, v := range verdicts {
			if v == OK {
				if winner != "" {
					t.Fatalf("round %d: two ALLOWs (%s and %s)", round, winner, ress[i].DecisionID())
				}
				winner = ress[i].DecisionID()
			}
		}
		if winner == "" {
			t.Fatalf("round %d: no ALLOW: %v", round, verdicts)
		}
		for i, v := range verdicts {
			if v != OK && (v != Duplicate && v != EvidenceUsed || ress[i].DecisionID() != winner) {
				t.Errorf("round %d: %v naming %q, want a repeat of %s", round, v, ress[i].DecisionID(), winner)
			}
		}
	}
}

// TestKVCompleteOnAnyReplica: a duplicate waiting on one replica is woken
// by a Complete on another, with the result; a failed Complete releases
// the action and its evidence for a retry anywhere.
func TestKVCompleteOnAnyReplica(t *testing.T) {
	ns := natstest.JetStream(t)
	a, b := replicaBook(t, ns.ClientURL()), replicaBook(t, ns.ClientURL())
	ctx := t.Context()
	if v, _, err := a.Allow(ctx, kvRequest("d1", "c1", 1)); v != OK || err != nil {
		t.Fatalf("Allow = %v, %v", v, err)
	}
	// b learns of it through its mirror (or the create it loses).
	v, dup, err := b.Allow(ctx, kvRequest("d2", "c1", 2))
	if v != Duplicate || err != nil || dup.DecisionID() != "d1" {
		t.Fatalf("second Allow = %v %v, %v", v, dup, err)
	}
	if _, _, done := dup.Result(); done {
		t.Fatal("done before Complete")
	}
	got := make(chan *structpb.Struct, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, failed, done := dup.Wait(wctx)
		if !done || failed {
			t.Errorf("Wait = done %v failed %v", done, failed)
		}
		got <- res
	}()
	result, _ := structpb.NewStruct(map[string]any{"ticket": "T-9"})
	if _, err := b.Complete(ctx, "d1", AnyOwner, result, false); err != nil {
		t.Fatalf("Complete on the other replica: %v", err)
	}
	if res := <-got; res.GetFields()["ticket"].GetStringValue() != "T-9" {
		t.Fatalf("result %v", res)
	}
	if _, err := a.Complete(ctx, "d1", AnyOwner, nil, false); err != ErrAlreadyCompleted {
		t.Fatalf("second Complete = %v", err)
	}
	if _, err := a.Complete(ctx, "nope", AnyOwner, nil, false); err != ErrUnknownDecision {
		t.Fatalf("Complete of an unknown decision = %v", err)
	}

	// A failed action releases its reservation and its evidence use.
	if v, _, err := a.Allow(ctx, kvRequest("f1", "c2", 7)); v != OK || err != nil {
		t.Fatalf("Allow = %v, %v", v, err)
	}
	if _, err := b.Complete(ctx, "f1", AnyOwner, nil, true); err != nil {
		t.Fatal(err)
	}
	v, _, err = b.Allow(ctx, kvRequest("f2", "c2", 7))
	if v != OK || err != nil {
		t.Fatalf("retry after a failure = %v, %v", v, err)
	}
}

// TestKVEvidenceAndItems: a turn allows a tool once, whatever the
// arguments; a record tool's item repeats within its window unless a
// quantity is stated.
func TestKVEvidenceAndItems(t *testing.T) {
	ns := natstest.JetStream(t)
	a, b := replicaBook(t, ns.ClientURL()), replicaBook(t, ns.ClientURL())
	ctx := t.Context()
	r1 := kvRequest("e1", "c3", 4)
	if v, _, _ := a.Allow(ctx, r1); v != OK {
		t.Fatalf("first = %v", v)
	}
	r2 := kvRequest("e2", "c3", 4)
	r2.Key.ArgsHash = "h2"
	if v, orig, err := b.Allow(ctx, r2); v != EvidenceUsed || err != nil || orig.DecisionID() != "e1" {
		t.Fatalf("other arguments, same turn = %v, %v", v, err)
	}
	// The refused Allow released its own reservation: the same arguments
	// with a new turn pass. The other replica may still show the released
	// reservation for a moment: a duplicate of it learns that it was
	// released (failed), and the retry passes, as the engine retries.
	r3 := kvRequest("e3", "c3", 5)
	r3.Key.ArgsHash = "h2"
	v, orig, err := a.Allow(ctx, r3)
	if v == Duplicate {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, failed, done := orig.Wait(wctx)
		cancel()
		if !done || !failed || orig.DecisionID() != "e2" {
			t.Fatalf("a released reservation: done %v failed %v (%s)", done, failed, orig.DecisionID())
		}
		v, _, err = a.Allow(ctx, r3)
	}
	if v != OK || err != nil {
		t.Fatalf("new turn = %v, %v", v, err)
	}

	item := func(id, hash string, explicit bool) Request {
		r := kvRequest(id, "c4", 0)
		r.Key.ArgsHash, r.Item, r.ItemWindow, r.ExplicitQuantity = hash, "sku=1", 8*time.Second, explicit
		return r
	}
	if v, _, _ := a.Allow(ctx, item("i1", "a", false)); v != OK {
		t.Fatalf("item = %v", v)
	}
	if v, orig, _ := b.Allow(ctx, item("i2", "b", false)); v != QuantityRepeat || orig.DecisionID() != "i1" {
		t.Fatalf("item again = %v", v)
	}
	if v, _, _ := b.Allow(ctx, item("i3", "c", true)); v != OK {
		t.Fatalf("item with a quantity = %v", v)
	}
}

// TestKVFailedCompletionKeepsTheTurn: on the shared book, a failed
// Complete frees the action for a retry on any replica, and leaves the
// turn spent for other arguments on every replica.
func TestKVFailedCompletionKeepsTheTurn(t *testing.T) {
	ns := natstest.JetStream(t)
	a, b := replicaBook(t, ns.ClientURL()), replicaBook(t, ns.ClientURL())
	ctx := t.Context()
	first := kvRequest("f1", "c5", 6)
	if v, _, err := a.Allow(ctx, first); v != OK || err != nil {
		t.Fatalf("first = %v, %v", v, err)
	}
	if _, err := a.Complete(ctx, "f1", AnyOwner, nil, true); err != nil {
		t.Fatal(err)
	}
	other := kvRequest("f2", "c5", 6)
	other.Key.ArgsHash = "other"
	for name, book := range map[string]*KV{"a": a, "b": b} {
		v, orig, err := book.Allow(ctx, other)
		if v == Duplicate { // b's mirror may not have seen the release yet
			v, orig, err = book.Allow(ctx, other)
		}
		if v != EvidenceUsed || err != nil || orig.DecisionID() != "f1" {
			t.Fatalf("replica %s: other arguments on the failed action's turn = %v, %v; want EvidenceUsed of f1", name, v, err)
		}
	}
	// b's mirror takes the release and the failed mark in a moment (until
	// then it refuses: closed); then the same action passes there.
	retry := kvRequest("f3", "c5", 6)
	deadline := time.Now().Add(10 * time.Second)
	for v, _, _ := b.Lookup(ctx, retry); v != OK && time.Now().Before(deadline); v, _, _ = b.Lookup(ctx, retry) {
		time.Sleep(5 * time.Millisecond)
	}
	v, _, err := b.Allow(ctx, retry)
	if v != OK || err != nil {
		t.Fatalf("the same action again after it failed = %v, %v; want OK", v, err)
	}
	other.DecisionID = "f4"
	// (a's mirror may name f1 until it sees the retry's claim: refused
	// either way.)
	if v, orig, _ := a.Allow(ctx, other); v != EvidenceUsed || (orig.DecisionID() != "f3" && orig.DecisionID() != "f1") {
		t.Fatalf("other arguments after the retry = %v; want EvidenceUsed", v)
	}
}
