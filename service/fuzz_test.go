package service

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// FuzzRedeem feeds Redeem what a backend, or anyone holding the pipeline
// role, can send: any approval string, tool, call and arguments. It never
// panics; it answers InvalidArgument, or a verdict with a reason and a
// message; and it redeems nothing but the one token the guard issued, for
// its own arguments, once.
func FuzzRedeem(f *testing.F) {
	a := newApprovalHarness(f, nil)
	allowed := a.allow("fz")
	token := allowed.GetApproval()
	parts := strings.Split(token, ".")
	f.Add(token, "submit_appeal", "fz", `{"appeal_id":"A-17"}`)
	f.Add(token, "", "", `{"appeal_id":"A-18"}`)
	f.Add(parts[0]+"."+parts[1]+".", "submit_appeal", "", `{}`)
	f.Add(parts[0]+".."+parts[2], "", "", `{"appeal_id":"A-17"}`)
	f.Add("eyJhbGciOiJub25lIn0.e30.", "", "", `{}`)
	f.Add(strings.Repeat("A", 9000), "x", "y", `{"a":[1,2,{"b":null}]}`)
	redeemed := 0
	f.Fuzz(func(t *testing.T, tok, tool, call, args string) {
		req := &yesguardv1.RedeemRequest{Approval: tok, Tool: tool, CallId: call}
		var st structpb.Struct
		if protojson.Unmarshal([]byte(args), &st) == nil {
			req.Args = &st
		}
		resp, err := a.svc.Redeem(pipeline(t), req)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Redeem(%q) = %v, want a verdict or InvalidArgument", tok, err)
			}
			return
		}
		if resp.GetReason() == yesguardv1.Reason_REASON_UNSPECIFIED || resp.GetMessage() == "" || resp.GetDecisionId() == "" {
			t.Fatalf("Redeem(%q): %v, want a reason, a message and a record", tok, resp)
		}
		if resp.GetReason() != yesguardv1.Reason_REASON_REDEEMED {
			if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE {
				t.Fatalf("Redeem(%q): %v, a refusal that is not REFUSE", tok, resp)
			}
			return
		}
		redeemed++
		if tok != token || redeemed > 1 {
			t.Fatalf("redeemed %q (%d times): only the guard's own token, once", tok, redeemed)
		}
		if resp.GetAllowedDecisionId() != allowed.GetDecisionId() {
			t.Fatalf("redeemed for decision %q, want %q", resp.GetAllowedDecisionId(), allowed.GetDecisionId())
		}
	})
}
