// Package natstest starts real nats-servers in process for tests: one
// with JetStream on the test's temporary directory, and connections to it
// that close at the test's end. Nothing is mocked.
package natstest

import (
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream starts a server on a free loopback port with JetStream on
// t.TempDir(), shut down when the test ends.
func JetStream(t testing.TB) *natsserver.Server {
	t.Helper()
	return StartRestartable(t).Server
}

// Connect connects to url, closed when the test ends, with its JetStream.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Restartable is a JetStream server on a fixed port and store that a test
// stops and starts again (an outage); it is shut down when the test ends.
type Restartable struct {
	t    testing.TB
	opts natsserver.Options
	*natsserver.Server
}

// StartRestartable starts a Restartable on a free loopback port with
// JetStream on t.TempDir().
func StartRestartable(t testing.TB) *Restartable {
	t.Helper()
	r := &Restartable{t: t, opts: natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	r.Start()
	r.opts.Port = r.Addr().(*net.TCPAddr).Port
	t.Cleanup(r.Stop)
	return r
}

// Start starts the server (again), on the same port and store.
func (r *Restartable) Start() {
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
	r.Server = ns
}

// Stop shuts the server down and waits until it has.
func (r *Restartable) Stop() {
	r.Shutdown()
	r.WaitForShutdown()
}

// ConnectWatched connects to url, reconnecting for ever every 20 ms, and
// reports each disconnect on down and each reconnect on up.
func ConnectWatched(t testing.TB, url string) (nc *nats.Conn, js jetstream.JetStream, down, up <-chan struct{}) {
	t.Helper()
	d, u := make(chan struct{}, 16), make(chan struct{}, 16)
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { d <- struct{}{} }),
		nats.ReconnectHandler(func(*nats.Conn) { u <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// No default timeout to speak of: what returns in time does so by
	// itself, not because a request timed out.
	js, err = jetstream.New(nc, jetstream.WithDefaultTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, d, u
}
