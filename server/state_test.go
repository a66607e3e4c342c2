package server

import (
	"context"
	"fmt"
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
