package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// A replay longer than Start waits for does not stop start-up: the guard
// listens, says it is catching up (health, /readyz, the Checks' refusals)
// and serves once it is. Red team finding 15: after a busy ten minutes a
// restarted replica listened on nothing for 30 s, then exited.
func TestStartListensWhileReplaying(t *testing.T) {
	cfg := testConfig(t)
	cfg.ReconnectGrace = -1 // this test is about the replay
	cfg.Limits.MaxEventsPerSecond = 1 << 20
	first := startServer(t, cfg)
	nc, err := nats.Connect(first.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	// A busy stream: 20 000 events of other calls, then the call judged.
	const busy = 20000
	for i := range busy {
		b, _ := json.Marshal(event(fmt.Sprint("busy-", i%500), transcript.Caller, "stt", 1, uint64(i/500+1), "words"))
		if err := nc.Publish(DefaultSubjectPrefix+fmt.Sprint(".busy-", i%500), b); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range []transcript.Event{
		event("replayed", transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"),
		event("replayed", transcript.Caller, "stt", 1, 1, "Yes."),
	} {
		b, _ := json.Marshal(ev)
		if err := nc.Publish(DefaultSubjectPrefix+".replayed", b); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventuallyFor(t, "the first replica applied it", func() bool { return first.js.ingester.Load().Applied() == busy+2 })
	nc.Close()
	stopServer(t, first.Server)

	second := newServer(t, cfg)
	none := time.Duration(0)
	second.catchUpWait = &none // Start does not wait for the replay at all
	if err := second.Start(t.Context()); err != nil {
		t.Fatalf("Start during a long replay: %v", err)
	}
	t.Cleanup(func() { stopServer(t, second.Server) })
	if second.js.ingester.Load().CaughtUp() {
		t.Fatalf("caught up with %d events before Start returned: the test replays nothing", busy)
	}
	cc := dial(t, second.GRPCAddr())
	if st := healthStatus(t, cc, GuardService); st != healthgrpc.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health while replaying: %s", st)
	}
	if code, body := httpGet(t, "http://"+second.HTTPAddr()+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "catching up") {
		t.Fatalf("/readyz while replaying: %d %q", code, body)
	}
	if code, _ := httpGet(t, "http://"+second.HTTPAddr()+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while replaying: %d", code)
	}
	resp := checkOn(t, cc, "replayed")
	if resp.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_GAP || !strings.Contains(resp.GetDetail(), "catching up") {
		t.Fatalf("a Check while replaying: %s/%s %q", resp.GetOutcome(), resp.GetReason(), resp.GetDetail())
	}
	eventuallyFor(t, "caught up", second.serving)
	if resp := checkOn(t, cc, "replayed"); resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("once caught up: %s/%s %q", resp.GetOutcome(), resp.GetReason(), resp.GetDetail())
	}
}

// checkOn asks for submit_appeal on the call.
func checkOn(t *testing.T, cc *grpc.ClientConn, call string) *yesguardv1.CheckResponse {
	t.Helper()
	args, _ := structpb.NewStruct(appealArgs)
	resp, err := yesguardv1.NewGuardClient(cc).Check(t.Context(), &yesguardv1.CheckRequest{CallId: call, Tool: appealTool, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
