package dedupe

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yesguard/yesguard/internal/natstest"
)

// TestCompleteOnlyByOwner: a reservation is completed only by the owner
// whose Allow made it (or AnyOwner): another owner's Complete, failed or
// not, is ErrNotOwner and changes nothing; the memory book and two KV
// replicas (the owner read from the bucket, not from the replica that
// allowed) agree.
func TestCompleteOnlyByOwner(t *testing.T) {
	ns := natstest.JetStream(t)
	first := replicaBook(t, ns.ClientURL())
	books := map[string][2]Book{
		"memory": func() [2]Book { m := NewMemory(nil); return [2]Book{m, m} }(),
		"kv":     {first, replicaBook(t, ns.ClientURL())},
	}
	for name, b := range books {
		t.Run(name, func(t *testing.T) {
			call := "own-" + name
			req := kvRequest("a1", call, 1)
			req.Owner = "token:pipe1"
			if v, _, err := b[0].Allow(t.Context(), req); err != nil || v != OK {
				t.Fatalf("Allow: %v, %v", v, err)
			}
			for _, failed := range []bool{true, false} {
				if _, err := b[1].Complete(t.Context(), "a1", "token:pipe2", nil, failed); !errors.Is(err, ErrNotOwner) {
					t.Errorf("Complete(failed=%v) by another owner: %v, want ErrNotOwner", failed, err)
				}
				if _, err := b[1].Complete(t.Context(), "a1", "", nil, failed); !errors.Is(err, ErrNotOwner) {
					t.Errorf("Complete(failed=%v) by the no-token identity: %v, want ErrNotOwner", failed, err)
				}
			}
			retry := kvRequest("a2", call, 1)
			retry.Now = time.Now()
			if v, r, err := b[1].Allow(t.Context(), retry); err != nil || v != Duplicate || r.DecisionID() != "a1" {
				t.Fatalf("after the refused Completes, a retry: %v, %v; want DUPLICATE of a1 (still held)", v, err)
			}
			if _, err := b[1].Complete(t.Context(), "a1", "token:pipe1", nil, true); err != nil {
				t.Errorf("Complete by the owner: %v", err)
			}
			again := kvRequest("a3", call, 2)
			again.Owner = ""
			// b[0] learns of b[1]'s release through its mirror: until it
			// has, it answers DUPLICATE (held, failing closed). Wait for
			// the release to reach it, bounded.
			deadline := time.Now().Add(10 * time.Second)
			for {
				again.Now = time.Now()
				v, _, err := b[0].Allow(t.Context(), again)
				if err == nil && v == OK {
					break
				}
				if err != nil || v != Duplicate || time.Now().After(deadline) {
					t.Fatalf("Allow by the no-token identity after the owner's release: %v, %v", v, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := b[1].Complete(t.Context(), "a3", "token:pipe1", nil, false); !errors.Is(err, ErrNotOwner) {
				t.Errorf("a token completing the no-token identity's ALLOW: %v, want ErrNotOwner", err)
			}
			if _, err := b[1].Complete(t.Context(), "a3", AnyOwner, nil, false); err != nil {
				t.Errorf("Complete by AnyOwner: %v", err)
			}
		})
	}
}

// TestKVUnreadableItemRecordFailsClosed (red team F10): an item record
// that does not decode (here a JetStream PubAck, as a publish's reply
// subject can write one) counts as a live use for the quantity window
// from its write, in the mirror (Lookup) and at the claim (Allow), on
// every replica; it is counted; and an explicit quantity still goes
// through.
func TestKVUnreadableItemRecordFailsClosed(t *testing.T) {
	ns := natstest.JetStream(t)
	a, b := replicaBook(t, ns.ClientURL()), replicaBook(t, ns.ClientURL())
	item := func(id string) Request {
		// Each with other arguments (a note), the same item.
		r := kvRequest(id, "poisoned", 0)
		r.Key.Tool, r.Key.ArgsHash, r.Item, r.ItemWindow = "add_item", "h-"+id, `sku="SKU-1"`, 8*time.Second
		return r
	}
	if v, _, err := a.Allow(t.Context(), item("i1")); err != nil || v != OK {
		t.Fatalf("first add: %v, %v", v, err)
	}
	key := itemKeyOf("poisoned", "add_item", `sku="SKU-1"`)
	if _, err := a.kv.Put(t.Context(), key, []byte(`{"stream":"YESGUARD_TRANSCRIPT","seq":42}`)); err != nil {
		t.Fatal(err)
	}
	// Wait until both mirrors applied the poisoned revision.
	for _, bk := range []*KV{a, b} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			bk.mu.Lock()
			m := bk.keys[key]
			bad := m != nil && m.badItem != 0
			bk.mu.Unlock()
			if bad {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the mirror never applied the poisoned item record")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for name, bk := range map[string]*KV{"a": a, "b": b} {
		if v, _, err := bk.Lookup(t.Context(), item("i2")); err != nil || v != QuantityRepeat {
			t.Errorf("replica %s Lookup on the poisoned record: %v, %v; want QuantityRepeat", name, v, err)
		}
		if v, _, err := bk.recordItem(t.Context(), func() *Request { r := item("i3"); return &r }()); err != nil || v != QuantityRepeat {
			t.Errorf("replica %s recordItem on the poisoned record: %v, %v; want QuantityRepeat", name, v, err)
		}
		if got := testutil.ToFloat64(bk.unreadable); got != 1 {
			t.Errorf("replica %s counted %v unreadable records, want 1", name, got)
		}
	}
	explicit := item("i4")
	explicit.ExplicitQuantity = true
	if v, _, err := b.Allow(t.Context(), explicit); err != nil || v != OK {
		t.Errorf("an explicit quantity on the poisoned record: %v, %v; want OK", v, err)
	}
	late := item("i5")
	late.Now = time.Now().Add(9 * time.Second)
	if _, err := b.kv.Put(t.Context(), key, []byte(`junk`)); err != nil {
		t.Fatal(err)
	}
	if v, _, err := b.recordItem(t.Context(), &late); err != nil || v != OK {
		t.Errorf("past the window from the write: %v, %v; want OK (bounded)", v, err)
	}
}
