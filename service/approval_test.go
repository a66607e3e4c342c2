package service

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/internal/natstest"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// clock is the approvals' clock, moved by hand; it starts now, so that
// records and turns read sensibly.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// approvalHarness is the service harness with approvals: one key ("k1"),
// the signer and verifier over it, and a ledger, all on one hand-moved
// clock.
type approvalHarness struct {
	*harness
	clock *clock
	keys  *approval.KeySet
	priv  ed25519.PrivateKey
}

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

// newApprovalHarness builds it with keys (k1, signing from the start,
// when none are given) and ledger (a memory one when nil).
func newApprovalHarness(t testing.TB, ledger approval.Redeemer, keys ...approval.Key) *approvalHarness {
	t.Helper()
	a := &approvalHarness{clock: &clock{t: time.Now()}}
	if len(keys) == 0 {
		a.priv = newKey(t)
		keys = []approval.Key{{ID: "k1", Private: a.priv}}
	}
	var err error
	if a.keys, err = approval.NewKeySet(keys, approval.KeySetOptions{Now: a.clock.Now}); err != nil {
		t.Fatal(err)
	}
	if ledger == nil {
		ledger = approval.NewMemoryLedger(approval.LedgerOptions{Now: a.clock.Now})
	}
	a.harness = newHarness(t, func(c *Config) {
		c.Approvals = &Approvals{
			Signer:   approval.NewSigner(a.keys, approval.SignerOptions{}),
			Verifier: approval.NewVerifier(a.keys, approval.VerifierOptions{Now: a.clock.Now}),
			Ledger:   ledger,
		}
	})
	return a
}

// pipeline is a context carrying the identity the interceptors give a
// guard without tokens.
func pipeline(t testing.TB) context.Context { return pipelineCtx(t) }

// allow has the caller confirm an appeal on call and returns the ALLOW.
func (a *approvalHarness) allow(call string) *yesguardv1.CheckResponse {
	a.t.Helper()
	a.say(call, transcript.Agent, "Shall I submit the appeal A-17?")
	a.say(call, transcript.Caller, "Yes.")
	resp := a.check(call, "submit_appeal", appealArgs, false)
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		a.t.Fatalf("ALLOW wanted: %s/%s %s", resp.GetOutcome(), resp.GetReason(), resp.GetDetail())
	}
	return resp
}

var appealArgs = map[string]any{"appeal_id": "A-17"}

func (a *approvalHarness) redeem(token string, args map[string]any, tool, call string) *yesguardv1.RedeemResponse {
	a.t.Helper()
	st, err := structpb.NewStruct(args)
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := a.svc.Redeem(pipeline(a.t), &yesguardv1.RedeemRequest{Approval: token, Args: st, Tool: tool, CallId: call})
	if err != nil {
		a.t.Fatalf("Redeem: %v", err)
	}
	return resp
}

func wantRedeem(t *testing.T, what string, resp *yesguardv1.RedeemResponse, reason yesguardv1.Reason) {
	t.Helper()
	outcome := yesguardv1.Outcome_OUTCOME_REFUSE
	if reason == yesguardv1.Reason_REASON_REDEEMED {
		outcome = yesguardv1.Outcome_OUTCOME_ALLOW
	}
	if resp.GetOutcome() != outcome || resp.GetReason() != reason || resp.GetMessage() == "" || resp.GetDecisionId() == "" {
		t.Fatalf("%s: %s/%s %q, want %s/%s with a message", what, resp.GetOutcome(), resp.GetReason(), resp.GetMessage(), outcome, reason)
	}
}

// record is the record of decision id the sink got.
func (a *approvalHarness) record(id string) *yesguardv1.Decision {
	a.t.Helper()
	for _, d := range a.sink.all() {
		if d.GetDecisionId() == id {
			return d
		}
	}
	a.t.Fatalf("no record %s", id)
	return nil
}

