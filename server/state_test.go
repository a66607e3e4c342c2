package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// The regression tests of the red team's state findings (issue 10, part
// 3) that belong to the server: start-up and the data directory. Each
// waits for states, never for time.

// observedLogger is a test logger whose warnings and errors are also kept.
func observedLogger(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.WarnLevel)
	return zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)), logs
}

// Finding 19: three replicas starting together on a fresh three-node
// cluster, with R3 state, all start, each on its first attempt: a
// concurrent create that nats-server leaves unanswered does not make a
// replica wait out its timeout and start over (which, three objects in
// turn, outlasted the start budget).
func TestStartTogetherOnFreshCluster(t *testing.T) {
	c := newJSCluster(t)
	log, logs := observedLogger(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	srvs := make([]*Server, 3)
	for i := range 3 {
		wg.Go(func() {
			cfg := Config{GRPCAddr: "127.0.0.1:0", NATSURL: c.url(i, (i+1)%3, (i+2)%3), JSReplicas: 3, ShutdownTimeout: 10 * time.Second, DataDir: t.TempDir()}
			srv, err := New(cfg, WithDecisionSink(&captureSink{}), WithLogger(log.Named(fmt.Sprint("replica-", i))))
			if err != nil {
				errs[i] = err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), faultWait)
			defer cancel()
			errs[i] = srv.Start(ctx)
			if errs[i] == nil {
				srvs[i] = srv
			}
		})
	}
	wg.Wait()
	for i, srv := range srvs {
		if srv != nil {
			t.Cleanup(func() { stopServer(t, srv) })
		}
		if errs[i] != nil {
			t.Errorf("replica %d did not start: %v", i, errs[i])
		}
	}
	for _, e := range logs.FilterMessageSnippet("not set up yet").All() {
		t.Errorf("a replica had to set up its JetStream state again: %s %v", e.Message, e.ContextMap())
	}
	c.waitStreamsCurrent()
}

// Finding 12: two single binaries on one --data-dir both ran on one
// JetStream store, and a restart then forgot one's state. The second now
// does not start, saying why; once the first has stopped, the directory
// is free again.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	embedded := func() *Server {
		srv, err := New(Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", DataDir: dir, ShutdownTimeout: 10 * time.Second},
			WithDecisionSink(&captureSink{}), WithLogger(zaptest.NewLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	first := embedded()
	if err := first.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := embedded()
	err := second.Start(t.Context())
	if err == nil {
		stopServer(t, second)
		stopServer(t, first)
		t.Fatal("a second guard started on a data dir in use")
	}
	if want := fmt.Sprintf("in use by another yesguard (pid %d)", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("second start: %v, want it to say %q", err, want)
	}
	stopServer(t, first)
	third := embedded()
	if err := third.Start(t.Context()); err != nil {
		t.Fatalf("the data dir is not free once its guard stopped: %v", err)
	}
	stopServer(t, third)
}
