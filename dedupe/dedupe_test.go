package dedupe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLimit fails a test that blocks; it is never the thing measured.
const waitLimit = 10 * time.Second

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	window      = 30 * time.Second
	evidenceTTL = 5 * time.Minute
	itemWindow  = 2 * time.Minute
)

// rq builds a request at t0+at with the package's test windows.
func rq(id, call, tool, args string, at time.Duration) Request {
	return Request{
		Key:         Key{CallID: call, Tool: tool, ArgsHash: args},
		DecisionID:  id,
		Now:         t0.Add(at),
		Window:      window,
		EvidenceTTL: evidenceTTL,
		ItemWindow:  itemWindow,
	}
}

func withTurn(r Request, turn uint64) Request { r.TurnID = turn; return r }
func withItem(r Request, item string) Request { r.Item = item; return r }
func explicit(r Request) Request              { r.ExplicitQuantity = true; return r }

func mustAllow(t testing.TB, b *Memory, r Request) Reservation {
	t.Helper()
	v, res, _ := b.Allow(bg, r)
	if v != OK {
		t.Fatalf("Allow(%s) = %v, want ok", r.DecisionID, v)
	}
	if res == nil || res.DecisionID() != r.DecisionID {
		t.Fatalf("Allow(%s) reservation = %v", r.DecisionID, res)
	}
	return res
}

func mustComplete(t testing.TB, b *Memory, id string, result *structpb.Struct, failed bool) {
	t.Helper()
	if _, err := b.Complete(bg, id, AnyOwner, result, failed); err != nil {
		t.Fatalf("Complete(%s) = %v", id, err)
	}
}

