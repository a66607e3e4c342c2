package server

import (
	"strings"
	"testing"
	"time"

	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// After NATS comes back, the guard judges no call until the publishers had
// time to reconnect and flush what they buffered: the reconnect grace.
// Red team finding 1: the restarted binary was ready 103 ms later and
// allowed the yes; the publisher's "Wait, no.", buffered during the
// outage, arrived 2 s after.
func TestReconnectGraceAfterEmbeddedRestart(t *testing.T) {
	dir := t.TempDir()
	// A grace far longer than the test needs, ended by hand below (as time
	// would), so that a slow machine cannot outrun it.
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second, DataDir: dir, ReconnectGrace: 10 * time.Minute}
	r := startReplicaCfg(t, cfg)
	if !r.serving() {
		t.Fatal("a first start on an empty data directory waits out a grace: no publisher was connected before")
	}
	pub := newPublisher(t, r.srv.NATSURL())
	call := "grace"
	pub.conversation(call) // the question and the yes
	eventuallyFor(t, "the yes applied", func() bool { snap, _ := r.srv.store.Snapshot(call); return len(snap.Utterances) == 2 })
	stopServer(t, r.srv)

	r2 := startReplicaCfg(t, cfg) // the same data directory: the stream holds the call
	resp, err := r2.check(t.Context(), call, appealTool, appealArgs)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_GAP || !strings.Contains(resp.GetDetail(), "reconnect grace") {
		t.Fatalf("right after the restart: %s/%s (%s), want TRANSCRIPT_GAP for the reconnect grace", resp.GetOutcome(), resp.GetReason(), resp.GetDetail())
	}
	cc := dial(t, r2.srv.GRPCAddr())
	if st := healthStatus(t, cc, GuardService); st != healthgrpc.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during the grace: %s", st)
	}
	// The publisher reconnects and flushes what it buffered.
	pub2 := newPublisher(t, r2.srv.NATSURL())
	pub2.publish(event(call, transcript.Caller, "stt", 1, 2, "Wait, no."))
	eventuallyFor(t, "the no applied", func() bool { snap, _ := r2.srv.store.Snapshot(call); return len(snap.Utterances) == 3 })

	r2.srv.graceUntil.Store(time.Now().UnixNano()) // the grace is over
	r2.srv.updateFeedHealth()
	if !r2.serving() {
		t.Fatal("not serving once the grace is over")
	}
	resp, err = r2.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("after the grace: %v, %v; want the caller's no", resp, err)
	}
}

// The grace ends by itself, and the health says SERVING again.
func TestReconnectGraceEnds(t *testing.T) {
	cfg := testConfig(t)
	cfg.ReconnectGrace = 200 * time.Millisecond
	ts := startServer(t, cfg)
	ts.startGrace("a test")
	if ts.serving() {
		t.Fatal("serving during the grace")
	}
	cc := dial(t, ts.GRPCAddr())
	eventuallyFor(t, "SERVING after the grace", func() bool {
		return healthStatus(t, cc, GuardService) == healthgrpc.HealthCheckResponse_SERVING
	})
}
