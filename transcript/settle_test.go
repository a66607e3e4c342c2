package transcript

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/yesguard/yesguard/internal/natstest"
)

// countStreamRequests counts the JetStream API requests that read the
// stream (its info, or a message of it) from now on.
func countStreamRequests(t *testing.T, url string) *atomic.Int64 {
	t.Helper()
	nc, _ := natstest.Connect(t, url)
	var n atomic.Int64
	for _, subj := range []string{"$JS.API.STREAM.INFO.>", "$JS.API.STREAM.MSG.GET.>", "$JS.API.DIRECT.GET.>"} {
		if _, err := nc.Subscribe(subj, func(*nats.Msg) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &n
}

// TestSettleBurstSharesRequests: a burst of concurrent Settles on live
// calls costs a few requests for the stream's last sequence, shared, not
// one JetStream API request each (which queue on the server until the
// Checks' deadlines pass).
func TestSettleBurstSharesRequests(t *testing.T) {
	ns := natstest.JetStream(t)
	nc, js := natstest.Connect(t, ns.ClientURL())
	if _, err := js.CreateOrUpdateStream(t.Context(), StreamConfig("YG_TRANSCRIPT", testPrefix, time.Hour, 64<<20, 0, 2*time.Minute, 1)); err != nil {
		t.Fatal(err)
	}
	const calls, burst = 50, 1000
	for i := range calls {
		publishEvent(t, js, sourced(fmt.Sprint("live-", i), Caller, "stt", 1, 1, "yes"), "")
	}
	m := NewMetrics(nil)
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, NewStore(Limits{}, nil), Limits{}, nil, m, StreamOptions{})
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	waitUntil(t, "caught up", func() bool { return in.CaughtUp() && in.Applied() == calls })
	_ = nc

	requests := countStreamRequests(t, ns.ClientURL())
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := make(chan struct{})
	for i := range burst {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := in.Settle(ctx, fmt.Sprint("live-", i%calls)); err != nil {
				failed.Add(1)
				t.Errorf("Settle: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	// Every request the burst made has reached the counter once a flush
	// on its connection returns.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the requests counted", func() bool { return requests.Load() >= 1 })
	if n := requests.Load(); n > burst/10 {
		t.Fatalf("%d concurrent Settles made %d requests that read the stream, want them shared (at most %d)", burst, n, burst/10)
	}
	t.Logf("%d concurrent Settles: %d stream requests, %d failed", burst, requests.Load(), failed.Load())
}

// TestSettleWaitsForWhatTheStreamHolds: Settle returns only once this
// replica has applied every event the stream held when it was called,
// shared request or not; a consumer stalled before an event keeps it
// waiting until its deadline.
func TestSettleWaitsForWhatTheStreamHolds(t *testing.T) {
	js, _ := jetStreamOn(t)
	publishEvent(t, js, sourced("held", Agent, "tts", 1, 1, "Shall I?"), "")
	release := make(chan struct{})
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, NewStore(Limits{}, nil), Limits{}, nil, NewMetrics(nil), StreamOptions{})
	in.beforeHandle = func(seq uint64) {
		if seq == 2 {
			<-release
		}
	}
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	waitUntil(t, "caught up", func() bool { return in.CaughtUp() && in.Applied() == 1 })
	if err := in.Settle(t.Context(), "held"); err != nil {
		t.Fatalf("Settle with everything applied: %v", err)
	}

	// The caller's yes is stored, but its delivery is stalled: Settle
	// waits for it. A call the stream holds nothing of has nothing to
	// wait for.
	publishEvent(t, js, sourced("held", Caller, "stt", 1, 1, "yes"), "")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	err := in.Settle(ctx, "held")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Settle with stream sequence 2 unapplied: %v, want the deadline", err)
	}
	if err := in.Settle(t.Context(), "other"); err != nil {
		t.Fatalf("Settle of a call the stream holds nothing of: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- in.Settle(t.Context(), "held") }()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Settle once applied: %v", err)
	}
	if in.Applied() < 2 {
		t.Fatalf("Settle returned with stream sequence %d applied, want 2", in.Applied())
	}
}
