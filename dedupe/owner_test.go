package dedupe

import (
	"errors"
	"testing"
	"time"

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
			if v, _, err := b[0].Allow(t.Context(), again); err != nil || v != OK {
				t.Fatalf("Allow by the no-token identity: %v, %v", v, err)
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
