package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/internal/natstest"
	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
	"github.com/yesguard/yesguard/transcript"
)

// startGuard runs a guard in-process with the given policy ("" for the
// default), stopped at the test's end.
func startGuard(t *testing.T, policy string) *server.Server {
	t.Helper()
	return servertest.Start(t, servertest.Options{Policy: policy})
}

// guardEnv points the client commands at srv through the environment, as
// a shell that started serve would.
func guardEnv(srv *server.Server) map[string]string {
	return map[string]string{"YESGUARD_GRPC_ADDR": srv.GRPCAddr(), "YESGUARD_NATS_URL": srv.NATSURL()}
}

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	code, stdout, stderr := runCapture(context.Background(), args, vars)
	return result{code, stdout, stderr}
}

func (r result) expect(t *testing.T, code int, stdout ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, want := range stdout {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}

// subscribe collects the transcript events published for every call.
func subscribe(t *testing.T, natsURL string) <-chan transcript.Event {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ch := make(chan transcript.Event, 16)
	if _, err := nc.Subscribe(server.DefaultSubjectPrefix+".>", func(m *nats.Msg) {
		var ev transcript.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Errorf("bad event %s: %v", m.Data, err)
		}
		ch <- ev
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

func next(t *testing.T, ch <-chan transcript.Event) transcript.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return transcript.Event{}
	}
}

func TestSay(t *testing.T) {
	// Its own NATS server: on the guard's embedded one nobody but the
	// guard may read transcripts (TestEmbeddedNATSPermissions).
	ns := natstest.JetStream(t)
	transcriptStream(t, ns.ClientURL(), jetstream.StreamConfig{})
	events := subscribe(t, ns.ClientURL())
	vars := map[string]string{"YESGUARD_NATS_URL": ns.ClientURL()}

	runCmd(t, vars, "say", "call-1", "agent", "Shall I submit your appeal?", "--response-id", "r1").
		expect(t, exitOK, `call-1: agent "Shall I submit your appeal?" (final, seq `, "yesguard.transcript.call-1")
	first := next(t, events)
	if first.CallID != "call-1" || first.Speaker != transcript.Agent || first.Type != transcript.TypeTranscript ||
		!first.Final || first.ResponseID != "r1" || first.Text != "Shall I submit your appeal?" || first.Lang != "" {
		t.Errorf("event %+v", first)
	}

	// Flags before the arguments, --interim, --lang; each invocation is a
	// newer run (epoch) of the source "cli".
	r := runCmd(t, vars, "say", "--lang=en", "--interim", "--json", "call-1", "caller", "Yes")
	r.expect(t, exitOK)
	second := next(t, events)
	if second.Final || second.Lang != "en" || second.Speaker != transcript.Caller {
		t.Errorf("event %+v", second)
	}
	if second.Source != "cli" || second.Epoch <= first.Epoch || second.Seq != 1 {
		t.Errorf("run %s/%d seq %d after epoch %d: want a newer epoch of cli, seq 1", second.Source, second.Epoch, second.Seq, first.Epoch)
	}
	var doc struct {
		Subject string           `json:"subject"`
		Event   transcript.Event `json:"event"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if doc.Subject != "yesguard.transcript.call-1" || doc.Event.Seq != second.Seq {
		t.Errorf("--json %+v", doc)
	}

	// A text that starts like a flag, after "--".
	runCmd(t, vars, "say", "call-1", "caller", "--", "-1 is my answer").expect(t, exitOK)
	if ev := next(t, events); ev.Text != "-1 is my answer" {
		t.Errorf("text %q", ev.Text)
	}
}

// transcriptStream makes the guard's transcript stream (cfg's other
// settings) on the server at url.
func transcriptStream(t *testing.T, url string, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	_, js := natstest.Connect(t, url)
	cfg.Name, cfg.Subjects = "YESGUARD_TRANSCRIPT", []string{server.DefaultSubjectPrefix + ".>"}
	st, err := js.CreateStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// F12 of the security red team: under a flood the server dropped a core
// publish at the stream's ingest queue without a word, and a caller's
// "No, wait" was lost, so the yes before it was allowed. yesguard say now
// waits for the stream's ack. A stream that will store nothing more
// (DiscardNew, full) stands for the drop, deterministically: say reports
// the event lost and exits 1; --no-ack (the old way) says it was sent.
// And when say returns 0, the stream holds the event already.
func TestSayWaitsForTheStreamsAck(t *testing.T) {
	ns := natstest.JetStream(t)
	vars := map[string]string{"YESGUARD_NATS_URL": ns.ClientURL()}
	st := transcriptStream(t, ns.ClientURL(), jetstream.StreamConfig{MaxMsgs: 1, Discard: jetstream.DiscardNew})

	runCmd(t, vars, "say", "call-1", "caller", "Yes.").expect(t, exitOK)
	info, err := st.Info(context.Background())
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("after say returned, the stream holds %v messages (%v), want 1", info.State.Msgs, err)
	}
	r := runCmd(t, vars, "say", "call-1", "caller", "No, wait.")
	if r.code != exitError || !strings.Contains(r.stderr, "maximum messages exceeded") {
		t.Fatalf("say of an event the stream refused: exit %d, stderr %q; want exit 1 naming the refusal", r.code, r.stderr)
	}
	runCmd(t, vars, "say", "--no-ack", "call-1", "caller", "No, wait.").expect(t, exitOK, "call-1: caller")
}

func TestClientUsageErrors(t *testing.T) {
	srv := startGuard(t, "")
	vars := guardEnv(srv)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"say missing text", []string{"say", "c1", "caller"}, exitUsage, "want 3 arguments"},
		{"say bad speaker", []string{"say", "c1", "robot", "hi"}, exitUsage, `speaker "robot"`},
		{"say bad call", []string{"say", "c.1", "caller", "hi"}, exitUsage, "NATS subject token"},
		{"say bad flag", []string{"say", "--nope", "c1", "caller", "hi"}, exitUsage, "nope"},
		{"say no NATS", []string{"say", "--nats-url", "nats://127.0.0.1:1", "c1", "caller", "hi"}, exitError, "is the guard running?"},
		{"check missing tool", []string{"check", "c1"}, exitUsage, "want 2 to 3 arguments"},
		{"check bad args", []string{"check", "c1", "submit_appeal", "[1]"}, exitUsage, "want a JSON object"},
		{"check no guard", []string{"check", "--grpc-addr", "127.0.0.1:1", "--timeout", "1s", "c1", "submit_appeal"}, exitError, "127.0.0.1:1"},
		{"check bad tool", []string{"check", "c1", "bad tool!"}, exitError, "InvalidArgument"},
		{"decisions extra", []string{"decisions", "c1", "c2"}, exitUsage, "want 1 arguments"},
		{"decisions none", []string{"decisions", "never-checked"}, exitError, `no decisions for call "never-checked"`},
		{"complete unknown", []string{"complete", "01NOPE"}, exitError, "NotFound"},
		{"complete bad result", []string{"complete", "01NOPE", "x"}, exitUsage, "want a JSON object"},
		{"probe arguments", []string{"probe", "extra"}, exitUsage, "want no arguments"},
		{"probe no guard", []string{"probe", "--grpc-addr", "127.0.0.1:1"}, exitError, "cannot reach the guard at 127.0.0.1:1"},
		{"help", []string{"check", "-h"}, exitOK, "Usage: yesguard check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, vars, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q\nstdout: %s", r.code, r.stderr, tc.code, tc.stderr, r.stdout)
			}
		})
	}
}

// TestCheckDecisionsComplete walks a call through the commands a person
// trying the guard would type.
func TestCheckDecisionsComplete(t *testing.T) {
	srv := startGuard(t, "")
	vars := guardEnv(srv)
	const call = "cli-call-1"

	runCmd(t, vars, "say", call, "agent", "Shall I submit your appeal now?").expect(t, exitOK)
	// The answer lands while the Check waits, as in a pipeline.
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCapture(context.Background(), []string{"check", call, "submit_appeal", `{"appeal_id":"A-1"}`}, vars)
		done <- result{code, stdout, stderr}
	}()
	time.Sleep(150 * time.Millisecond)
	runCmd(t, vars, "say", call, "caller", "Yes.").expect(t, exitOK)
	allowed := <-done
	allowed.expect(t, exitOK,
		`ALLOW confirmed  submit_appeal {"appeal_id":"A-1"}`,
		`question  agent: "Shall I submit your appeal now?"`,
		`answer    caller: "Yes."`,
		`matched   `, `affirmative "yes"`,
		`why       plain yes`,
		`model     Allowed`,
		` ms`)
	decisionID := strings.Fields(strings.SplitN(allowed.stdout, "decision  ", 2)[1])[0]
	decisionID = strings.TrimSuffix(decisionID, ",")

	runCmd(t, vars, "complete", decisionID, `{"status":"filed"}`).expect(t, exitOK, decisionID+": result reported")
	runCmd(t, vars, "complete", decisionID).expect(t, exitError)

	// Again: a duplicate, with the original's id, in JSON.
	r := runCmd(t, vars, "check", "--json", call, "submit_appeal", `{"appeal_id":"A-1"}`)
	r.expect(t, exitOK)
	var resp struct {
		DecisionID         string         `json:"decision_id"`
		Outcome            string         `json:"outcome"`
		Reason             string         `json:"reason"`
		OriginalDecisionID string         `json:"original_decision_id"`
		OriginalResult     map[string]any `json:"original_result"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if resp.Outcome != "OUTCOME_DUPLICATE" || resp.OriginalDecisionID != decisionID || resp.OriginalResult["status"] != "filed" {
		t.Errorf("duplicate: %+v", resp)
	}

	// Another tool on the same yes: refused, nothing asked about it.
	runCmd(t, vars, "check", call, "pay_bill", `{"amount":"12"}`).expect(t, exitOK, "REFUSE ", "pay_bill", "model     ")

	r = runCmd(t, vars, "decisions", call)
	r.expect(t, exitOK,
		"call "+call+": 3 decisions, 1 refused, 1 completion",
		"ALLOW confirmed  submit_appeal",
		"DUPLICATE duplicate  submit_appeal",
		"original  "+decisionID,
		"REFUSE ",
		`answer    caller: "Yes."`)
	if strings.Count(r.stdout, "\n  decision  ") != 3 {
		t.Errorf("want 3 decision blocks:\n%s", r.stdout)
	}

	r = runCmd(t, vars, "decisions", "--json", call)
	r.expect(t, exitOK)
	var list struct {
		CallID    string `json:"call_id"`
		Decisions []struct {
			DecisionID string `json:"decision_id"`
			CallID     string `json:"call_id"`
			Outcome    string `json:"outcome"`
			Kind       string `json:"kind"`
			Evidence   struct {
				Answer struct {
					Text string `json:"text"`
				} `json:"answer"`
			} `json:"evidence"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	// The Check, the Complete that reported its result, the duplicate, the
	// refusal.
	if list.CallID != call || len(list.Decisions) != 4 || list.Decisions[0].DecisionID != decisionID ||
		list.Decisions[0].Evidence.Answer.Text != "Yes." || list.Decisions[1].Kind != "DECISION_KIND_COMPLETE" ||
		list.Decisions[2].Outcome != "OUTCOME_DUPLICATE" {
		t.Errorf("decisions --json: %+v", list)
	}
}

func TestProbeCommand(t *testing.T) {
	srv := startGuard(t, "")
	vars := guardEnv(srv)

	r := runCmd(t, vars, "probe", "--call-prefix", "ci-probe")
	r.expect(t, exitOK, "Probing the guard at "+srv.GRPCAddr(), "all 7 probes passed", "yesguard decisions ci-probe-1")
	if n := strings.Count(r.stdout, "\nPASS  "); n != 7 {
		t.Errorf("%d PASS lines, want 7:\n%s", n, r.stdout)
	}
	for i, name := range probe.Names() {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("probe %d %q not reported", i+1, name)
		}
	}
	// The records are shown: the first probe's refusal, with its reason.
	for _, want := range []string{"REFUSE no_question  submit_appeal", `answer    caller: "Okay."`, "ALLOW confirmed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}

	r = runCmd(t, vars, "probe", "--json")
	r.expect(t, exitOK)
	var doc struct {
		Guard   string `json:"guard"`
		Passed  int    `json:"passed"`
		Failed  int    `json:"failed"`
		Results []struct {
			Name      string `json:"name"`
			Pass      bool   `json:"pass"`
			CallID    string `json:"call_id"`
			Decisions []struct {
				DecisionID string `json:"decision_id"`
				Outcome    string `json:"outcome"`
			} `json:"decisions"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("--json is not one JSON document: %v\n%s", err, r.stdout)
	}
	if doc.Guard != srv.GRPCAddr() || doc.Passed != 7 || doc.Failed != 0 || len(doc.Results) != 7 {
		t.Errorf("--json: %+v", doc)
	}
	for _, res := range doc.Results {
		if !res.Pass || len(res.Decisions) == 0 || res.Decisions[0].DecisionID == "" {
			t.Errorf("result %+v", res)
		}
	}
}

// TestProbeCommandFails: a guard that lets submit_appeal run without a yes
// fails the probes, and the command says so with its exit code.
func TestProbeCommandFails(t *testing.T) {
	srv := startGuard(t, "tools:\n  submit_appeal:\n    confirm: false\n")
	r := runCmd(t, guardEnv(srv), "probe")
	r.expect(t, exitError, "\nFAIL  1/7  okay to an announcement is refused", "got  OUTCOME_ALLOW/REASON_NOT_REQUIRED",
		"ALLOW not_required  submit_appeal", "probes failed")
	if strings.Contains(r.stdout, "all 7 probes passed") {
		t.Errorf("reported a pass:\n%s", r.stdout)
	}

	r = runCmd(t, guardEnv(srv), "probe", "--json")
	r.expect(t, exitError, `"failed": `)
}

// TestCheckRedeemComplete is the life of an approval through the commands:
// check prints it, redeem redeems it once (exit 0), refuses it again and
// for other arguments (exit 1, with the reason), complete --approval
// --failed is refused without the Redeem's receipt and reports the
// failure with it, and a retry redeems again.
func TestCheckRedeemComplete(t *testing.T) {
	srv := startGuard(t, "")
	vars := guardEnv(srv)
	const call = "cli-redeem"
	runCmd(t, vars, "say", call, "agent", "Shall I submit your appeal A-7 now?").expect(t, exitOK)
	runCmd(t, vars, "say", call, "caller", "Yes please.").expect(t, exitOK)
	allowed := runCmd(t, vars, "check", call, "submit_appeal", `{"appeal_id":"A-7"}`)
	allowed.expect(t, exitOK, "ALLOW confirmed", "approval  ", "expires ")
	_, rest, _ := strings.Cut(allowed.stdout, "approval  ")
	token := strings.Fields(rest)[0]
	if strings.Count(token, ".") != 2 {
		t.Fatalf("check printed %q as the approval", token)
	}

	redeemed := runCmd(t, vars, "redeem", token, `{"appeal_id":"A-7"}`, "--tool", "submit_appeal", "--call", call)
	redeemed.expect(t, exitOK, "REDEEMED redeemed  submit_appeal", "allowed   ", "call      "+call, "receipt   ", "backend   Redeemed: execute submit_appeal once")
	_, rest, _ = strings.Cut(redeemed.stdout, "receipt   ")
	receipt := strings.Fields(rest)[0]
	runCmd(t, vars, "redeem", token, `{"appeal_id":"A-7"}`).expect(t, exitError, "REFUSED already_redeemed", "Do not execute")
	runCmd(t, vars, "redeem", token, `{"appeal_id":"A-8"}`).expect(t, exitError, "REFUSED approval_mismatch", "why       the arguments given differ from the approved ones")
	// Without arguments, the answer says they are missing, not only that
	// two hashes differ.
	runCmd(t, vars, "redeem", token).expect(t, exitError, "REFUSED approval_mismatch", "why       no arguments were given", `'{"appeal_id":"A-17"}'`)
	runCmd(t, vars, "redeem", token, `{"appeal_id":"A-7","appeal_id":"A-8"}`).expect(t, exitUsage)

	if r := runCmd(t, vars, "complete", "--approval", token, "--failed"); r.code != exitError || !strings.Contains(r.stderr, "receipt") {
		t.Fatalf("complete --failed without the receipt: exit %d, %s", r.code, r.stderr)
	}
	runCmd(t, vars, "complete", "--approval", token, "--receipt", receipt, "--failed").expect(t, exitOK, "reported failed")
	r := runCmd(t, vars, "redeem", "--json", token, `{"appeal_id":"A-7"}`)
	r.expect(t, exitOK)
	var resp struct {
		Reason            string `json:"reason"`
		AllowedDecisionID string `json:"allowed_decision_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp.Reason != "REASON_REDEEMED" || resp.AllowedDecisionID == "" {
		t.Fatalf("redeem --json after the failure: %+v, %v\n%s", resp, err, r.stdout)
	}
	runCmd(t, vars, "complete", "--approval", token, `{"status":"filed"}`).expect(t, exitOK, "result reported")
	runCmd(t, vars, "redeem", token, `{"appeal_id":"A-7"}`).expect(t, exitError, "REFUSED already_redeemed", "already reported done")

	runCmd(t, vars, "decisions", call).expect(t, exitOK,
		"6 redeems", "approval  signed by key ", "REDEEMED redeemed  submit_appeal", "REDEEM REFUSED approval_mismatch", "of        "+resp.AllowedDecisionID)
	runCmd(t, vars, "complete").expect(t, exitUsage)
}

// `yesguard decisions` pages through a call whose records are more than
// one gRPC answer holds (it answered ResourceExhausted on the first page).
func TestDecisionsPagesThroughALargeCall(t *testing.T) {
	srv := startGuard(t, "tools:\n  note:\n    confirm: false\n")
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	guard := yesguardv1.NewGuardClient(cc)
	const call, n = "cli-large", 80 // 80 records of 60 KB: over gRPC's 4 MiB
	blob := strings.Repeat("x", 60000)
	for i := range n {
		args, _ := structpb.NewStruct(map[string]any{"n": i, "blob": blob})
		if _, err := guard.Check(t.Context(), &yesguardv1.CheckRequest{CallId: call, Tool: "note", Args: args}); err != nil {
			t.Fatal(err)
		}
	}
	r := runCmd(t, guardEnv(srv), "decisions", "--json", call)
	r.expect(t, exitOK)
	var out struct {
		Decisions []json.RawMessage `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("--json: %v", err)
	}
	if len(out.Decisions) != n {
		t.Errorf("printed %d records, want %d", len(out.Decisions), n)
	}
}

// A NATS server that answers and refuses the credential is not a guard
// that is down: the error says which credential flags to give.
func TestSayRefusedCredentialNamesTheFlags(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, Username: "pipeline", Password: "secret", NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	r := runCmd(t, nil, "say", "--nats-url", ns.ClientURL(), "c1", "caller", "hi")
	if r.code != exitError || !strings.Contains(r.stderr, "refused this credential") || strings.Contains(r.stderr, "is the guard running?") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the credential flags, not asking whether the guard runs", r.code, r.stderr)
	}
}
