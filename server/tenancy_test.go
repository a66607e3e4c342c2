package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// TestCompleteBelongsToWhoGotTheAllow (red team F2, F2b): of two pipeline
// tokens, only the one whose Check got the ALLOW may Complete it. The
// other's Complete, failed (which would free the reservation, so the same
// yes allows again while the action runs) or with a made-up result (which
// the real pipeline's duplicate would be told), is PermissionDenied,
// counted, and changes nothing.
func TestCompleteBelongsToWhoGotTheAllow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	toks := writeTokens(t, path, map[string][]auth.Role{"pipe1": {auth.RolePipeline}, "pipe2": {auth.RolePipeline}})
	srv, reg, _ := startConfigured(t, func(c *Config) { c.GRPCTokens = path })
	client := yesguardv1.NewGuardClient(plainClient(t, srv.GRPCAddr()))
	pub, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p1, p2 := bearer(ctx, toks["pipe1"]), bearer(ctx, toks["pipe2"])

	resp, err := askYes(t, pub, client, p1, "own-1")
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("pipe1's Check: %v, %v; want ALLOW", resp, err)
	}
	id := resp.GetDecisionId()
	fake, _ := structpb.NewStruct(map[string]any{"reference": "FAKE-0001"})
	for _, req := range []*yesguardv1.CompleteRequest{{DecisionId: id, Failed: true}, {DecisionId: id, Result: fake}} {
		if _, err := client.Complete(p2, req); status.Code(err) != codes.PermissionDenied {
			t.Errorf("pipe2's Complete (failed=%v) of pipe1's ALLOW: %v, want PermissionDenied", req.GetFailed(), err)
		}
	}
	if got := labelled(t, reg, "yesguard_guard_completions_total", "result", "refused"); got != 2 {
		t.Errorf("completions_total{result=refused} = %v, want 2", got)
	}
	args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-17"})
	again, err := client.Check(p1, &yesguardv1.CheckRequest{CallId: "own-1", Tool: "submit_appeal", Args: args, WaitMs: 2000})
	if err != nil || again.GetOutcome() != yesguardv1.Outcome_OUTCOME_DUPLICATE || !again.GetOriginalRunning() {
		t.Fatalf("pipe1's Check again: %v, %v; want DUPLICATE of the still running ALLOW", again, err)
	}
	if _, err := client.Complete(p1, &yesguardv1.CompleteRequest{DecisionId: id, Failed: true}); err != nil {
		t.Errorf("pipe1's own Complete: %v", err)
	}

	// The approval authorises the Complete of its own decision, whoever
	// presents it (issue 12: the system of record reports with it).
	resp, err = askYes(t, pub, client, p1, "own-2")
	if err != nil || resp.GetApproval() == "" {
		t.Fatalf("pipe1's Check on own-2: %v, %v; want an ALLOW with its approval", resp, err)
	}
	if _, err := client.Complete(p2, &yesguardv1.CompleteRequest{Approval: resp.GetApproval(), Result: fake}); err != nil {
		t.Errorf("pipe2's Complete with the ALLOW's approval: %v, want it taken", err)
	}
}