func TestVerdicts(t *testing.T) {
	type prior struct {
		req Request
		// complete: "" leaves it running, "ok" or "failed".
		complete string
	}
	ok := func(r Request) prior { return prior{r, "ok"} }
	running := func(r Request) prior { return prior{r, ""} }

	a := rq("d1", "c1", "book", "h1", 0)
	cases := []struct {
		name   string
		priors []prior
		req    Request
		want   Verdict
		orig   string // decision id of the returned reservation; "" for OK
	}{
		{"fresh", nil, rq("d2", "c1", "book", "h1", 0), OK, ""},

		// Duplicate.
		{"same key in window", []prior{ok(a)}, rq("d2", "c1", "book", "h1", window-time.Nanosecond), Duplicate, "d1"},
		{"same key at window end", []prior{ok(a)}, rq("d2", "c1", "book", "h1", window), OK, ""},
		{"same key after window", []prior{ok(a)}, rq("d2", "c1", "book", "h1", time.Hour), OK, ""},
		{"running past window", []prior{running(a)}, rq("d2", "c1", "book", "h1", 5*time.Minute), Duplicate, "d1"},
		{"running just under cap", []prior{running(a)}, rq("d2", "c1", "book", "h1", MaxRunning-time.Nanosecond), Duplicate, "d1"},
		{"running past cap", []prior{running(a)}, rq("d2", "c1", "book", "h1", MaxRunning), OK, ""},
		{"failed releases key", []prior{{a, "failed"}}, rq("d2", "c1", "book", "h1", time.Second), OK, ""},
		{"other args", []prior{ok(a)}, rq("d2", "c1", "book", "h2", time.Second), OK, ""},
		{"other tool", []prior{ok(a)}, rq("d2", "c1", "cancel", "h1", time.Second), OK, ""},
		{"other call", []prior{ok(a)}, rq("d2", "c2", "book", "h1", time.Second), OK, ""},

		// EvidenceUsed.
		{"same turn other args", []prior{ok(withTurn(a, 7))}, withTurn(rq("d2", "c1", "book", "h2", time.Second), 7), EvidenceUsed, "d1"},
		{"same turn same args after window", []prior{ok(withTurn(a, 7))}, withTurn(rq("d2", "c1", "book", "h1", 2*window), 7), EvidenceUsed, "d1"},
		{"same turn after ttl", []prior{ok(withTurn(a, 7))}, withTurn(rq("d2", "c1", "book", "h2", evidenceTTL), 7), OK, ""},
		{"same turn other tool", []prior{ok(withTurn(a, 7))}, withTurn(rq("d2", "c1", "cancel", "h2", time.Second), 7), OK, ""},
		{"same turn other call", []prior{ok(withTurn(a, 7))}, withTurn(rq("d2", "c2", "book", "h2", time.Second), 7), OK, ""},
		{"other turn", []prior{ok(withTurn(a, 7))}, withTurn(rq("d2", "c1", "book", "h2", time.Second), 8), OK, ""},
		{"no turn after turn", []prior{ok(withTurn(a, 7))}, rq("d2", "c1", "book", "h2", time.Second), OK, ""},
		{"no turn twice", []prior{ok(a)}, rq("d2", "c1", "book", "h2", time.Second), OK, ""},
		{"failed keeps evidence from other args", []prior{{withTurn(a, 7), "failed"}}, withTurn(rq("d2", "c1", "book", "h2", time.Second), 7), EvidenceUsed, "d1"},
		{"failed frees evidence for the same action", []prior{{withTurn(a, 7), "failed"}}, withTurn(rq("d2", "c1", "book", "h1", time.Second), 7), OK, ""},

		// QuantityRepeat.
		{"item repeat", []prior{ok(withItem(a, "milk"))}, withItem(rq("d2", "c1", "book", "h2", time.Second), "milk"), QuantityRepeat, "d1"},
		{"item repeat explicit", []prior{ok(withItem(a, "milk"))}, explicit(withItem(rq("d2", "c1", "book", "h2", time.Second), "milk")), OK, ""},
		{"item after window", []prior{ok(withItem(a, "milk"))}, withItem(rq("d2", "c1", "book", "h2", itemWindow), "milk"), OK, ""},
		{"other item", []prior{ok(withItem(a, "milk"))}, withItem(rq("d2", "c1", "book", "h2", time.Second), "eggs"), OK, ""},
		{"item other tool", []prior{ok(withItem(a, "milk"))}, withItem(rq("d2", "c1", "order", "h2", time.Second), "milk"), OK, ""},
		{"item other call", []prior{ok(withItem(a, "milk"))}, withItem(rq("d2", "c2", "book", "h2", time.Second), "milk"), OK, ""},
		{"failed releases item", []prior{{withItem(a, "milk"), "failed"}}, withItem(rq("d2", "c1", "book", "h2", time.Second), "milk"), OK, ""},
		{"latest explicit record answers", []prior{
			ok(withItem(a, "milk")),
			ok(explicit(withItem(rq("d2", "c1", "book", "h2", time.Minute), "milk"))),
		}, withItem(rq("d3", "c1", "book", "h3", itemWindow), "milk"), QuantityRepeat, "d2"},

		// Precedence: duplicate, then evidence, then quantity.
		{"duplicate before evidence and item", []prior{ok(withItem(withTurn(a, 7), "milk"))},
			withItem(withTurn(rq("d2", "c1", "book", "h1", time.Second), 7), "milk"), Duplicate, "d1"},
		{"evidence before item", []prior{
			ok(withItem(rq("d0", "c1", "book", "h0", 0), "milk")),
			ok(withTurn(a, 7)),
		}, withItem(withTurn(rq("d2", "c1", "book", "h2", time.Second), 7), "milk"), EvidenceUsed, "d1"},
		{"duplicate before evidence of another", []prior{
			ok(withTurn(rq("d0", "c1", "book", "h0", 0), 7)),
			ok(a),
		}, withTurn(rq("d2", "c1", "book", "h1", time.Second), 7), Duplicate, "d1"},
		{"quantity last", []prior{ok(withItem(withTurn(a, 7), "milk"))},
			withItem(withTurn(rq("d2", "c1", "book", "h2", time.Second), 8), "milk"), QuantityRepeat, "d1"},
		{"explicit does not pass evidence", []prior{ok(withItem(withTurn(a, 7), "milk"))},
			explicit(withItem(withTurn(rq("d2", "c1", "book", "h2", time.Second), 7), "milk")), EvidenceUsed, "d1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewMemory(nil)
			for _, p := range tc.priors {
				mustAllow(t, b, p.req)
				switch p.complete {
				case "ok":
					mustComplete(t, b, p.req.DecisionID, nil, false)
				case "failed":
					mustComplete(t, b, p.req.DecisionID, nil, true)
				}
			}

			// Lookup answers as Allow will, and reserves nothing.
			for range 2 {
				v, res, _ := b.Lookup(bg, tc.req)
				checkVerdict(t, "Lookup", v, res, tc.want, tc.orig)
			}
			v, res, _ := b.Allow(bg, tc.req)
			checkVerdict(t, "Allow", v, res, tc.want, tc.orig)
			if v == OK && res.DecisionID() != tc.req.DecisionID {
				t.Fatalf("Allow OK reservation id = %q, want %q", res.DecisionID(), tc.req.DecisionID)
			}
		})
	}
}

