package server

import (
	"context"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// NATS without JetStream stops start-up at once, naming the cause. Red team
// finding 22: nothing listened for 30 s, then "context deadline exceeded",
// the cause only in warn lines.
func TestStartWithoutJetStreamFailsClearly(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats server not ready")
	}
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), DataDir: t.TempDir(), ShutdownTimeout: 5 * time.Second}
	s := newServer(t, cfg)
	// The bound is far above what failing at once takes, and below the 30 s
	// a set-up that only timed out takes: a Start that returns within it
	// did not wait for the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = s.Start(ctx)
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	if err == nil {
		t.Fatal("Start succeeded on a NATS without JetStream")
	}
	if !strings.Contains(err.Error(), "no JetStream") || strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Start: %v; want the cause (no JetStream) without waiting for the set-up's timeout", err)
	}
}
