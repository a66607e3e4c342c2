package probe_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startGuard runs a guard in-process with the given policy ("" for the
// default) and returns a probe target for it.
func startGuard(t *testing.T, policy string) probe.Target {
	t.Helper()
	srv := servertest.Start(t, servertest.Options{Policy: policy})
	return target(t, srv.GRPCAddr(), srv.NATSURL())
}

func target(t *testing.T, grpcAddr, natsURL string) probe.Target {
	t.Helper()
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return probe.Target{Guard: yesguardv1.NewGuardClient(cc), NATS: nc, Prefix: server.DefaultSubjectPrefix}
}

func run(t *testing.T, tg probe.Target) []probe.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progressed []string
	results := probe.Run(ctx, tg, func(r probe.Result) { progressed = append(progressed, r.Name) })
	names := probe.Names()
	if len(results) != len(names) || len(progressed) != len(names) {
		t.Fatalf("%d results, %d progress calls, want %d", len(results), len(progressed), len(names))
	}
	for i, r := range results {
		if r.Name != names[i] || progressed[i] != names[i] {
			t.Errorf("result %d is %q (progress %q), want %q", i, r.Name, progressed[i], names[i])
		}
	}
	return results
}

func TestProbesPassAgainstTheGuard(t *testing.T) {
	for _, tc := range []struct{ name, policy string }{
		{"default policy", ""},
		{"policy listing submit_appeal", "tools:\n  submit_appeal:\n    verbs: {en: [submit, file]}\n    objects: {en: [appeal, request]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results := run(t, startGuard(t, tc.policy))
			for _, r := range results {
				if !r.Pass {
					t.Errorf("%s failed: want %s, got %s: %s", r.Name, r.Want, r.Got, r.Detail)
				}
				if len(r.Decisions) == 0 {
					t.Errorf("%s: no decision records", r.Name)
				}
			}
			if n := probe.Failed(results); n != 0 {
				t.Errorf("Failed = %d", n)
			}
			// Each call's records belong to it.
			for _, r := range results[:len(results)-1] {
				for _, d := range r.Decisions {
					if d.GetCallId() != r.CallID || d.GetTool() != probe.Tool {
						t.Errorf("%s: record of call %s tool %s", r.Name, d.GetCallId(), d.GetTool())
					}
				}
			}
		})
	}
}

// TestProbesFailWhenTheToolNeedsNoYes: a guard that lets submit_appeal run
// without confirmation fails the buyer's probes.
func TestProbesFailWhenTheToolNeedsNoYes(t *testing.T) {
	results := run(t, startGuard(t, "tools:\n  submit_appeal:\n    confirm: false\n"))
	failed := map[string]bool{}
	for _, r := range results {
		if !r.Pass {
			failed[r.Name] = true
		}
	}
	for _, name := range probe.Names() {
		if strings.HasSuffix(name, "is refused") && !failed[name] {
			t.Errorf("%q passed against a guard that allows without a yes", name)
		}
	}
	if !failed["every refusal has its log line"] {
		t.Error("the log probe passed with no refusals")
	}
	if probe.Failed(results) < 5 {
		t.Errorf("Failed = %d, want at least 5", probe.Failed(results))
	}
	if r := results[0]; !strings.Contains(r.Got, "OUTCOME_ALLOW") {
		t.Errorf("first probe got %q, want the ALLOW it saw", r.Got)
	}
}

// TestProbesAgainstNoGuard: NATS answers but no guard does; every probe
// fails, with the error, within the Check timeouts.
func TestProbesAgainstNoGuard(t *testing.T) {
	tg := startGuard(t, "")
	dead := target(t, "127.0.0.1:1", tg.NATS.ConnectedUrl())
	dead.CheckTimeout = 500 * time.Millisecond
	dead.Lag = 50 * time.Millisecond
	start := time.Now()
	results := run(t, dead)
	if probe.Failed(results) != len(results) {
		t.Errorf("%d of %d failed, want all", probe.Failed(results), len(results))
	}
	if r := results[0]; r.Got != "error" || !strings.Contains(r.Detail, "127.0.0.1:1") && !strings.Contains(r.Detail, "connect") {
		t.Errorf("first result %+v, want the connection error", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestResultJSON(t *testing.T) {
	r := probe.Result{Name: "n", Pass: true, Want: "w", Got: "g", CallID: "c",
		Decisions: []*yesguardv1.Decision{{DecisionId: "01J", Outcome: yesguardv1.Outcome_OUTCOME_REFUSE, Reason: yesguardv1.Reason_REASON_NO_QUESTION}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name      string `json:"name"`
		Pass      bool   `json:"pass"`
		CallID    string `json:"call_id"`
		Decisions []struct {
			DecisionID string `json:"decision_id"`
			Outcome    string `json:"outcome"`
			Reason     string `json:"reason"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if got.Name != "n" || !got.Pass || got.CallID != "c" || len(got.Decisions) != 1 ||
		got.Decisions[0].DecisionID != "01J" || got.Decisions[0].Outcome != "OUTCOME_REFUSE" || got.Decisions[0].Reason != "REASON_NO_QUESTION" {
		t.Errorf("JSON %s", b)
	}
	// No decisions: an empty list, not null.
	b, _ = json.Marshal(probe.Result{Name: "n"})
	if !strings.Contains(string(b), `"decisions":[]`) {
		t.Errorf("JSON %s", b)
	}
}