func checkVerdict(t *testing.T, op string, v Verdict, res Reservation, want Verdict, orig string) {
	t.Helper()
	if v != want {
		t.Fatalf("%s = %v, want %v", op, v, want)
	}
	if want == OK {
		if op == "Lookup" && res != nil {
			t.Fatalf("Lookup OK returned reservation %q", res.DecisionID())
		}
		return
	}
	if res == nil || res.DecisionID() != orig {
		t.Fatalf("%s %v returned %v, want reservation of %q", op, v, res, orig)
	}
}

func TestAllowReservesAfterOK(t *testing.T) {
	b := NewMemory(nil)
	r := withItem(withTurn(rq("d1", "c1", "book", "h1", 0), 3), "milk")
	mustAllow(t, b, r)

	r2 := r
	r2.DecisionID = "d2"
	if v, res, _ := b.Allow(bg, r2); v != Duplicate || res.DecisionID() != "d1" {
		t.Fatalf("second Allow = %v %v", v, res)
	}
	r2.Key.ArgsHash = "h2"
	if v, res, _ := b.Allow(bg, r2); v != EvidenceUsed || res.DecisionID() != "d1" {
		t.Fatalf("other args = %v %v", v, res)
	}
	r2.TurnID = 4
	if v, res, _ := b.Allow(bg, r2); v != QuantityRepeat || res.DecisionID() != "d1" {
		t.Fatalf("other turn = %v %v", v, res)
	}
	r2.ExplicitQuantity = true
	mustAllow(t, b, r2)
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{
		OK: "ok", Duplicate: "duplicate", EvidenceUsed: "evidence_used",
		QuantityRepeat: "quantity_repeat", Verdict(99): "unknown",
	} {
		if got := v.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(v), got, want)
		}
	}
}

