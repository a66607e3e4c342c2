package dedupe

import (
	"context"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// restartable is a nats-server on a fixed port and store, stopped and
// started again by the test.
type restartable struct {
	t    *testing.T
	opts natsserver.Options
	ns   *natsserver.Server
}

func startRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, opts: natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	r.start()
	r.opts.Port = r.ns.Addr().(*net.TCPAddr).Port
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	r.t.Helper()
	opts := r.opts
	ns, err := natsserver.NewServer(&opts)
	if err != nil {
		r.t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		r.t.Fatal("nats-server not ready")
	}
	r.ns = ns
}

func (r *restartable) stop() {
	r.ns.Shutdown()
	r.ns.WaitForShutdown()
}

// Finding 16: NATS goes away while an ALLOW claims its key. The claim
// fails (the Check is refused), but the client delivers the buffered
// create once NATS is back: the key names a decision that was refused. It
// must be released, not held for MaxRunning with every retry a DUPLICATE
// of an action no one runs.
func TestKVClaimLostInOutageIsReleased(t *testing.T) {
	srv := startRestartable(t)
	down, up := make(chan struct{}, 8), make(chan struct{}, 8)
	nc, err := nats.Connect(srv.ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { down <- struct{}{} }),
		nats.ReconnectHandler(func(*nats.Conn) { up <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
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
	req := kvRequest("refused-1", "orphan-call", 1)

	srv.stop()
	<-down
	actx, acancel := context.WithTimeout(ctx, 300*time.Millisecond)
	v, _, err := b.Allow(actx, req)
	acancel()
	if err == nil {
		t.Fatalf("Allow with NATS away answered %v, want an error", v)
	}
	srv.start()
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
	other := replicaBook(t, srv.ns.ClientURL())
	retry := kvRequest("retry-1", "orphan-call", 2)
	if v, r, err := other.Allow(ctx, retry); err != nil || v != OK {
		t.Fatalf("retry after the release: %v %v %v, want OK", v, r, err)
	}
}
