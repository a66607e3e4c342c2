package server

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/yesguard/yesguard/approval"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// signRaw signs payload as an approval of key kid, byte for byte: the
// guard's own key signing what its signer never would, so that only the
// claims' checks stand between the token and a redeem.
func signRaw(priv ed25519.PrivateKey, kid, payload string) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + kid + `","typ":"` + approval.TokenType + `"}`))
	body := enc.EncodeToString([]byte(payload))
	return head + "." + body + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(head+"."+body)))
}

// guardWithKeyA is a guard signing with key-a, and key-a's private key.
func guardWithKeyA(t *testing.T) (*replica, ed25519.PrivateKey) {
	t.Helper()
	keys := t.TempDir()
	priv := newPrivate(t)
	keyFile(t, keys, "a.pem", "key-a", priv, time.Now().Add(-time.Hour))
	cfg := testConfig(t)
	cfg.ApprovalKeyDir = keys
	return startReplicaCfg(t, cfg), priv
}

// claimsPayload is an approval's claims for call, valid now, with the
// canonical hash of appealArgs, and extra members appended as they are.
func claimsPayload(t *testing.T, id, call, extra string) string {
	t.Helper()
	canon, err := approval.CanonicalMap(appealArgs)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	return fmt.Sprintf(`{"iss":"yesguard","jti":%q,"iat":%d,"exp":%d,"call_id":%q,"tool":%q,"args_sha256":%q%s}`,
		id, now, now+60, call, appealTool, approval.ArgsHash(canon), extra)
}

// A token payload means one thing to every verifier: a claim twice
// (parsers keep the first or the last) or a claim name in another case
// (encoding/json matches names without case) is refused as invalid, even
// when the guard's own key signed it, and redeems nothing.
func TestRedeemRefusesAmbiguousClaims(t *testing.T) {
	r, priv := guardWithKeyA(t)

	good := signRaw(priv, "key-a", claimsPayload(t, "01KB4Z3Q8K0V6YH1ZB2R9M7T40", "claims", ""))
	for _, tc := range []struct{ name, token string }{
		{"a claim twice", signRaw(priv, "key-a", claimsPayload(t, "01KB4Z3Q8K0V6YH1ZB2R9M7T41", "claims", `,"call_id":"other-call"`))},
		{"the decision twice", signRaw(priv, "key-a", claimsPayload(t, "01KB4Z3Q8K0V6YH1ZB2R9M7T42", "claims", `,"jti":"01KB4Z3Q8K0V6YH1ZB2R9M7T49"`))},
		{"a claim name in capitals", signRaw(priv, "key-a", claimsPayload(t, "01KB4Z3Q8K0V6YH1ZB2R9M7T43", "claims", `,"JTI":"01KB4Z3Q8K0V6YH1ZB2R9M7T49"`))},
		{"a turn claim twice", signRaw(priv, "key-a", claimsPayload(t, "01KB4Z3Q8K0V6YH1ZB2R9M7T44", "claims",
			`,"turn":{"text_sha256":"`+approval.TextHash("Yes.")+`","start_ms":1,"end_ms":2,"end_ms":3,"received_ms":4}`))},
	} {
		wantReason(t, tc.name, r.redeem(t, tc.token, appealArgs, appealTool, "claims"), yesguardv1.Reason_REASON_APPROVAL_INVALID)
	}
	wantReason(t, "the same claims, each once", r.redeem(t, good, appealArgs, appealTool, "claims"), yesguardv1.Reason_REASON_REDEEMED)
}

// An expiry no record can hold (2^62 s) is refused as malformed, and the
// Redeem's record is still written: to the log and to the call's stored
// records, which ListDecisions reads.
func TestRedeemRecordOfAnExpiryOutOfRange(t *testing.T) {
	r, priv := guardWithKeyA(t)
	const call = "huge-exp"
	canon, _ := approval.CanonicalMap(appealArgs)
	now := time.Now().Unix()
	token := signRaw(priv, "key-a", fmt.Sprintf(`{"iss":"yesguard","jti":"01KB4Z3Q8K0V6YH1ZB2R9M7T4E","iat":%d,"exp":%d,"call_id":%q,"tool":%q,"args_sha256":%q}`,
		now, int64(1)<<62, call, appealTool, approval.ArgsHash(canon)))
	resp := r.redeem(t, token, appealArgs, appealTool, call)
	wantReason(t, "an expiry of 2^62", resp, yesguardv1.Reason_REASON_APPROVAL_INVALID)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	list, err := r.gc.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: call})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range list.GetDecisions() {
		found = found || d.GetDecisionId() == resp.GetDecisionId()
	}
	if !found {
		t.Fatalf("the Redeem's record %s is not among the call's stored records (%d)", resp.GetDecisionId(), len(list.GetDecisions()))
	}
	if n := counterSum(t, r.reg, "yesguard_decision_store_dropped_total"); n != 0 {
		t.Errorf("decision_store_dropped_total = %v", n)
	}
}