func TestCompleteResultReachesDuplicates(t *testing.T) {
	b := NewMemory(nil)
	orig := mustAllow(t, b, rq("d1", "c1", "book", "h1", 0))
	if _, _, done := orig.Result(); done {
		t.Fatal("Result done before Complete")
	}

	_, dup, _ := b.Allow(bg, rq("d2", "c1", "book", "h1", time.Second))
	if dup != orig {
		t.Fatal("duplicate did not return the original reservation")
	}

	want, err := structpb.NewStruct(map[string]any{"confirmation": "ABC123"})
	if err != nil {
		t.Fatal(err)
	}
	mustComplete(t, b, "d1", want, false)

	got, failed, done := dup.Result()
	if !done || failed || !proto.Equal(got, want) {
		t.Fatalf("Result = %v %v %v", got, failed, done)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	got, failed, done = dup.Wait(ctx)
	if !done || failed || !proto.Equal(got, want) {
		t.Fatalf("Wait = %v %v %v", got, failed, done)
	}

	// A later duplicate within the window still gets it.
	v, later, _ := b.Allow(bg, rq("d3", "c1", "book", "h1", window-time.Second))
	if v != Duplicate {
		t.Fatalf("later = %v", v)
	}
	if got, _, _ := later.Result(); !proto.Equal(got, want) {
		t.Fatalf("later Result = %v", got)
	}
}

func TestWaitWokenByComplete(t *testing.T) {
	for _, failed := range []bool{false, true} {
		t.Run(fmt.Sprint("failed=", failed), func(t *testing.T) {
			b := NewMemory(nil)
			mustAllow(t, b, rq("d1", "c1", "book", "h1", 0))
			_, dup, _ := b.Allow(bg, rq("d2", "c1", "book", "h1", time.Second))

			type out struct {
				result       *structpb.Struct
				failed, done bool
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			const waiters = 5
			started := make(chan struct{}, waiters)
			outs := make(chan out, waiters)
			for range waiters {
				go func() {
					started <- struct{}{}
					r, f, d := dup.Wait(ctx)
					outs <- out{r, f, d}
				}()
			}
			for range waiters {
				<-started
			}

			// A failed completion's result is dropped: failures are never
			// replayed.
			want, _ := structpb.NewStruct(map[string]any{"ok": true})
			mustComplete(t, b, "d1", want, failed)

			for range waiters {
				select {
				case o := <-outs:
					if !o.done {
						t.Fatal("waiter ended without completion (timed out)")
					}
					if o.failed != failed {
						t.Fatalf("waiter failed = %v, want %v", o.failed, failed)
					}
					if failed && o.result != nil {
						t.Fatalf("failed completion carried a result: %v", o.result)
					}
					if !failed && !proto.Equal(o.result, want) {
						t.Fatalf("waiter result = %v", o.result)
					}
				case <-time.After(waitLimit):
					t.Fatal("waiter not woken by Complete")
				}
			}
		})
	}
}

func TestWaitContextEnds(t *testing.T) {
	b := NewMemory(nil)
	res := mustAllow(t, b, rq("d1", "c1", "book", "h1", 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, f, d := res.Wait(ctx); d || f || r != nil {
		t.Fatalf("Wait on ended ctx = %v %v %v", r, f, d)
	}

	// A completed reservation answers Wait even on an ended context.
	mustComplete(t, b, "d1", nil, false)
	if _, _, d := res.Wait(ctx); !d {
		t.Fatal("Wait on ended ctx missed a completion")
	}
}

// A failed completion frees the action for a retry (the same request is
// judged afresh), not the caller's turn for other arguments: the yes given
// to that action is not consent to another.
func TestFailedCompletionReleasesTheAction(t *testing.T) {
	b := NewMemory(nil)
	req := withItem(withTurn(rq("d1", "c1", "book", "h1", 0), 9), "milk")
	res := mustAllow(t, b, req)
	mustComplete(t, b, "d1", nil, true)

	if r, f, d := res.Result(); !d || !f || r != nil {
		t.Fatalf("Result after failure = %v %v %v", r, f, d)
	}

	// Key and item are free, and the turn for the same action: the same
	// request is OK again, and so is one using the key or the item alone.
	for _, r := range []Request{
		withTurn(rq("x", "c1", "book", "h1", time.Second), 9),
		withItem(rq("x", "c1", "book", "h3", time.Second), "milk"),
		rq("x", "c1", "book", "h1", time.Second),
	} {
		if v, _, _ := b.Lookup(bg, r); v != OK {
			t.Fatalf("Lookup %+v after failure = %v", r, v)
		}
	}
	// The turn is still spent for other arguments.
	if v, orig, _ := b.Lookup(bg, withTurn(rq("x", "c1", "book", "h2", time.Second), 9)); v != EvidenceUsed || orig.DecisionID() != "d1" {
		t.Fatalf("the failed action's turn for other arguments = %v, want EvidenceUsed of d1", v)
	}
	req.DecisionID = "d2"
	req.Now = t0.Add(time.Second)
	mustAllow(t, b, req)

	// The failed decision is gone.
	if _, err := b.Complete(bg, "d1", AnyOwner, nil, false); !errors.Is(err, ErrUnknownDecision) {
		t.Fatalf("Complete after failure = %v, want ErrUnknownDecision", err)
	}
	if _, err := b.Complete(bg, "d1", AnyOwner, nil, true); !errors.Is(err, ErrUnknownDecision) {
		t.Fatalf("second failure = %v, want ErrUnknownDecision", err)
	}
	// And the retry is intact, and now holds the turn.
	mustComplete(t, b, "d2", nil, false)
	if v, orig, _ := b.Lookup(bg, withTurn(rq("x", "c1", "book", "h2", 2*time.Second), 9)); v != EvidenceUsed || orig.DecisionID() != "d2" {
		t.Fatalf("the retried turn for other arguments = %v, want EvidenceUsed of d2", v)
	}
}

func TestFailedCompletionReleasesOnlyItsOwn(t *testing.T) {
	b := NewMemory(nil)

	// Item: an explicit repeat that fails leaves the first record.
	mustAllow(t, b, withItem(rq("d1", "c1", "order", "h1", 0), "milk"))
	mustComplete(t, b, "d1", nil, false)
	mustAllow(t, b, explicit(withItem(rq("d2", "c1", "order", "h2", time.Second), "milk")))
	mustComplete(t, b, "d2", nil, true)
	if v, res, _ := b.Lookup(bg, withItem(rq("d3", "c1", "order", "h3", 2*time.Second), "milk")); v != QuantityRepeat || res.DecisionID() != "d1" {
		t.Fatalf("item after failed repeat = %v %v, want quantity repeat of d1", v, res)
	}

	// Key: an expired reservation that fails late does not free the key
	// from the one that replaced it.
	mustAllow(t, b, rq("k1", "c2", "book", "h1", 0))
	mustAllow(t, b, rq("k2", "c2", "book", "h1", MaxRunning))
	mustComplete(t, b, "k1", nil, true)
	if v, res, _ := b.Lookup(bg, rq("k3", "c2", "book", "h1", MaxRunning+time.Second)); v != Duplicate || res.DecisionID() != "k2" {
		t.Fatalf("key after late failure = %v %v, want duplicate of k2", v, res)
	}

	// Evidence: likewise.
	mustAllow(t, b, withTurn(rq("e1", "c3", "book", "h1", 0), 1))
	mustComplete(t, b, "e1", nil, false)
	mustAllow(t, b, withTurn(rq("e2", "c3", "book", "h2", evidenceTTL), 1))
	if _, err := b.Complete(bg, "e1", AnyOwner, nil, true); !errors.Is(err, ErrAlreadyCompleted) {
		t.Fatalf("failing a completed decision = %v, want ErrAlreadyCompleted", err)
	}
	if v, res, _ := b.Lookup(bg, withTurn(rq("e3", "c3", "book", "h3", evidenceTTL+time.Second), 1)); v != EvidenceUsed || res.DecisionID() != "e2" {
		t.Fatalf("evidence = %v %v, want evidence used by e2", v, res)
	}
}

func TestCompleteErrors(t *testing.T) {
	b := NewMemory(nil)
	if _, err := b.Complete(bg, "never", AnyOwner, nil, false); !errors.Is(err, ErrUnknownDecision) {
		t.Fatalf("unknown = %v", err)
	}
	if _, err := b.Complete(bg, "never", AnyOwner, nil, true); !errors.Is(err, ErrUnknownDecision) {
		t.Fatalf("unknown failed = %v", err)
	}

	res := mustAllow(t, b, rq("d1", "c1", "book", "h1", 0))
	first, _ := structpb.NewStruct(map[string]any{"n": 1})
	mustComplete(t, b, "d1", first, false)
	second, _ := structpb.NewStruct(map[string]any{"n": 2})
	if _, err := b.Complete(bg, "d1", AnyOwner, second, false); !errors.Is(err, ErrAlreadyCompleted) {
		t.Fatalf("second ok Complete = %v, want ErrAlreadyCompleted", err)
	}
	if _, err := b.Complete(bg, "d1", AnyOwner, nil, true); !errors.Is(err, ErrAlreadyCompleted) {
		t.Fatalf("failed after ok = %v, want ErrAlreadyCompleted", err)
	}
	if r, f, d := res.Result(); !d || f || !proto.Equal(r, first) {
		t.Fatalf("Result = %v %v %v, want the first result", r, f, d)
	}
	// A failure after success released nothing.
	if v, _, _ := b.Lookup(bg, rq("d2", "c1", "book", "h1", time.Second)); v != Duplicate {
		t.Fatalf("key after rejected failure = %v", v)
	}
}

func TestSweep(t *testing.T) {
	b := NewMemory(nil)
	// Completed, with evidence and item.
	mustAllow(t, b, withItem(withTurn(rq("d1", "c1", "order", "h1", 0), 1), "milk"))
	mustComplete(t, b, "d1", nil, false)
	// Running.
	mustAllow(t, b, rq("d2", "c2", "book", "h1", 0))
	// Completed, other call.
	mustAllow(t, b, rq("d3", "c3", "book", "h1", 0))
	mustComplete(t, b, "d3", nil, false)

	if n := b.Sweep(t0.Add(window - time.Nanosecond)); n != 0 {
		t.Fatalf("Sweep inside every window = %d, want 0", n)
	}
	// Windows passed: d1 and d3 go; d2 is running; evidence and item stay.
	if n := b.Sweep(t0.Add(window)); n != 2 {
		t.Fatalf("Sweep at window = %d, want 2", n)
	}
	if _, err := b.Complete(bg, "d3", AnyOwner, nil, false); !errors.Is(err, ErrUnknownDecision) {
		t.Fatalf("Complete swept = %v, want ErrUnknownDecision", err)
	}
	if v, _, _ := b.Lookup(bg, withTurn(rq("x", "c1", "order", "h2", window), 1)); v != EvidenceUsed {
		t.Fatalf("evidence after reservation swept = %v", v)
	}
	if v, _, _ := b.Lookup(bg, withItem(rq("x", "c1", "order", "h2", window), "milk")); v != QuantityRepeat {
		t.Fatalf("item after reservation swept = %v", v)
	}
	// Item window ends.
	if n := b.Sweep(t0.Add(itemWindow)); n != 1 {
		t.Fatalf("Sweep at item window = %d, want 1", n)
	}
	// Evidence TTL ends; d2 still running.
	if n := b.Sweep(t0.Add(evidenceTTL)); n != 1 {
		t.Fatalf("Sweep at evidence TTL = %d, want 1", n)
	}
	if v, _, _ := b.Lookup(bg, rq("x", "c2", "book", "h1", evidenceTTL)); v != Duplicate {
		t.Fatalf("running reservation after sweeps = %v", v)
	}
	// Running cap ends.
	if n := b.Sweep(t0.Add(MaxRunning)); n != 1 {
		t.Fatalf("Sweep at running cap = %d, want 1", n)
	}
	if _, err := b.Complete(bg, "d2", AnyOwner, nil, false); !errors.Is(err, ErrUnknownDecision) {
		t.Fatalf("Complete after cap = %v, want ErrUnknownDecision", err)
	}
	if n := b.Sweep(t0.Add(24 * time.Hour)); n != 0 {
		t.Fatalf("Sweep of empty book = %d", n)
	}
	checkEmpty(t, b)
}

func TestSweepReplacedReservation(t *testing.T) {
	b := NewMemory(nil)
	// k1 runs past the cap and is replaced in the key map by k2; both
	// are held until their own expiry.
	mustAllow(t, b, rq("k1", "c1", "book", "h1", 0))
	mustAllow(t, b, rq("k2", "c1", "book", "h1", MaxRunning))
	mustComplete(t, b, "k2", nil, false)
	if n := b.Sweep(t0.Add(MaxRunning)); n != 1 {
		t.Fatalf("Sweep = %d, want 1 (k1)", n)
	}
	if v, res, _ := b.Lookup(bg, rq("x", "c1", "book", "h1", MaxRunning+time.Second)); v != Duplicate || res.DecisionID() != "k2" {
		t.Fatalf("after sweeping the replaced one = %v %v", v, res)
	}
	if n := b.Sweep(t0.Add(MaxRunning + window)); n != 1 {
		t.Fatalf("Sweep = %d, want 1 (k2)", n)
	}
	checkEmpty(t, b)
}

func TestSweepKeepsNewerItemRecords(t *testing.T) {
	b := NewMemory(nil)
	mustAllow(t, b, withItem(rq("d1", "c1", "order", "h1", 0), "milk"))
	mustAllow(t, b, explicit(withItem(rq("d2", "c1", "order", "h2", time.Minute), "milk")))
	mustComplete(t, b, "d1", nil, false)
	mustComplete(t, b, "d2", nil, false)
	// d1's record goes, d2's stays (both reservations go too).
	if n := b.Sweep(t0.Add(itemWindow)); n != 3 {
		t.Fatalf("Sweep = %d, want 3", n)
	}
	if v, res, _ := b.Lookup(bg, withItem(rq("x", "c1", "order", "h3", itemWindow), "milk")); v != QuantityRepeat || res.DecisionID() != "d2" {
		t.Fatalf("after sweep = %v %v", v, res)
	}
	if n := b.Sweep(t0.Add(time.Minute + itemWindow)); n != 1 {
		t.Fatalf("Sweep = %d, want 1", n)
	}
	checkEmpty(t, b)
}

// checkEmpty asserts that b holds nothing at all.
func checkEmpty(t *testing.T, b *Memory) {
	t.Helper()
	for i := range b.calls {
		s := &b.calls[i]
		s.mu.Lock()
		n := len(s.keys) + len(s.evidence) + len(s.items) + len(s.held)
		s.mu.Unlock()
		if n != 0 {
			t.Fatalf("call shard %d holds %d entries", i, n)
		}
	}
	for i := range b.index {
		s := &b.index[i]
		s.mu.Lock()
		n := len(s.ids)
		s.mu.Unlock()
		if n != 0 {
			t.Fatalf("index shard %d holds %d entries", i, n)
		}
	}
}

// race runs n goroutines that each call Allow with reqs[i] as close to
// together as a start barrier allows, and returns the verdicts.
func race(t *testing.T, b *Memory, reqs []Request) ([]Verdict, []Reservation) {
	t.Helper()
	verdicts := make([]Verdict, len(reqs))
	ress := make([]Reservation, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() {
			<-start
			verdicts[i], ress[i], _ = b.Allow(bg, reqs[i])
		})
	}
	close(start)
	wg.Wait()
	return verdicts, ress
}

func checkOneOK(t *testing.T, verdicts []Verdict, ress []Reservation, refused Verdict) {
	t.Helper()
	var winner Reservation
	oks := 0
	for i, v := range verdicts {
		if v == OK {
			oks++
			winner = ress[i]
		}
	}
	if oks != 1 {
		t.Fatalf("%d OK verdicts, want exactly 1", oks)
	}
	for i, v := range verdicts {
		if v == OK {
			continue
		}
		if v != refused {
			t.Fatalf("goroutine %d got %v, want %v", i, v, refused)
		}
		if ress[i] != winner {
			t.Fatalf("goroutine %d got reservation %q, want the winner's %q", i, ress[i].DecisionID(), winner.DecisionID())
		}
	}
}

func TestConcurrentSameKeyOneOK(t *testing.T) {
	b := NewMemory(nil)
	reqs := make([]Request, 100)
	for i := range reqs {
		reqs[i] = rq(fmt.Sprint("d", i), "c1", "book", "h1", 0)
	}
	v, r := race(t, b, reqs)
	checkOneOK(t, v, r, Duplicate)
}

func TestConcurrentSameTurnOneOK(t *testing.T) {
	b := NewMemory(nil)
	reqs := make([]Request, 100)
	for i := range reqs {
		reqs[i] = withTurn(rq(fmt.Sprint("d", i), "c1", "book", fmt.Sprint("h", i), 0), 42)
	}
	v, r := race(t, b, reqs)
	checkOneOK(t, v, r, EvidenceUsed)
}

func TestConcurrentSameItemOneOK(t *testing.T) {
	b := NewMemory(nil)
	reqs := make([]Request, 100)
	for i := range reqs {
		reqs[i] = withItem(rq(fmt.Sprint("d", i), "c1", "order", fmt.Sprint("h", i), 0), "milk")
	}
	v, r := race(t, b, reqs)
	checkOneOK(t, v, r, QuantityRepeat)
}

// TestConcurrentMixed drives every operation at once for the race detector
// and checks the book is consistent afterwards.
func TestConcurrentMixed(t *testing.T) {
	b := NewMemory(prometheus.NewRegistry())
	const workers, per = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			for i := range per {
				at := time.Duration(i) * time.Second
				r := withItem(withTurn(rq(fmt.Sprint(w, "-", i), fmt.Sprint("c", i%5), "book", fmt.Sprint("h", i%7), at), uint64(i%3+1)), fmt.Sprint("item", i%4))
				r.ExplicitQuantity = i%2 == 0
				b.Lookup(bg, r)
				v, res, _ := b.Allow(bg, r)
				if v == OK {
					_, _ = b.Complete(bg, r.DecisionID, AnyOwner, nil, i%3 == 0)
					res.Wait(ctx)
				} else {
					res.Result()
				}
				if i%50 == 0 {
					b.Sweep(r.Now)
				}
			}
		})
	}
	wg.Wait()
	b.Sweep(t0.Add(24 * time.Hour))
	checkEmpty(t, b)
	if g := toFloat64(t, b.reservations); g != 0 {
		t.Fatalf("reservations gauge = %v after full sweep", g)
	}
}