func TestAllowCarriesItsApproval(t *testing.T) {
	a := newApprovalHarness(t, nil)
	resp := a.allow("c")
	if resp.GetApproval() == "" || resp.GetApprovalExpiresAt() == nil {
		t.Fatalf("ALLOW without its approval: %v", resp)
	}
	// A backend with the JWKS checks it for itself, offline.
	v, err := approval.NewJWKSVerifier(a.keys.JWKS(), approval.VerifierOptions{Now: a.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.VerifyFor(resp.GetApproval(), "submit_appeal", appealArgs)
	if err != nil {
		t.Fatalf("the ALLOW's approval does not verify with the JWKS: %v", err)
	}
	if c.DecisionID != resp.GetDecisionId() || c.CallID != "c" || c.KeyID != "k1" || c.ExpiresAt.Sub(c.IssuedAt) != approval.DefaultTTL ||
		c.Turn == nil || c.Turn.TextHash != approval.TextHash("Yes.") || c.Turn.ReceivedAt.IsZero() {
		t.Fatalf("claims = %+v", c)
	}
	if !resp.GetApprovalExpiresAt().AsTime().Equal(c.ExpiresAt) {
		t.Errorf("approval_expires_at %v, token's exp %v", resp.GetApprovalExpiresAt().AsTime(), c.ExpiresAt)
	}
	d := a.record(resp.GetDecisionId())
	if d.GetApprovalKeyId() != "k1" || !d.GetApprovalExpiresAt().AsTime().Equal(c.ExpiresAt) {
		t.Errorf("the ALLOW's record names key %q, expiry %v", d.GetApprovalKeyId(), d.GetApprovalExpiresAt())
	}

	// The policy's per-tool TTL (pay_bill: 20s in the test policy).
	a.say("p", transcript.Agent, "Shall I pay the $20 bill now?")
	a.say("p", transcript.Caller, "Yes.")
	pay := a.check("p", "pay_bill", map[string]any{"amount": 20}, false)
	if c, err := v.VerifyFor(pay.GetApproval(), "pay_bill", map[string]any{"amount": 20}); err != nil || c.ExpiresAt.Sub(c.IssuedAt) != 20*time.Second {
		t.Errorf("pay_bill's approval: %+v, %v; want a 20s life", c, err)
	}

	// Nothing but an ALLOW carries one.
	dup := a.check("c", "submit_appeal", appealArgs, false)
	if dup.GetOutcome() != yesguardv1.Outcome_OUTCOME_DUPLICATE || dup.GetApproval() != "" || dup.GetApprovalExpiresAt() != nil {
		t.Errorf("a duplicate carries an approval: %v", dup)
	}
	if d := a.record(dup.GetDecisionId()); d.GetApprovalKeyId() != "" || d.GetApprovalExpiresAt() != nil {
		t.Errorf("a duplicate's record names an approval: %v", d)
	}
}

// When no key signs, the ALLOW is refused as INTERNAL and its reservation
// released: no action runs without its approval.
func TestUnsignedAllowIsRefusedAndReleased(t *testing.T) {
	future := approval.Key{ID: "later", Private: newKey(t), SignsFrom: time.Now().Add(time.Hour)}
	a := newApprovalHarness(t, nil, future)
	a.say("c", transcript.Agent, "Shall I submit the appeal A-17?")
	a.say("c", transcript.Caller, "Yes.")
	resp := a.check("c", "submit_appeal", appealArgs, false)
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || resp.GetReason() != yesguardv1.Reason_REASON_INTERNAL ||
		resp.GetApproval() != "" || !strings.Contains(resp.GetMessage(), "Do not run submit_appeal") || !strings.Contains(resp.GetDetail(), "could not be signed") {
		t.Fatalf("an ALLOW that cannot be signed = %v", resp)
	}
	if d := a.record(resp.GetDecisionId()); d.GetReason() != yesguardv1.Reason_REASON_INTERNAL || d.GetApprovalKeyId() != "" {
		t.Errorf("its record: %v", d)
	}
	canon, _ := approval.CanonicalMap(appealArgs)
	v, _, err := a.book.Lookup(t.Context(), dedupe.Request{Key: dedupe.Key{CallID: "c", Tool: "submit_appeal", ArgsHash: approval.ArgsHash(canon)}, Now: time.Now()})
	if err != nil || v != dedupe.OK {
		t.Errorf("the unsigned ALLOW's reservation is still held: %v, %v", v, err)
	}
	if got := testutil.ToFloat64(a.svc.m.decisions.WithLabelValues("submit_appeal", "refuse", "internal")); got != 1 {
		t.Errorf("decisions{refuse,internal} = %v", got)
	}
}

func TestRedeemReasons(t *testing.T) {
	a := newApprovalHarness(t, nil)
	first := a.allow("c1")
	token := first.GetApproval()

	wantRedeem(t, "other arguments", a.redeem(token, map[string]any{"appeal_id": "A-18"}, "submit_appeal", ""), yesguardv1.Reason_REASON_APPROVAL_MISMATCH)
	wantRedeem(t, "another tool", a.redeem(token, appealArgs, "pay_bill", ""), yesguardv1.Reason_REASON_APPROVAL_MISMATCH)
	wantRedeem(t, "another call", a.redeem(token, appealArgs, "submit_appeal", "c2"), yesguardv1.Reason_REASON_APPROVAL_MISMATCH)

	parts := strings.Split(token, ".")
	head, payload, sig := parts[0], parts[1], parts[2]
	wantRedeem(t, "a tampered signature", a.redeem(head+"."+payload+"."+flipFirst(sig), appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_APPROVAL_INVALID)
	wantRedeem(t, "a tampered payload", a.redeem(head+"."+flipFirst(payload)+"."+sig, appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_APPROVAL_INVALID)
	// A forged token: the same claims and key id, another key.
	forger, err := approval.NewKeySet([]approval.Key{{ID: "k1", Private: newKey(t)}}, approval.KeySetOptions{Now: a.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := approval.NewSigner(forger, approval.SignerOptions{}).Sign(approval.Approval{
		DecisionID: first.GetDecisionId(), CallID: "c1", Tool: "submit_appeal", ArgsHash: argsHash(t, appealArgs),
	})
	if err != nil {
		t.Fatal(err)
	}
	forgedResp := a.redeem(forged, appealArgs, "submit_appeal", "c1")
	wantRedeem(t, "a forged token", forgedResp, yesguardv1.Reason_REASON_APPROVAL_INVALID)
	if forgedResp.GetAllowedDecisionId() != "" {
		t.Errorf("a forged token's claims were taken: %v", forgedResp)
	}
	wantRedeem(t, "not a token", a.redeem("not.a.token", appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_APPROVAL_INVALID)

	// None of those spent it: the right action redeems, once.
	ok := a.redeem(token, appealArgs, "submit_appeal", "c1")
	wantRedeem(t, "the first redeem", ok, yesguardv1.Reason_REASON_REDEEMED)
	if ok.GetAllowedDecisionId() != first.GetDecisionId() || ok.GetCallId() != "c1" || ok.GetTool() != "submit_appeal" ||
		ok.GetArgsHash() != argsHash(t, appealArgs) || !ok.GetExpiresAt().AsTime().Equal(first.GetApprovalExpiresAt().AsTime()) {
		t.Errorf("the redeem's claims: %v", ok)
	}
	wantRedeem(t, "a second redeem", a.redeem(token, appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)

	// Expired: past exp and the skew.
	late := a.allow("c3")
	a.clock.Advance(approval.DefaultTTL + approval.DefaultSkew)
	expired := a.redeem(late.GetApproval(), appealArgs, "submit_appeal", "")
	wantRedeem(t, "expired", expired, yesguardv1.Reason_REASON_APPROVAL_EXPIRED)
	if !strings.Contains(expired.GetMessage(), "expired at") {
		t.Errorf("the expired message does not say when: %q", expired.GetMessage())
	}

	// Every Redeem wrote a record: kind REDEEM, the ALLOW as original
	// where the signature verified, the verdict's detail.
	var redeems []*yesguardv1.Decision
	for _, d := range a.sink.all() {
		if d.GetKind() == yesguardv1.DecisionKind_DECISION_KIND_REDEEM {
			redeems = append(redeems, d)
		}
	}
	if len(redeems) != 10 {
		t.Fatalf("%d Redeem records, want 10", len(redeems))
	}
	for _, d := range redeems {
		verified := d.GetReason() != yesguardv1.Reason_REASON_APPROVAL_INVALID
		if verified && (d.GetOriginalDecisionId() == "" || d.GetCallId() == "" || d.GetApprovalKeyId() != "k1") {
			t.Errorf("a verified Redeem's record lacks the ALLOW: %v", d)
		}
		if !verified && d.GetOriginalDecisionId() != "" {
			t.Errorf("an invalid token's claims in the record: %v", d)
		}
		if d.GetMessage() == "" || d.GetEvidence().GetDetail() == "" || len(d.GetArgsHash()) != 64 {
			t.Errorf("Redeem record lacks fields: %v", d)
		}
	}
	// ListDecisions shows the life of the action: allowed, then redeemed.
	list, err := a.svc.ListDecisions(pipelineCtx(t), &yesguardv1.ListDecisionsRequest{CallId: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	var life []string
	for _, d := range list.GetDecisions() {
		if d.GetDecisionId() == first.GetDecisionId() || d.GetOriginalDecisionId() == first.GetDecisionId() {
			life = append(life, reasonLabel(d.GetReason()))
		}
	}
	if got := strings.Join(life, " "); !strings.HasPrefix(got, "confirmed ") || !strings.Contains(got, "redeemed already_redeemed") {
		t.Errorf("the action's records on c1: %s", got)
	}
	for reason, want := range map[string]float64{"redeemed": 1, "already_redeemed": 1, "approval_mismatch": 3, "approval_invalid": 4, "approval_expired": 1} {
		if got := testutil.ToFloat64(a.svc.m.redeems.WithLabelValues(reason)); got != want {
			t.Errorf("redeems{%s} = %v, want %v", reason, got, want)
		}
	}
}

// flipFirst changes the first character of a base64url part, and so the
// bytes it encodes.
func flipFirst(part string) string {
	if part[0] == 'A' {
		return "B" + part[1:]
	}
	return "A" + part[1:]
}

func argsHash(t *testing.T, args map[string]any) string {
	t.Helper()
	canon, err := approval.CanonicalMap(args)
	if err != nil {
		t.Fatal(err)
	}
	return approval.ArgsHash(canon)
}

// A key retired by a rotation verifies its tokens until they have
// expired, then is dropped and its tokens refused.
func TestRedeemAcrossARotation(t *testing.T) {
	old := approval.Key{ID: "old", Private: newKey(t)}
	a := newApprovalHarness(t, nil, old)
	before := a.allow("r1")
	// The new key starts signing now; the old one is retired.
	next := approval.Key{ID: "new", Private: newKey(t), SignsFrom: a.clock.Now()}
	if err := a.keys.SetKeys([]approval.Key{old, next}); err != nil {
		t.Fatal(err)
	}
	after := a.allow("r2")
	c, err := approval.NewVerifier(a.keys, approval.VerifierOptions{Now: a.clock.Now}).Verify(after.GetApproval())
	if err != nil || c.KeyID != "new" {
		t.Fatalf("after the rotation the token is signed by %+v, %v; want the new key", c, err)
	}
	wantRedeem(t, "a token of the retired key, within its life", a.redeem(before.GetApproval(), appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_REDEEMED)

	// Past the retired key's grace (max TTL and skew after the rotation),
	// with a token it signed (the key set still holds it: its file was not
	// deleted).
	late := approval.NewSigner(mustKeySet(t, a.clock, old), approval.SignerOptions{})
	a.clock.Advance(approval.DefaultMaxTTL + approval.DefaultSkew + time.Second)
	stale, _, err := late.Sign(approval.Approval{DecisionID: "01KB4Z3Q8K0V6YH1ZB2R9M7T4E", CallID: "r1", Tool: "submit_appeal", ArgsHash: argsHash(t, appealArgs)})
	if err != nil {
		t.Fatal(err)
	}
	resp := a.redeem(stale, appealArgs, "submit_appeal", "")
	wantRedeem(t, "a token of a key past its grace", resp, yesguardv1.Reason_REASON_APPROVAL_INVALID)
	if !strings.Contains(a.record(resp.GetDecisionId()).GetEvidence().GetDetail(), "dropped") {
		t.Errorf("the detail does not say the key was dropped: %q", a.record(resp.GetDecisionId()).GetEvidence().GetDetail())
	}
}

func mustKeySet(t *testing.T, c *clock, keys ...approval.Key) *approval.KeySet {
	t.Helper()
	ks, err := approval.NewKeySet(keys, approval.KeySetOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestRedeemNeedsThePipelineRole(t *testing.T) {
	a := newApprovalHarness(t, nil)
	token := a.allow("c").GetApproval()
	req := &yesguardv1.RedeemRequest{Approval: token, Tool: "submit_appeal"}
	for name, ctx := range map[string]context.Context{
		"no identity (no interceptor)": t.Context(),
		"the auditor role":             auth.NewContext(t.Context(), auth.Identity{TokenName: "audit", Roles: []auth.Role{auth.RoleAuditor}}),
	} {
		if _, err := a.svc.Redeem(ctx, req); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", name, err)
		}
	}
	ctx := auth.NewContext(t.Context(), auth.Identity{TokenName: "appeals", Roles: []auth.Role{auth.RolePipeline}})
	if resp, err := a.svc.Redeem(ctx, &yesguardv1.RedeemRequest{Approval: token, Tool: "submit_appeal", Args: mustStruct(t, appealArgs)}); err != nil || resp.GetReason() != yesguardv1.Reason_REASON_REDEEMED {
		t.Errorf("the pipeline role: %v, %v", resp, err)
	}
	if n := testutil.ToFloat64(a.svc.m.redeems.WithLabelValues("redeemed")); n != 1 {
		t.Errorf("refused calls were counted as redeems: %v", n)
	}
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMalformedRedeem(t *testing.T) {
	a := newApprovalHarness(t, nil)
	for _, tc := range []struct {
		req   *yesguardv1.RedeemRequest
		field string
	}{
		{&yesguardv1.RedeemRequest{}, "approval"},
		{&yesguardv1.RedeemRequest{Approval: "x", Tool: "bad tool!"}, "tool"},
		{&yesguardv1.RedeemRequest{Approval: "x", CallId: "a.b"}, "call_id"},
		{&yesguardv1.RedeemRequest{Approval: "x", Args: mustStruct(t, map[string]any{"blob": strings.Repeat("x", approval.MaxArgsBytes)})}, "args"},
	} {
		if _, err := a.svc.Redeem(pipeline(t), tc.req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Redeem(%v) = %v, want InvalidArgument naming %s", tc.req, err, tc.field)
		}
	}
	if n := len(a.sink.all()); n != 0 {
		t.Errorf("malformed Redeems wrote %d records", n)
	}
	// A guard without approvals redeems nothing.
	h := newHarness(t)
	if _, err := h.svc.Redeem(pipeline(t), &yesguardv1.RedeemRequest{Approval: "x"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Redeem on a guard without approvals: %v, want FailedPrecondition", err)
	}
}

// Complete(failed) lets a retry redeem again; a success never does; the
// approval authorises the Complete of its own decision only.
func TestCompleteWithTheLedger(t *testing.T) {
	a := newApprovalHarness(t, nil)
	first := a.allow("c")
	token := first.GetApproval()
	r1 := a.redeem(token, appealArgs, "submit_appeal", "")
	wantRedeem(t, "the first redeem", r1, yesguardv1.Reason_REASON_REDEEMED)

	// The action failed: the approval alone, which the pipeline holds
	// too, does not release it; the redeemer's receipt does.
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{Approval: token, Failed: true}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Complete(failed) with the approval alone: %v, want FailedPrecondition", err)
	}
	failed, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{Approval: token, Receipt: r1.GetReceipt(), Failed: true})
	if err != nil {
		t.Fatalf("Complete(failed) with the approval: %v", err)
	}
	if d := a.record(failed.GetDecisionId()); d.GetOriginalDecisionId() != first.GetDecisionId() || d.GetReason() != yesguardv1.Reason_REASON_FAILED ||
		!strings.Contains(d.GetMessage(), "redeemed again") {
		t.Errorf("the failed Complete's record: %v", d)
	}
	r2 := a.redeem(token, appealArgs, "submit_appeal", "")
	wantRedeem(t, "a retry after the failure", r2, yesguardv1.Reason_REASON_REDEEMED)
	wantRedeem(t, "a second redeem of the retry", a.redeem(token, appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)

	// The retry fails too: the book let the action go at the first
	// failure, so the ledger alone records the retries' outcomes. A late
	// copy of the first failure (its receipt is spent) changes nothing.
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{Approval: token, Receipt: r1.GetReceipt(), Failed: true}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a late copy of the first failure: %v, want FailedPrecondition", err)
	}
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{Approval: token, Receipt: r2.GetReceipt(), Failed: true}); err != nil {
		t.Fatalf("the retry's failure: %v", err)
	}
	wantRedeem(t, "a third try", a.redeem(token, appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_REDEEMED)
	done, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{Approval: token, Result: mustStruct(t, map[string]any{"ticket": "T-3"})})
	if err != nil {
		t.Fatalf("the third try's success: %v", err)
	}
	if d := a.record(done.GetDecisionId()); d.GetCallId() != "c" || d.GetTool() != "submit_appeal" || d.GetReason() != yesguardv1.Reason_REASON_COMPLETED ||
		!strings.Contains(d.GetMessage(), "closed for good") || d.GetResult() != `{"ticket":"T-3"}` {
		t.Errorf("its record: %v", d)
	}
	wantRedeem(t, "a redeem after the retry's success", a.redeem(token, appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{Approval: token, Failed: true}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a failure after the retry's success: %v, want FailedPrecondition", err)
	}
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId()}); status.Code(err) != codes.NotFound {
		t.Errorf("a Complete by decision id alone, of a decision the book let go: %v, want NotFound", err)
	}

	// Another ALLOW (the failure released the action and its yes); it
	// succeeds, and the Complete comes after its approval expired.
	second := a.allow("c")
	wantRedeem(t, "the new ALLOW's redeem", a.redeem(second.GetApproval(), appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_REDEEMED)
	other := a.allow("d")
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{DecisionId: second.GetDecisionId(), Approval: other.GetApproval()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Complete with another decision's approval: %v, want PermissionDenied", err)
	}
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{DecisionId: second.GetDecisionId(), Approval: "not.a.token"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Complete with an invalid approval: %v, want PermissionDenied", err)
	}
	a.clock.Advance(approval.DefaultTTL + approval.DefaultSkew)
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{DecisionId: second.GetDecisionId(), Approval: second.GetApproval()}); err != nil {
		t.Fatalf("Complete with its own expired approval: %v", err)
	}
	if st, err := a.svc.cfg.Approvals.Ledger.State(t.Context(), second.GetDecisionId()); err != nil || st != approval.LedgerDone {
		t.Errorf("after a success the ledger says %q, %v; want done", st, err)
	}

	// A success before any redeem closes the approval too.
	third := a.allow("e")
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{DecisionId: third.GetDecisionId()}); err != nil {
		t.Fatal(err)
	}
	wantRedeem(t, "a redeem after the action completed", a.redeem(third.GetApproval(), appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{DecisionId: third.GetDecisionId(), Failed: true}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a failure after a success: %v, want FailedPrecondition", err)
	}
	wantRedeem(t, "a redeem after a refused failure", a.redeem(third.GetApproval(), appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
}

// A failure releases the action, so the guard may allow it again on the
// same yes, with a new approval: of the two approvals of that one yes,
// only one executes.
func TestOneYesTwoApprovals(t *testing.T) {
	a := newApprovalHarness(t, nil)
	first := a.allow("y")
	if _, err := a.svc.Complete(pipeline(t), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId(), Failed: true}); err != nil {
		t.Fatal(err)
	}
	second := a.check("y", "submit_appeal", appealArgs, false)
	if second.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW || second.GetApproval() == "" {
		t.Fatalf("after the failure the same yes: %s/%s, want a new ALLOW", second.GetOutcome(), second.GetReason())
	}
	wantRedeem(t, "the first approval", a.redeem(first.GetApproval(), appealArgs, "submit_appeal", ""), yesguardv1.Reason_REASON_REDEEMED)
	twice := a.redeem(second.GetApproval(), appealArgs, "submit_appeal", "")
	wantRedeem(t, "the second approval of the same yes", twice, yesguardv1.Reason_REASON_ALREADY_REDEEMED)
	if !strings.Contains(twice.GetMessage(), "another approval") {
		t.Errorf("the message does not say another approval had the yes: %q", twice.GetMessage())
	}
}

// A ledger that cannot be reached redeems nothing: the Redeem refuses
// (INTERNAL) and says to retry; a success's Complete says to retry too,
// and its retry closes the approval.
func TestLedgerUnavailable(t *testing.T) {
	ns := natstest.JetStream(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	kv, err := js.CreateKeyValue(t.Context(), approval.LedgerBucketConfig("approvals", approval.LedgerOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := approval.NewLedger(t.Context(), kv, approval.LedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := newApprovalHarness(t, ledger)
	allowed := a.allow("c")
	ns.Shutdown()
	ns.WaitForShutdown()

	ctx, cancel := context.WithTimeout(pipeline(t), time.Second)
	defer cancel()
	resp, err := a.svc.Redeem(ctx, &yesguardv1.RedeemRequest{Approval: allowed.GetApproval(), Args: mustStruct(t, appealArgs)})
	if err != nil {
		t.Fatal(err)
	}
	wantRedeem(t, "no ledger", resp, yesguardv1.Reason_REASON_INTERNAL)
	if !strings.Contains(resp.GetMessage(), "Retry the Redeem") {
		t.Errorf("message %q does not say to retry", resp.GetMessage())
	}
	cctx, ccancel := context.WithTimeout(pipeline(t), time.Second)
	defer ccancel()
	_, err = a.svc.Complete(cctx, &yesguardv1.CompleteRequest{DecisionId: allowed.GetDecisionId()})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "retry the Complete") {
		t.Errorf("Complete with no ledger: %v, want Unavailable saying to retry", err)
	}
}
