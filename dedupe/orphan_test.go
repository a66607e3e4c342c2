package dedupe

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/internal/natstest"
)

// Finding 16: NATS goes away while an ALLOW claims its key. The claim
// fails (the Check is refused), but the client delivers the buffered
// create once NATS is back: the key names a decision that was refused. It
// must be released, not held for MaxRunning with every retry a DUPLICATE
// of an action no one runs.
func TestKVClaimLostInOutageIsReleased(t *testing.T) {
	srv := natstest.StartRestartable(t)
	_, js, down, up := natstest.ConnectWatched(t, srv.ClientURL())
	b := bookOn(t, js)
	kv := b.kv
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := kvRequest("refused-1", "orphan-call", 1)

	srv.Stop()
	<-down
	actx, acancel := context.WithTimeout(ctx, 300*time.Millisecond)
	v, _, err := b.Allow(actx, req)
	acancel()
	if err == nil {
		t.Fatalf("Allow with NATS away answered %v, want an error", v)
	}
	srv.Start()
	<-up

	// The client delivers the buffered create; then it is released: the
	// key's last entry is a delete marker (there is one only after a put).
	w, err := kv.Watch(ctx, reservationKey(req.Key))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	held := ""
	for released := false; !released; {
		select {
		case e := <-w.Updates():
			switch {
			case e == nil:
			case e.Operation() == jetstream.KeyValuePut:
				held = string(e.Value())
			default:
				released = true
			}
		case <-ctx.Done():
			t.Fatalf("the refused claim's key is not released (held: %q); it would be held %s", held, MaxRunning)
		}
	}
	// A retry is allowed, on this replica and on another.
	other := replicaBook(t, srv.ClientURL())
	retry := kvRequest("retry-1", "orphan-call", 2)
	if v, r, err := other.Allow(ctx, retry); err != nil || v != OK {
		t.Fatalf("retry after the release: %v %v %v, want OK", v, r, err)
	}
}