// TestReservationsGauge follows the gauge through refusals, a failure, a
// success and a sweep. (Hits are counted by the service, from the
// decisions.)
func TestReservationsGauge(t *testing.T) {
	b := NewMemory(prometheus.NewRegistry())
	gauge := func() float64 { return toFloat64(t, b.reservations) }

	mustAllow(t, b, withItem(withTurn(rq("d1", "c1", "order", "h1", 0), 1), "milk"))
	mustAllow(t, b, rq("d2", "c2", "book", "h1", 0))
	if g := gauge(); g != 2 {
		t.Fatalf("gauge = %v, want 2", g)
	}
	for _, r := range []Request{
		rq("x", "c1", "order", "h1", time.Second),
		withTurn(rq("x", "c1", "order", "h2", time.Second), 1),
		withItem(rq("x", "c1", "order", "h3", time.Second), "milk"),
	} {
		if v, _, _ := b.Allow(bg, r); v == OK {
			t.Fatalf("Allow(%+v) = ok, want a repeat", r)
		}
	}
	if g := gauge(); g != 2 {
		t.Fatalf("gauge after refusals = %v, want 2", g)
	}

	mustComplete(t, b, "d2", nil, true)
	if g := gauge(); g != 1 {
		t.Fatalf("gauge after failure = %v, want 1", g)
	}
	mustComplete(t, b, "d1", nil, false)
	if g := gauge(); g != 1 {
		t.Fatalf("gauge after success = %v, want 1", g)
	}
	b.Sweep(t0.Add(window))
	if g := gauge(); g != 0 {
		t.Fatalf("gauge after sweep = %v, want 0", g)
	}
}

