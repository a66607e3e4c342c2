package service

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/metrics"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memSink keeps every decision written.
type memSink struct {
	mu sync.Mutex
	ds []*yesguardv1.Decision
}

func (s *memSink) Write(d *yesguardv1.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, d)
}

func (s *memSink) all() []*yesguardv1.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*yesguardv1.Decision(nil), s.ds...)
}

// harness is a service over a real engine, transcript store, memory book
// and memory decision store; events go to the store directly (the NATS
// path is tested in server/).
type harness struct {
	t     testing.TB
	svc   *Service
	store *transcript.Store
	book  *dedupe.Memory
	sink  *memSink
	reg   *prometheus.Registry
	seq   uint64
}

// newHarness builds the harness; each of with edits the service's config
// before it is built.
func newHarness(t testing.TB, with ...func(*Config)) *harness {
	t.Helper()
	pol, err := guard.LoadPolicy("../guard/testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := &harness{t: t, store: transcript.NewStore(transcript.Limits{}, nil), sink: &memSink{}, reg: reg}
	book := dedupe.NewMemory(nil)
	eng, err := guard.New(guard.Config{Policy: pol, Locales: locs, Store: h.store, Book: book, DuplicateWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h.book = book
	cfg := Config{Engine: eng, Book: book, Store: decisions.NewMemory(decisions.MemoryLimits{}), Sink: h.sink, Registerer: reg, Replica: "r1"}
	for _, w := range with {
		w(&cfg)
	}
	h.svc = New(cfg)
	return h
}

func (h *harness) say(call string, sp transcript.Speaker, text string) {
	h.t.Helper()
	h.seq++
	ev := transcript.Event{CallID: call, Seq: h.seq, Speaker: sp, Type: transcript.TypeTranscript, Text: text, Final: true}
	if ok, why := h.store.Apply(ev, time.Now()); !ok {
		h.t.Fatalf("event dropped: %s", why)
	}
}

func (h *harness) check(call, tool string, args map[string]any, full bool) *yesguardv1.CheckResponse {
	h.t.Helper()
	resp, err := h.checkErr(call, tool, args, full)
	if err != nil {
		h.t.Fatalf("Check(%s, %s): %v", call, tool, err)
	}
	return resp
}

func (h *harness) checkErr(call, tool string, args map[string]any, full bool) (*yesguardv1.CheckResponse, error) {
	st, err := structpb.NewStruct(args)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.svc.Check(pipelineCtx(h.t), &yesguardv1.CheckRequest{CallId: call, Tool: tool, Args: st, IncludeEvidence: full})
}

func TestMalformedCheck(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		call, tool, field string
	}{
		{"", "submit_appeal", "call_id"},
		{"a.b", "submit_appeal", "call_id"},
		{"c", "", "tool"},
		{"c", "bad tool!", "tool"},
		{strings.Repeat("x", 200), "submit_appeal", "call_id"},
	} {
		_, err := h.checkErr(tc.call, tc.tool, nil, false)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Check(%q, %q) = %v, want InvalidArgument naming %s", tc.call, tc.tool, err, tc.field)
		}
	}
	big := map[string]any{"blob": strings.Repeat("x", approval.MaxArgsBytes)}
	if _, err := h.checkErr("c", "submit_appeal", big, false); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "args") {
		t.Errorf("oversized args = %v, want InvalidArgument naming args", err)
	}
	for _, w := range []int64{-1, 60_001} {
		_, err := h.svc.Check(pipelineCtx(t), &yesguardv1.CheckRequest{CallId: "c", Tool: "submit_appeal", WaitMs: w})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "wait_ms") {
			t.Errorf("wait_ms %d = %v, want InvalidArgument naming wait_ms", w, err)
		}
	}
	if n := len(h.sink.all()); n != 0 {
		t.Errorf("malformed checks wrote %d decisions", n)
	}
	if got := testutil.ToFloat64(h.svc.m.errors.WithLabelValues("InvalidArgument")); got != 8 {
		t.Errorf("check_errors{InvalidArgument} = %v, want 8", got)
	}
}

