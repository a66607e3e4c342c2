// Package servertest starts a real yesguard server in-process for tests,
// as net/http/httptest does for HTTP: gRPC and an embedded NATS server
// (JetStream on the test's temporary directory, the default state) on free
// loopback ports, its own metrics registry, a test logger, and a Stop at
// the test's end. Nothing is mocked.
package servertest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
)

// Options adjust the server a test starts; the zero value is a server with
// the default policy whose decisions are discarded.
type Options struct {
	// Policy is a policy's YAML; "" is the default policy.
	Policy string
	// Config, when set, edits the config before the server is built (a
	// policy file, an HTTP address, a decision log file, ...).
	Config func(*server.Config)
	// Registry receives the server's metrics; nil gives a fresh one.
	Registry *prometheus.Registry
	// Log keeps the decision log the config names instead of discarding
	// decisions.
	Log bool
}

// Start builds and starts a server and stops it when the test ends.
func Start(t testing.TB, o Options) *server.Server {
	t.Helper()
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second, DataDir: t.TempDir()}
	if o.Policy != "" {
		cfg.PolicyPath = filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(cfg.PolicyPath, []byte(o.Policy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if o.Config != nil {
		o.Config(&cfg)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	opts := []server.Option{server.WithLogger(zaptest.NewLogger(t)), server.WithRegistry(o.Registry)}
	if !o.Log {
		opts = append(opts, server.WithDecisionSink(Discard{}))
	}
	srv, err := server.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return srv
}

// Discard is a decision sink that drops every record.
type Discard struct{}

// Write drops d.
func (Discard) Write(*yesguardv1.Decision) {}

// Buffer is a goroutine-safe bytes.Buffer, for a server's output that a
// test reads while the server still writes.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