// TestTokensBoundToTheirCalls (red team F7): a token bound to call-id
// prefixes (calls: in the token file) is PermissionDenied, counted, on any
// other call: Check (which would quote the call's latest turns), Redeem,
// Complete with the approval, ListDecisions. And the Check answer's
// evidence is redacted by the same rules as the records, so a pipeline
// reads no more of its own call than an auditor does.
func TestTokensBoundToTheirCalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	toks := map[string]string{"a": auth.NewToken(), "b": auth.NewToken(), "audit-b": auth.NewToken()}
	file := "tokens:\n" +
		auth.TokenEntry("a", toks["a"], []auth.Role{auth.RolePipeline}) + "    calls: [\"tenant-a-\"]\n" +
		auth.TokenEntry("b", toks["b"], []auth.Role{auth.RolePipeline}) + "    calls: [\"tenant-b-\", \"tb-\"]\n" +
		auth.TokenEntry("audit-b", toks["audit-b"], []auth.Role{auth.RoleAuditor}) + "    calls: [\"tenant-b-\"]\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, reg, _ := startConfigured(t, func(c *Config) { c.GRPCTokens = path; c.RedactDigits = 4 })
	client := yesguardv1.NewGuardClient(plainClient(t, srv.GRPCAddr()))
	pub, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := bearer(ctx, toks["a"]), bearer(ctx, toks["b"])

	const call = "tenant-a-1"
	for i, ev := range []transcript.Event{
		{CallID: call, Seq: 1, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Can you confirm your card number for the payment?"},
		{CallID: call, Seq: 2, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Sure, it is 4242 4242 4242 4242, and my PIN is 1234."},
	} {
		if err := probe.Publish(pub, DefaultSubjectPrefix, ev); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	probeReq := &yesguardv1.CheckRequest{CallId: call, Tool: "any_tool", IncludeEvidence: true, WaitMs: 2000}
	if resp, err := client.Check(b, probeReq); status.Code(err) != codes.PermissionDenied {
		t.Errorf("tenant b's Check on tenant a's call: %v, %v; want PermissionDenied", resp, err)
	}
	own, err := client.Check(a, probeReq)
	if err != nil {
		t.Fatalf("tenant a's Check on its call: %v", err)
	}
	if text := own.String(); strings.Contains(text, "4242") || strings.Contains(text, "1234") {
		t.Errorf("the Check answer quotes the caller's digits unredacted: %s", text)
	}
	if !strings.Contains(own.GetEvidence().String(), "####") {
		t.Errorf("the Check answer's evidence shows no masked digits: %v", own.GetEvidence())
	}

	resp, err := askYes(t, pub, client, a, "tenant-a-2")
	if err != nil || resp.GetApproval() == "" {
		t.Fatalf("tenant a's ALLOW: %v, %v", resp, err)
	}
	args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-17"})
	if _, err := client.Redeem(b, &yesguardv1.RedeemRequest{Approval: resp.GetApproval(), Args: args}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("tenant b's Redeem of tenant a's approval: %v, want PermissionDenied", err)
	}
	if _, err := client.Complete(b, &yesguardv1.CompleteRequest{Approval: resp.GetApproval(), Failed: true}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("tenant b's Complete with tenant a's approval: %v, want PermissionDenied", err)
	}
	if _, err := client.ListDecisions(bearer(ctx, toks["audit-b"]), &yesguardv1.ListDecisionsRequest{CallId: call}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("tenant b's auditor reading tenant a's call: %v, want PermissionDenied", err)
	}
	if got := labelled(t, reg, "yesguard_guard_check_errors_total", "code", "PermissionDenied"); got != 4 {
		t.Errorf("check_errors_total{code=PermissionDenied} = %v, want 4", got)
	}
	if r, err := client.Redeem(a, &yesguardv1.RedeemRequest{Approval: resp.GetApproval(), Args: args}); err != nil || r.GetReason() != yesguardv1.Reason_REASON_REDEEMED {
		t.Errorf("tenant a's own Redeem: %v, %v", r, err)
	}
}

// TestPagesRefuseForeignHostsWithoutTokens (red team F11): the loopback
// default's pages answer only loopback Host names, so a web page that
// rebinds its own name to 127.0.0.1 cannot read the calls; a refusal is
// 421 and counted. /metrics and /healthz are not pages and stay as they
// are; with tokens the pages are behind the auditor token instead.
func TestPagesRefuseForeignHostsWithoutTokens(t *testing.T) {
	srv, reg, _ := startConfigured(t, nil)
	_, port, _ := net.SplitHostPort(srv.HTTPAddr())
	for host, want := range map[string]int{
		"attacker.example:" + port: http.StatusMisdirectedRequest,
		"attacker.example":         http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io:" + port: http.StatusMisdirectedRequest,
		"127.0.0.1:" + port:        http.StatusOK,
		"localhost:" + port:        http.StatusOK,
		"[::1]:" + port:            http.StatusOK,
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+srv.HTTPAddr()+"/calls", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/calls with Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	if got := counterSum(t, reg, "yesguard_http_pages_host_refused_total"); got != 3 {
		t.Errorf("pages_host_refused_total = %v, want 3", got)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+srv.HTTPAddr()+"/healthz", nil)
	req.Host = "yesguard:9090"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz by another name: %v, %v; want 200", resp, err)
	} else {
		_ = resp.Body.Close()
	}
}

// TestMutualTLSWarnsThePagesAreNotCovered (red team F6): with
// --grpc-client-ca and the pages on, the guard says at start-up that the
// pages take the auditor token without a client certificate.
func TestMutualTLSWarnsThePagesAreNotCovered(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "guard")
	cert, key := ca.issue(t, dir, "server", 2, true)
	path := filepath.Join(dir, "tokens.yaml")
	writeTokens(t, path, map[string][]auth.Role{"audit": {auth.RoleAuditor}})
	core, logs := observer.New(zap.WarnLevel)
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DecisionLog: filepath.Join(dir, "d.log"), DataDir: t.TempDir(),
		GRPCTokens: path, GRPCTLSCert: cert, GRPCTLSKey: key, GRPCClientCA: ca.file}
	srv, err := New(cfg, WithRegistry(prometheus.NewRegistry()), WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	if n := logs.FilterMessageSnippet("--grpc-client-ca covers gRPC only").Len(); n != 1 {
		t.Errorf("%d warnings that mutual TLS does not cover the pages, want 1: %v", n, logs.All())
	}
}

// TestDigitRedactionThroughTheServer (red team F3, F4): with
// --redact-digits 4, digit strings as speech-to-text writes them ("4, 2,
// 4, 2", " - ", en dash, two spaces, '_') and the digits of argument and
// result strings are masked in what an auditor reads back.
func TestDigitRedactionThroughTheServer(t *testing.T) {
	srv, _, logPath := startConfigured(t, func(c *Config) { c.RedactDigits = 4 })
	client := yesguardv1.NewGuardClient(plainClient(t, srv.GRPCAddr()))
	pub, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const call = "digits-1"
	for i, ev := range []transcript.Event{
		{CallID: call, Seq: 1, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Shall I submit your appeal A-17 now?"},
		{CallID: call, Seq: 2, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true,
			Text: "Yes. a:4, 2, 4, 2, 4, 2, 4, 2 b:42 - 42 - 42 - 42 c:424–242–424 d:42  42  42  42 e:42_42_42_42"},
	} {
		if err := probe.Publish(pub, DefaultSubjectPrefix, ev); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-17", "note": "4111 1111 1111 1111"})
	resp, err := client.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: "submit_appeal", Args: args, WaitMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW {
		result, _ := structpb.NewStruct(map[string]any{"receipt": "card 6011 1111 1111 1117 charged"})
		if _, err := client.Complete(ctx, &yesguardv1.CompleteRequest{DecisionId: resp.GetDecisionId(), Result: result}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := client.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: call, IncludeTranscript: true})
	if err != nil || len(list.GetDecisions()) == 0 {
		t.Fatalf("ListDecisions: %v, %v", list, err)
	}
	read := list.String()
	for _, leak := range []string{"4, 2, 4, 2", "42 - 42", "424–242", "42  42", "42_42", "4111", "6011"} {
		if strings.Contains(read, leak) {
			t.Errorf("%q survives redaction in ListDecisions: %s", leak, read)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), resp.GetDecisionId()) {
			for _, leak := range []string{"4, 2, 4, 2", "4111", "42_42"} {
				if strings.Contains(string(b), leak) {
					t.Errorf("%q survives redaction in the decision log", leak)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the decision never reached the log")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