func TestEveryCheckWritesOneRecord(t *testing.T) {
	h := newHarness(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	h.say("c", transcript.Caller, "Yes. Wait, no.")
	resp := h.check("c", "submit_appeal", map[string]any{"appeal_id": "A-1"}, false)
	ds := h.sink.all()
	if len(ds) != 1 {
		t.Fatalf("wrote %d records, want 1", len(ds))
	}
	d := ds[0]
	if d.GetDecisionId() != resp.GetDecisionId() || d.GetReason() != yesguardv1.Reason_REASON_NEGATED ||
		d.GetCallId() != "c" || d.GetTool() != "submit_appeal" || len(d.GetArgsHash()) != 64 ||
		d.GetPolicyVersion() == "" || d.GetEvidence().GetAnswer().GetText() != "Yes. Wait, no." ||
		d.GetEvidence().GetQuestion().GetText() != "Shall I submit the appeal?" || d.GetTime() == nil ||
		d.GetKind() != yesguardv1.DecisionKind_DECISION_KIND_CHECK || d.GetReplica() != "r1" || d.GetArgs() != `{"appeal_id":"A-1"}` {
		t.Fatalf("record lacks fields: %v", d)
	}
	list, err := h.svc.ListDecisions(pipelineCtx(t), &yesguardv1.ListDecisionsRequest{CallId: "c"})
	if err != nil || len(list.GetDecisions()) != 1 || list.GetDecisions()[0].GetDecisionId() != d.GetDecisionId() {
		t.Fatalf("ListDecisions = %v, %v", list, err)
	}
}

// TestShortAndFullEvidence: the answer carries the short evidence always
// and the full evidence only with include_evidence; the record holds it
// all either way.
func TestShortAndFullEvidence(t *testing.T) {
	h := newHarness(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	h.say("c", transcript.Caller, "Yes. Wait, no.")
	short := h.check("c", "submit_appeal", nil, false)
	full := h.check("c", "submit_appeal", nil, true)
	for _, r := range []*yesguardv1.CheckResponse{short, full} {
		if r.GetQuestionSentence() == "" || r.GetAnswerText() != "Yes. Wait, no." || r.GetDetail() == "" {
			t.Errorf("short evidence missing: %v", r)
		}
	}
	if short.GetEvidence() != nil {
		t.Errorf("evidence without include_evidence: %v", short.GetEvidence())
	}
	if len(full.GetEvidence().GetMatches()) == 0 || len(full.GetEvidence().GetRecentTurns()) == 0 {
		t.Errorf("include_evidence gave %v", full.GetEvidence())
	}
	for _, d := range h.sink.all() {
		if len(d.GetEvidence().GetMatches()) == 0 || d.GetEvidence().GetAnswer() == nil {
			t.Errorf("record %s lacks the full evidence", d.GetDecisionId())
		}
	}
}

// TestCompleteAndRepeats: Complete's result reaches a duplicate, writes a
// record of its own, and each repeat is counted by kind.
func TestCompleteAndRepeats(t *testing.T) {
	h := newHarness(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal A-17?")
	h.say("c", transcript.Caller, "Yes.")
	args := map[string]any{"appeal_id": "A-17"}
	first := h.check("c", "submit_appeal", args, false)
	if first.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("first = %v", first)
	}
	running := h.check("c", "submit_appeal", args, false)
	if running.GetOutcome() != yesguardv1.Outcome_OUTCOME_DUPLICATE || !running.GetOriginalRunning() {
		t.Fatalf("duplicate of a running original = %v", running)
	}
	result, _ := structpb.NewStruct(map[string]any{"ticket": "T-9"})
	done, err := h.svc.Complete(pipelineCtx(t), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId(), Result: result})
	if err != nil || done.GetDecisionId() == "" {
		t.Fatalf("Complete = %v, %v", done, err)
	}
	dup := h.check("c", "submit_appeal", args, false)
	if dup.GetOriginalRunning() || dup.GetOriginalResult().GetFields()["ticket"].GetStringValue() != "T-9" {
		t.Fatalf("duplicate after Complete = %v", dup)
	}
	if _, err := h.svc.Complete(pipelineCtx(t), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId()}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second Complete = %v, want FailedPrecondition", err)
	}
	if _, err := h.svc.Complete(pipelineCtx(t), &yesguardv1.CompleteRequest{DecisionId: "01NOTADECISION"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Complete of an unknown decision = %v, want NotFound", err)
	}
	if _, err := h.svc.Complete(pipelineCtx(t), &yesguardv1.CompleteRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Complete without decision_id = %v, want InvalidArgument", err)
	}
	// Other arguments the question still states: the judge passes them, and
	// the turn's yes, already used, does not allow them.
	evidence := h.check("c", "submit_appeal", map[string]any{"appeal_id": "A-17", "priority": "high"}, false)
	if evidence.GetReason() != yesguardv1.Reason_REASON_EVIDENCE_USED {
		t.Fatalf("other arguments on the same yes = %v", evidence)
	}

	list, err := h.svc.ListDecisions(pipelineCtx(t), &yesguardv1.ListDecisionsRequest{CallId: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range list.GetDecisions() {
		kinds = append(kinds, strings.TrimPrefix(d.GetKind().String(), "DECISION_KIND_"))
	}
	if got := strings.Join(kinds, " "); got != "CHECK CHECK COMPLETE CHECK CHECK" {
		t.Fatalf("record kinds = %s", got)
	}
	c := list.GetDecisions()[2]
	if c.GetOriginalDecisionId() != first.GetDecisionId() || c.GetResult() != `{"ticket":"T-9"}` || c.GetCallId() != "c" ||
		c.GetTool() != "submit_appeal" || c.GetReason() != yesguardv1.Reason_REASON_COMPLETED || c.GetDecisionId() != done.GetDecisionId() {
		t.Fatalf("complete record = %v", c)
	}
	for kind, want := range map[string]float64{metrics.HitDuplicate: 2, metrics.HitEvidence: 1, metrics.HitQuantity: 0} {
		if got := testutil.ToFloat64(h.svc.m.hits.WithLabelValues(kind)); got != want {
			t.Errorf("hits{%s} = %v, want %v", kind, got, want)
		}
	}
	if got := testutil.ToFloat64(h.svc.m.completions.WithLabelValues("ok")); got != 1 {
		t.Errorf("completions{ok} = %v", got)
	}
}

func TestListDecisionsPages(t *testing.T) {
	h := newHarness(t)
	const n = 7
	for i := range n {
		h.check("p", fmt.Sprintf("tool_%d", i), nil, false)
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		resp, err := h.svc.ListDecisions(pipelineCtx(t), &yesguardv1.ListDecisionsRequest{CallId: "p", PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetDecisions()) > 3 {
			t.Fatalf("page of %d", len(resp.GetDecisions()))
		}
		for _, d := range resp.GetDecisions() {
			got = append(got, d.GetTool())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(got) != n || got[0] != "tool_0" || got[n-1] != fmt.Sprintf("tool_%d", n-1) {
		t.Fatalf("pages gave %v", got)
	}
	if _, err := h.svc.ListDecisions(pipelineCtx(t), &yesguardv1.ListDecisionsRequest{CallId: "p", PageSize: -1}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("negative page size = %v", err)
	}
	h.say("p", transcript.Agent, "Hello.")
	resp, err := h.svc.ListDecisions(pipelineCtx(t), &yesguardv1.ListDecisionsRequest{CallId: "p", IncludeTranscript: true})
	if err != nil || len(resp.GetTranscript()) != 1 || resp.GetTranscript()[0].GetText() != "Hello." {
		t.Fatalf("transcript = %v, %v", resp.GetTranscript(), err)
	}
}

// pipelineCtx is a context whose caller the interceptors found to hold
// the pipeline role, as they do for Complete.
func pipelineCtx(t testing.TB) context.Context {
	return auth.NewContext(t.Context(), auth.Identity{TokenName: "pipe", Roles: []auth.Role{auth.RolePipeline}})
}

// Complete belongs to the pipeline: without an Identity (no interceptor)
// or with the auditor's, it is refused before it touches the book.
func TestCompleteNeedsThePipelineRole(t *testing.T) {
	h := newHarness(t)
	for name, ctx := range map[string]context.Context{
		"no identity": t.Context(),
		"auditor":     auth.NewContext(t.Context(), auth.Identity{TokenName: "audit", Roles: []auth.Role{auth.RoleAuditor}}),
	} {
		if _, err := h.svc.Complete(ctx, &yesguardv1.CompleteRequest{DecisionId: "01ANY"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: Complete = %v, want PermissionDenied", name, err)
		}
	}
}

// The service's counters: their known label sets are exported at zero
// from the start (a dashboard's query of errors or redeems matches before
// the first), and a tool the policy does not list is labelled by its name,
// for the first maxUnlistedToolLabels of them, then "other".
func TestMetricLabels(t *testing.T) {
	h := newHarness(t)
	for name, want := range map[string]int{
		"yesguard_guard_check_errors_total": len(errorCodes),
		"yesguard_guard_redeems_total":      len(redeemReasons),
		"yesguard_guard_completions_total":  len(completionResults),
		"yesguard_dedupe_hits_total":        3,
	} {
		if n, err := testutil.GatherAndCount(h.reg, name); err != nil || n != want {
			t.Errorf("%s: %d series at start (%v), want %d at zero", name, n, err, want)
		}
	}
	if got := testutil.ToFloat64(h.svc.m.errors.WithLabelValues(codes.InvalidArgument.String())); got != 0 {
		t.Errorf("check_errors_total{code=InvalidArgument} = %v at start, want 0", got)
	}

	// A caller turn is in, so no Check waits.
	h.say("m1", transcript.Agent, "Shall I submit your appeal now?")
	h.say("m1", transcript.Caller, "Yes.")
	h.check("m1", "submit_appeal", nil, false)
	for i := range maxUnlistedToolLabels + 1 {
		h.check("m1", fmt.Sprintf("refund_order_%d", i), nil, false)
	}
	byTool := map[string]float64{}
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "yesguard_guard_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "tool" {
					byTool[lp.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	for tool, want := range map[string]float64{
		"submit_appeal": 1, "refund_order_0": 1, fmt.Sprintf("refund_order_%d", maxUnlistedToolLabels-1): 1,
		fmt.Sprintf("refund_order_%d", maxUnlistedToolLabels): 0, metrics.OtherTool: 1,
	} {
		if byTool[tool] != want {
			t.Errorf("decisions_total{tool=%q} = %v, want %v (all: %v)", tool, byTool[tool], want, byTool)
		}
	}
}
