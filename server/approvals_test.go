package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/internal/natstest"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// The approvals of issue 12 through the real guard: gRPC on a loopback
// listener, the JWKS on its HTTP address, the ledger in its JetStream
// bucket (or in memory with --state memory), the keys in files.

// keyFile writes an approval key into dir that signs from signsFrom, with
// key id kid, and returns it.
func keyFile(t *testing.T, dir, name, kid string, priv ed25519.PrivateKey, signsFrom time.Time) approval.Key {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block := &pem.Block{Type: "PRIVATE KEY", Bytes: der, Headers: map[string]string{approval.HeaderKeyID: kid, approval.HeaderSignsFrom: signsFrom.UTC().Format(time.RFC3339)}}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := approval.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newPrivate(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

// allowed publishes a question and a yes on call, waits for the replica
// to hold them, and returns the ALLOW.
func allowed(t *testing.T, r *replica, pub *publisher, call string) *yesguardv1.CheckResponse {
	t.Helper()
	pub.conversation(call)
	eventuallyFor(t, "the yes applied", func() bool { snap, _ := r.srv.store.Snapshot(call); return len(snap.Utterances) == 2 })
	resp, err := r.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("Check %s: %v (%s/%s %s), want ALLOW", call, err, resp.GetOutcome(), resp.GetReason(), resp.GetDetail())
	}
	if resp.GetApproval() == "" || resp.GetApprovalExpiresAt() == nil {
		t.Fatalf("the ALLOW of %s carries no approval: %v", call, resp)
	}
	return resp
}

func (r *replica) redeem(t *testing.T, token string, args map[string]any, tool, call string) *yesguardv1.RedeemResponse {
	t.Helper()
	st, err := structpb.NewStruct(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.gc.Redeem(ctx, &yesguardv1.RedeemRequest{Approval: token, Args: st, Tool: tool, CallId: call})
	if err != nil {
		t.Fatalf("Redeem: %v", err)
	}
	return resp
}

func wantReason(t *testing.T, what string, resp *yesguardv1.RedeemResponse, reason yesguardv1.Reason) {
	t.Helper()
	outcome := yesguardv1.Outcome_OUTCOME_REFUSE
	if reason == yesguardv1.Reason_REASON_REDEEMED {
		outcome = yesguardv1.Outcome_OUTCOME_ALLOW
	}
	if resp.GetOutcome() != outcome || resp.GetReason() != reason || resp.GetMessage() == "" {
		t.Fatalf("%s: %s/%s %q, want %s/%s", what, resp.GetOutcome(), resp.GetReason(), resp.GetMessage(), outcome, reason)
	}
}

// kidOf is the key id in a token's header.
func kidOf(t *testing.T, token string) string {
	t.Helper()
	head, _, _ := strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h.Kid
}

func flipFirst(part string) string {
	if part[0] == 'A' {
		return "B" + part[1:]
	}
	return "A" + part[1:]
}

// jwksKids is the key ids the guard's JWKS lists, fetched over HTTP.
func jwksKids(t *testing.T, httpAddr string) []string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + approval.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != approval.JWKSContentType {
		t.Fatalf("GET %s: %s %s", approval.JWKSPath, resp.Status, resp.Header.Get("Content-Type"))
	}
	var doc struct {
		Keys []struct {
			Kid string `json:"kid"`
			D   string `json:"d"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range doc.Keys {
		if k.D != "" {
			t.Fatalf("the JWKS publishes a private key: %s", b)
		}
		kids = append(kids, k.Kid)
	}
	return kids
}

// TestApprovalsThroughTheGuard is the life of approved actions on a real
// guard: the ALLOW's token verifies with the JWKS served over HTTP; every
// kind of bad redeem is refused with its reason; the first good one
// redeems, once; Complete(failed) reopens it and a success closes it; a
// rotation keeps the old key's tokens valid, and a key past its grace is
// refused; ListDecisions shows each action's whole life.
func TestApprovalsThroughTheGuard(t *testing.T) {
	keys := t.TempDir()
	kA := keyFile(t, keys, "a.pem", "key-a", newPrivate(t), time.Now().Add(-time.Hour))
	cfg := testConfig(t)
	cfg.ApprovalKeyDir = keys
	r := startReplicaCfg(t, cfg)
	pub := newPublisher(t, r.srv.NATSURL())

	first := allowed(t, r, pub, "life")
	token := first.GetApproval()
	if kid := kidOf(t, token); kid != "key-a" {
		t.Fatalf("the approval is signed by %q, want key-a", kid)
	}
	d := r.sink.all()
	if last := d[len(d)-1]; last.GetApprovalKeyId() != "key-a" || !last.GetApprovalExpiresAt().AsTime().Equal(first.GetApprovalExpiresAt().AsTime()) {
		t.Fatalf("the ALLOW's record: key %q, expiry %v", last.GetApprovalKeyId(), last.GetApprovalExpiresAt())
	}

	// A backend verifies it offline with the JWKS from the HTTP address.
	remote, err := approval.NewRemoteJWKS(t.Context(), "http://"+r.srv.HTTPAddr()+approval.JWKSPath, approval.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := approval.NewVerifier(remote, approval.VerifierOptions{}).VerifyFor(token, appealTool, appealArgs)
	if err != nil {
		t.Fatalf("the ALLOW's approval does not verify with the served JWKS: %v", err)
	}
	if c.DecisionID != first.GetDecisionId() || c.CallID != "life" || c.Turn == nil || c.Turn.TextHash != approval.TextHash("Yes.") {
		t.Fatalf("claims %+v", c)
	}

	// Refused, each with its reason, and none of them spends it.
	wantReason(t, "other arguments", r.redeem(t, token, map[string]any{"appeal_id": "A-18"}, appealTool, ""), yesguardv1.Reason_REASON_APPROVAL_MISMATCH)
	wantReason(t, "another call", r.redeem(t, token, appealArgs, appealTool, "other-call"), yesguardv1.Reason_REASON_APPROVAL_MISMATCH)
	wantReason(t, "another tool", r.redeem(t, token, appealArgs, "pay_bill", ""), yesguardv1.Reason_REASON_APPROVAL_MISMATCH)
	parts := strings.Split(token, ".")
	wantReason(t, "a tampered payload", r.redeem(t, parts[0]+"."+flipFirst(parts[1])+"."+parts[2], appealArgs, appealTool, ""), yesguardv1.Reason_REASON_APPROVAL_INVALID)
	wantReason(t, "a tampered signature", r.redeem(t, parts[0]+"."+parts[1]+"."+flipFirst(parts[2]), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_APPROVAL_INVALID)
	canon, _ := approval.CanonicalMap(appealArgs)
	claimsOf := func(id, call string) approval.Approval {
		return approval.Approval{DecisionID: id, CallID: call, Tool: appealTool, ArgsHash: approval.ArgsHash(canon)}
	}
	forger, _ := approval.NewKeySet([]approval.Key{{ID: "key-a", Private: newPrivate(t)}}, approval.KeySetOptions{})
	forged, _, err := approval.NewSigner(forger, approval.SignerOptions{}).Sign(claimsOf(first.GetDecisionId(), "life"))
	if err != nil {
		t.Fatal(err)
	}
	wantReason(t, "a forged token", r.redeem(t, forged, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_APPROVAL_INVALID)
	// Signed by the guard's own key, but its life ended a minute ago.
	past, _ := approval.NewKeySet([]approval.Key{kA}, approval.KeySetOptions{Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }})
	expired, _, err := approval.NewSigner(past, approval.SignerOptions{}).Sign(claimsOf("01KB4Z3Q8K0V6YH1ZB2R9M7T4E", "life"))
	if err != nil {
		t.Fatal(err)
	}
	wantReason(t, "an expired token", r.redeem(t, expired, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_APPROVAL_EXPIRED)

	ok := r.redeem(t, token, appealArgs, appealTool, "life")
	wantReason(t, "the first redeem", ok, yesguardv1.Reason_REASON_REDEEMED)
	if ok.GetAllowedDecisionId() != first.GetDecisionId() || ok.GetCallId() != "life" || ok.GetTool() != appealTool {
		t.Errorf("the redeem's answer: %v", ok)
	}
	wantReason(t, "a second redeem", r.redeem(t, token, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)

	// The action failed: the backend says so with the approval and its
	// receipt; a retry redeems again, and once it succeeds nothing
	// redeems it any more.
	if _, err := r.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{Approval: token, Receipt: ok.GetReceipt(), Failed: true}); err != nil {
		t.Fatalf("Complete(failed) with the approval: %v", err)
	}
	wantReason(t, "the retry after a failure", r.redeem(t, token, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_REDEEMED)
	second := allowed(t, r, pub, "life-2")
	if _, err := r.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId(), Approval: second.GetApproval()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Complete with another decision's approval: %v, want PermissionDenied", err)
	}
	result, _ := structpb.NewStruct(map[string]any{"ticket": "T-1"})
	if _, err := r.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: second.GetDecisionId(), Approval: second.GetApproval(), Result: result}); err != nil {
		t.Fatal(err)
	}
	wantReason(t, "a redeem after success", r.redeem(t, second.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)

	// Rotation: key B signs from now; A's tokens keep verifying.
	waiting := allowed(t, r, pub, "rotation-1")
	late := allowed(t, r, pub, "rotation-2")
	privB := newPrivate(t)
	keyFile(t, keys, "b.pem", "key-b", privB, time.Now().Add(-time.Second))
	if err := r.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if kids := jwksKids(t, r.srv.HTTPAddr()); strings.Join(kids, ",") != "key-b,key-a" {
		t.Errorf("JWKS after the rotation lists %v, want key-b (signing) then key-a (retired)", kids)
	}
	afterRotation := allowed(t, r, pub, "rotation-3")
	if kid := kidOf(t, afterRotation.GetApproval()); kid != "key-b" {
		t.Errorf("after the rotation the approval is signed by %q, want key-b", kid)
	}
	wantReason(t, "a retired key's token within its life", r.redeem(t, waiting.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_REDEEMED)
	wantReason(t, "the new key's token", r.redeem(t, afterRotation.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_REDEEMED)

	// Move B's start back past A's grace (max TTL and skew): A signed
	// until the rotation a moment ago, so it stays until that token has
	// expired (a key past its grace is refused on a clock: approval's
	// TestRotationKeepsOldTokensUntilTheyExpire).
	keyFile(t, keys, "b.pem", "key-b", privB, time.Now().Add(-approval.DefaultMaxTTL-approval.DefaultSkew-time.Minute))
	if err := r.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if kids := jwksKids(t, r.srv.HTTPAddr()); strings.Join(kids, ",") != "key-b,key-a" {
		t.Errorf("JWKS after B's start moved back lists %v, want key-b and key-a, whose last token is still valid", kids)
	}
	wantReason(t, "the retired key's last token", r.redeem(t, late.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_REDEEMED)

	// ListDecisions: allowed, redeemed (and the refusals), failed,
	// redeemed again.
	list, err := r.gc.ListDecisions(t.Context(), &yesguardv1.ListDecisionsRequest{CallId: "life"})
	if err != nil {
		t.Fatal(err)
	}
	var life []string
	for _, d := range list.GetDecisions() {
		if d.GetDecisionId() != first.GetDecisionId() && d.GetOriginalDecisionId() != first.GetDecisionId() {
			continue
		}
		life = append(life, strings.TrimPrefix(d.GetKind().String(), "DECISION_KIND_")+" "+strings.ToLower(strings.TrimPrefix(d.GetReason().String(), "REASON_")))
	}
	all := strings.Join(life, ", ")
	got := all
	for _, step := range []string{"CHECK confirmed", "REDEEM approval_mismatch", "REDEEM redeemed", "REDEEM already_redeemed", "COMPLETE failed", "REDEEM redeemed"} {
		i := strings.Index(got, step)
		if i < 0 {
			t.Fatalf("the action's life on ListDecisions lacks %q, in order: %s", step, all)
		}
		got = got[i+len(step):]
	}
}

// Of concurrent redeems of one approval on two replicas sharing one NATS
// (and the same keys), exactly one succeeds; after a Complete(failed), of
// the retries, exactly one again.
func TestRedeemOnceAcrossTwoReplicas(t *testing.T) {
	// One JetStream server both replicas use as an external NATS (an
	// embedded one admits other clients only as the pipeline user).
	url := natstest.JetStream(t).ClientURL()
	a := startReplica(t, url, 1)
	b := startReplica(t, url, 1)
	pub := newPublisher(t, url)

	race := func(what, token string) (receipt string) {
		t.Helper()
		var wg sync.WaitGroup
		start := make(chan struct{})
		got := make([]*yesguardv1.RedeemResponse, 16)
		for i := range got {
			r := []*replica{a, b}[i%2]
			wg.Go(func() {
				<-start
				got[i] = r.redeem(t, token, appealArgs, appealTool, "")
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, resp := range got {
			switch resp.GetReason() {
			case yesguardv1.Reason_REASON_REDEEMED:
				won++
				receipt = resp.GetReceipt()
			case yesguardv1.Reason_REASON_ALREADY_REDEEMED:
			default:
				t.Fatalf("%s: %s/%s %q", what, resp.GetOutcome(), resp.GetReason(), resp.GetMessage())
			}
		}
		if won != 1 {
			t.Fatalf("%s: %d redeems succeeded, want exactly 1", what, won)
		}
		return receipt
	}
	for i := range 5 {
		ok := allowed(t, a, pub, fmt.Sprint("two-", i))
		receipt := race(fmt.Sprint("call ", i), ok.GetApproval())
		if _, err := b.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{Approval: ok.GetApproval(), Receipt: receipt, Failed: true}); err != nil {
			t.Fatal(err)
		}
		race(fmt.Sprint("call ", i, " after a failure"), ok.GetApproval())
	}
	// Both replicas publish the same keys.
	if ka, kb := a.srv.approvals.keys.JWKS(), b.srv.approvals.keys.JWKS(); string(ka) != string(kb) {
		t.Errorf("the replicas' JWKS differ:\n%s\n%s", ka, kb)
	}
}

// With --state memory there is no JetStream: the ledger is in the process,
// and a race of redeems still has exactly one winner.
func TestRedeemWithTheMemoryState(t *testing.T) {
	cfg := testConfig(t)
	cfg.State = StateMemory
	r := startReplicaCfg(t, cfg)
	// No JetStream: the pipeline publishes on core NATS.
	e := &e2e{t: t, srv: r.srv, seq: map[string]uint64{}}
	var err error
	if e.pub, err = nats.Connect(r.srv.NATSURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pub.Close)
	e.say("mem", transcript.Agent, "Shall I submit the appeal A-17?")
	e.say("mem", transcript.Caller, "Yes.")
	eventuallyFor(t, "the yes applied", func() bool { snap, _ := r.srv.store.Snapshot("mem"); return len(snap.Utterances) == 2 })
	resp, err := r.check(t.Context(), "mem", appealTool, appealArgs)
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW || resp.GetApproval() == "" {
		t.Fatalf("Check: %v, %v", resp, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, receipt := 0, ""
	start := make(chan struct{})
	for range 32 {
		wg.Go(func() {
			<-start
			got := r.redeem(t, resp.GetApproval(), appealArgs, appealTool, "mem")
			mu.Lock()
			defer mu.Unlock()
			switch got.GetReason() {
			case yesguardv1.Reason_REASON_REDEEMED:
				won++
				receipt = got.GetReceipt()
			case yesguardv1.Reason_REASON_ALREADY_REDEEMED:
			default:
				t.Errorf("%s/%s", got.GetOutcome(), got.GetReason())
			}
		})
	}
	close(start)
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d of 32 concurrent redeems succeeded, want exactly 1", won)
	}
	if _, err := r.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: resp.GetDecisionId(), Failed: true}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("the pipeline's Complete(failed) after a redeem: %v, want FailedPrecondition", err)
	}
	if _, err := r.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: resp.GetDecisionId(), Receipt: receipt, Failed: true}); err != nil {
		t.Fatal(err)
	}
	wantReason(t, "a retry after a failure", r.redeem(t, resp.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_REDEEMED)
}

// Without key flags the first start generates a key into the data
// directory (0600, in a 0700 folder); a restart on it signs with the same
// key, so an approval given before the restart redeems after it.
func TestKeysGeneratedIntoTheDataDirectory(t *testing.T) {
	cfg := testConfig(t)
	r := startReplicaCfg(t, cfg)
	path := filepath.Join(cfg.DataDir, KeysDirName, approval.InitialKeyFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no key generated: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the generated key is %v, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Errorf("the key folder is %v, want 0700", dst.Mode().Perm())
	}
	pub := newPublisher(t, r.srv.NATSURL())
	before := allowed(t, r, pub, "restart")
	kids := jwksKids(t, r.srv.HTTPAddr())
	stopServer(t, r.srv)
	r.killed = true // stopped here, not at cleanup

	r2 := startReplicaCfg(t, cfg)
	if again := jwksKids(t, r2.srv.HTTPAddr()); strings.Join(again, ",") != strings.Join(kids, ",") || len(kids) != 1 {
		t.Fatalf("JWKS before the restart %v, after %v: want one and the same key", kids, again)
	}
	wantReason(t, "an approval from before the restart", r2.redeem(t, before.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_REDEEMED)
	wantReason(t, "its second redeem, after the restart", r2.redeem(t, before.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
}

// Keys that cannot sign stop New with an error naming the flag; a reload
// with bad keys keeps the old ones.
func TestApprovalKeyErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	future := t.TempDir()
	keyFile(t, future, "later.pem", "later", newPrivate(t), time.Now().Add(time.Hour))
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"an empty key directory": {func(c *Config) { c.ApprovalKeyDir = t.TempDir() }, "approval_key_dir"},
		"a missing key dir":      {func(c *Config) { c.ApprovalKeyDir = filepath.Join(t.TempDir(), "none") }, "approval_key_dir"},
		"a file that is no key":  {func(c *Config) { c.ApprovalKeyFiles = []string{bad} }, "approval_key_file"},
		"no key signs now":       {func(c *Config) { c.ApprovalKeyDir = future }, "none signs now"},
		"a blank issuer":         {func(c *Config) { c.ApprovalIssuer = " x" }, "approval_issuer"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.edit(&cfg)
			_, err := New(cfg, WithDecisionSink(&captureSink{}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error naming %s", err, tc.want)
			}
		})
	}

	dir := t.TempDir()
	keyFile(t, dir, "a.pem", "key-a", newPrivate(t), time.Now().Add(-time.Hour))
	cfg := testConfig(t)
	cfg.ApprovalKeyDir = dir
	ts := newServer(t, cfg)
	defer stopServer(t, ts.Server)
	if err := os.WriteFile(filepath.Join(dir, "broken.pem"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ts.Reload(); err == nil || !strings.Contains(err.Error(), "approval keys stay") {
		t.Fatalf("Reload with a broken key file = %v", err)
	}
	if ks := ts.approvals.keys.Keys(); len(ks) != 1 || ks[0].ID != "key-a" || ks[0].State != approval.KeySigning {
		t.Fatalf("after a failed reload the keys are %+v", ks)
	}
}

// Once an approval is redeemed only its redeemer releases it: the
// pipeline's Complete(failed), by decision id or with the approval it was
// given, is refused (FailedPrecondition, counted, recorded), the
// approval stays redeemed on every replica, and the reservation stays
// held; the backend's own Complete(failed) with the Redeem's receipt
// reopens it for one retry. Five rounds on two replicas sharing one NATS.
func TestOnlyTheRedeemerReleasesAnApproval(t *testing.T) {
	url := natstest.JetStream(t).ClientURL()
	a := startReplica(t, url, 1)
	b := startReplica(t, url, 1)
	pub := newPublisher(t, url)
	for i := range 5 {
		ok := allowed(t, a, pub, fmt.Sprint("redeemer-", i))
		token := ok.GetApproval()
		first := b.redeem(t, token, appealArgs, appealTool, "")
		wantReason(t, "the backend's redeem", first, yesguardv1.Reason_REASON_REDEEMED)
		refusedBefore := labelled(t, a.reg, "yesguard_guard_completions_total", "result", "redeemed") +
			labelled(t, b.reg, "yesguard_guard_completions_total", "result", "redeemed")

		// The pipeline times out and reports a failure: refused.
		_, err := a.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: ok.GetDecisionId(), Failed: true})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "receipt") {
			t.Fatalf("round %d: the pipeline's Complete(failed) after a redeem: %v, want FailedPrecondition naming the receipt", i, err)
		}
		_, err = b.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{Approval: token, Failed: true})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("round %d: Complete(failed) with the approval alone after a redeem: %v, want FailedPrecondition", i, err)
		}
		wantReason(t, "a redeem after the pipeline's failure", a.redeem(t, token, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
		wantReason(t, "a redeem after the pipeline's failure, other replica", b.redeem(t, token, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
		// The reservation is still held: the same Check is a duplicate.
		if dup, err := a.check(t.Context(), fmt.Sprint("redeemer-", i), appealTool, appealArgs); err != nil || dup.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW {
			t.Fatalf("round %d: a Check after the refused failure: %v %s/%s, want no new ALLOW", i, err, dup.GetOutcome(), dup.GetReason())
		}
		refused := labelled(t, a.reg, "yesguard_guard_completions_total", "result", "redeemed") +
			labelled(t, b.reg, "yesguard_guard_completions_total", "result", "redeemed")
		if refused != refusedBefore+2 {
			t.Fatalf("round %d: completions_total{result=redeemed} went from %v to %v, want +2", i, refusedBefore, refused)
		}
		var rec *yesguardv1.Decision
		for _, d := range a.sink.all() {
			if d.GetKind() == yesguardv1.DecisionKind_DECISION_KIND_COMPLETE && d.GetOriginalDecisionId() == ok.GetDecisionId() {
				rec = d
			}
		}
		if rec == nil || rec.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || rec.GetReason() != yesguardv1.Reason_REASON_ALREADY_REDEEMED || !strings.Contains(rec.GetMessage(), "receipt") {
			t.Fatalf("round %d: the refused Complete's record: %v", i, rec)
		}

		// The backend, which redeemed, reports its failure with the
		// receipt: one retry may redeem again, and only once.
		if first.GetReceipt() == "" {
			t.Fatalf("round %d: the REDEEMED answer carries no receipt", i)
		}
		if _, err := a.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{Approval: token, Receipt: first.GetReceipt(), Failed: true}); err != nil {
			t.Fatalf("round %d: the redeemer's Complete(failed): %v", i, err)
		}
		retry := b.redeem(t, token, appealArgs, appealTool, "")
		wantReason(t, "the redeemer's retry", retry, yesguardv1.Reason_REASON_REDEEMED)
		if retry.GetReceipt() == first.GetReceipt() {
			t.Fatalf("round %d: the retry's receipt is the first redeem's", i)
		}
		// A late copy of the first failure (its receipt is spent) and the
		// pipeline's failure are refused; the retry's own success closes it.
		if _, err := b.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{Approval: token, Receipt: first.GetReceipt(), Failed: true}); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("round %d: a spent receipt's Complete(failed): %v, want FailedPrecondition", i, err)
		}
		if _, err := a.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{Approval: token, Failed: true}); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("round %d: the pipeline's Complete(failed) after the retry's redeem: %v, want FailedPrecondition", i, err)
		}
		wantReason(t, "a redeem during the retry", a.redeem(t, token, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
		if _, err := b.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{Approval: token, Receipt: retry.GetReceipt()}); err != nil {
			t.Fatalf("round %d: the retry's success: %v", i, err)
		}
		wantReason(t, "a redeem after success", a.redeem(t, token, appealArgs, appealTool, ""), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
	}
}

// A new key whose Signs-From is already past retires the key that signed
// until the reload, not at that Signs-From: the old key stays in the JWKS
// and its tokens redeem until they expire, and the guard warns.
func TestAPastSignsFromKeepsTheOldKey(t *testing.T) {
	keys := t.TempDir()
	keyFile(t, keys, "a.pem", "key-a", newPrivate(t), time.Now().Add(-24*time.Hour))
	cfg := testConfig(t)
	cfg.ApprovalKeyDir = keys
	core, logs := observer.New(zap.WarnLevel)
	r := startReplicaCfg(t, cfg, WithLogger(zap.New(core)))
	pub := newPublisher(t, r.srv.NATSURL())
	signedByA := allowed(t, r, pub, "past-signs-from")

	keyFile(t, keys, "b.pem", "key-b", newPrivate(t), time.Now().Add(-time.Hour))
	reloaded := time.Now()
	if err := r.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if kids := jwksKids(t, r.srv.HTTPAddr()); strings.Join(kids, ",") != "key-b,key-a" {
		t.Fatalf("JWKS after adding a key that signs from an hour ago lists %v, want key-b and key-a (its tokens are still valid)", kids)
	}
	for _, k := range r.srv.approvals.keys.Keys() {
		if k.ID == "key-a" && (k.State != approval.KeyRetired || k.DropAt.Before(reloaded.Add(approval.DefaultMaxTTL))) {
			t.Errorf("key-a after the reload: %s until %s, want retired until at least %s", k.State, k.DropAt, reloaded.Add(approval.DefaultMaxTTL))
		}
	}
	if kid := kidOf(t, allowed(t, r, pub, "past-signs-from-2").GetApproval()); kid != "key-b" {
		t.Errorf("after the reload the approval is signed by %q, want key-b", kid)
	}
	wantReason(t, "key-a's token after the reload", r.redeem(t, signedByA.GetApproval(), appealArgs, appealTool, ""), yesguardv1.Reason_REASON_REDEEMED)
	if n := logs.FilterMessageSnippet("was retired by a key whose Signs-From was already past").FilterField(zap.String("key", "key-a")).Len(); n == 0 {
		t.Errorf("no warning about key-a held past key-b's Signs-From; logged: %v", logs.All())
	}
}