func TestNilMetrics(t *testing.T) {
	b := NewMemory(nil)
	mustAllow(t, b, rq("d1", "c1", "book", "h1", 0))
	b.Allow(bg, rq("d2", "c1", "book", "h1", 0))
	mustComplete(t, b, "d1", nil, true)
	b.Sweep(t0.Add(time.Hour))
}

// toFloat64 reads the value of a collector holding exactly one gauge or
// counter, as prometheus/testutil.ToFloat64 does. testutil itself needs
// github.com/kylelemons/godebug, which is not in this module's go.sum.
func toFloat64(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 2)
	c.Collect(ch)
	close(ch)
	var ms []prometheus.Metric
	for m := range ch {
		ms = append(ms, m)
	}
	if len(ms) != 1 {
		t.Fatalf("collector yields %d metrics, want 1", len(ms))
	}
	var pb dto.Metric
	if err := ms[0].Write(&pb); err != nil {
		t.Fatal(err)
	}
	switch {
	case pb.Gauge != nil:
		return pb.Gauge.GetValue()
	case pb.Counter != nil:
		return pb.Counter.GetValue()
	case pb.Untyped != nil:
		return pb.Untyped.GetValue()
	}
	t.Fatalf("collector is neither gauge nor counter")
	return 0
}

// bg is the context of calls that a memory book never blocks on.
var bg = context.Background()
