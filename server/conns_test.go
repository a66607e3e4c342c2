package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
)

// listenerConns is the open connections gauge of a listener, -1 when the
// registry has none.
func (r *replica) listenerConns(listener string) int {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "yesguard_listener_connections" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "listener" && l.GetValue() == listener {
					return int(m.GetGauge().GetValue())
				}
			}
		}
	}
	return -1
}

// closedByServer reports whether the server closed c within d (a read
// returns EOF or a reset, not a timeout of ours).
func closedByServer(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// Idle TCP connections that never speak (an unauthenticated client
// opening thousands) hold at most max_conns of a listener's, and are
// closed once the handshake timeout passes, so the descriptors they take
// are bounded and come back; a real client is served after them. Without
// the bound and the timeout each one held a descriptor for two minutes
// (gRPC) or for ever, until the process had none left for anyone.
func TestIdleConnectionsAreBoundedAndClosed(t *testing.T) {
	const maxConns, idle = 4, 12
	r := startReplicaCfg(t, Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", State: StateMemory,
		ShutdownTimeout: 5 * time.Second, DataDir: t.TempDir(), MaxConns: maxConns})
	var conns []net.Conn
	for range idle {
		c, err := net.Dial("tcp", r.srv.GRPCAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	most := 0
	eventuallyFor(t, "the gRPC listener full", func() bool {
		n := r.listenerConns(listenerGRPC)
		most = max(most, n)
		return n == maxConns
	})
	// The server closes every one of them, a bound's worth at a time,
	// within the handshake timeout of each being accepted.
	limit := time.Duration(idle/maxConns+2) * handshakeTimeout
	for i, c := range conns {
		if !closedByServer(c, limit) {
			t.Fatalf("idle connection %d still open after %s", i, limit)
		}
		most = max(most, r.listenerConns(listenerGRPC))
	}
	if most > maxConns {
		t.Fatalf("the gRPC listener held %d connections at once, want at most %d", most, maxConns)
	}
	ctx, cancel := context.WithTimeout(t.Context(), faultWait)
	defer cancel()
	if _, err := healthgrpc.NewHealthClient(dial(t, r.srv.GRPCAddr())).Check(ctx, &healthgrpc.HealthCheckRequest{}); err != nil {
		t.Fatalf("a real client after the idle ones: %v", err)
	}
}

// An HTTP connection kept alive after its request and then left idle is
// closed after the idle timeout (it was held for ever), and one that
// never sends its headers after the handshake timeout.
func TestIdleHTTPConnectionsAreClosed(t *testing.T) {
	r := startReplicaCfg(t, Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", State: StateMemory,
		ShutdownTimeout: 5 * time.Second, DataDir: t.TempDir(), IdleTimeout: time.Second})
	c, err := net.Dial("tcp", r.srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(faultWait))
	if n, err := c.Read(buf); err != nil || n == 0 {
		t.Fatalf("no answer to /healthz: %v", err)
	}
	if !closedByServer(c, 20*time.Second) {
		t.Fatal("a kept-alive idle HTTP connection is still open 20 s after its answer")
	}
	silent, err := net.Dial("tcp", r.srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if !closedByServer(silent, 4*handshakeTimeout) {
		t.Fatalf("an HTTP connection that sent nothing is still open after %s", 4*handshakeTimeout)
	}
	// The pages answer after them.
	resp, err := http.Get("http://" + r.srv.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
