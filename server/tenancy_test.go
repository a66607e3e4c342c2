package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/auth"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
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
