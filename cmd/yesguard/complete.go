package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// runComplete reports an allowed call's result, as a pipeline does after
// running the tool, so that a duplicate gets it instead of waiting.
func runComplete(ctx context.Context, args []string, e *env) int {
	const name = "complete"
	fs, c := clientFlagSet(name, "<decision_id> ['<json result>']  |  --approval <approval> ['<json result>']",
		"Reports the result of the tool an ALLOW let run (Complete), so that a duplicate of the\n"+
			"call gets that result, and its approval is never redeemed again. --failed releases the\n"+
			"action instead: a retry is judged afresh, and its approval may be redeemed again.\n"+
			"--approval (a backend that redeemed it) authorises the Complete for its own decision,\n"+
			"whose id it then need not give. Once the approval is redeemed only --receipt (the\n"+
			"Redeem's) releases it: without it --failed is refused and changes nothing.", e, true, false)
	failed := fs.Bool("failed", false, "the tool failed: release the reservation")
	approval := fs.String("approval", "", "the ALLOW's `approval`: authorises the Complete of its decision")
	receipt := fs.String("receipt", "", "the `receipt` of the Redeem that redeemed the approval: only it releases a redeemed approval")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	pos, err := c.parse(fs, args, e, 0, 2)
	if err != nil {
		return usageError(name, err, e)
	}
	req := &yesguardv1.CompleteRequest{Failed: *failed, Approval: strings.TrimSpace(*approval), Receipt: strings.TrimSpace(*receipt)}
	if len(pos) > 0 && (req.Approval == "" || !strings.HasPrefix(strings.TrimSpace(pos[0]), "{")) {
		req.DecisionId, pos = pos[0], pos[1:]
	}
	if req.DecisionId == "" && req.Approval == "" {
		return usageError(name, fmt.Errorf("want the decision_id of the ALLOW, or --approval"), e)
	}
	if len(pos) > 1 {
		return usageError(name, fmt.Errorf("unexpected arguments %q after the result", pos[1:]), e)
	}
	if len(pos) == 1 {
		var m map[string]any
		if err := json.Unmarshal([]byte(pos[0]), &m); err != nil || m == nil {
			return usageError(name, fmt.Errorf("result %q: want a JSON object, like '{\"status\":\"filed\"}'", pos[0]), e)
		}
		if req.Result, err = structpb.NewStruct(m); err != nil {
			return usageError(name, fmt.Errorf("result: %w", err), e)
		}
	}
	guard, cc, err := c.dialGuard()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard complete: %v\n", err)
		return exitUsage
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := guard.Complete(ctx, req)
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard complete: guard at %s: %v\n", dialTarget(c.grpcAddr), err)
		return exitError
	}
	if c.json {
		if err := writeJSON(e.stdout, map[string]any{"decision_id": req.GetDecisionId(), "failed": req.GetFailed(), "record": resp.GetDecisionId()}); err != nil {
			fmt.Fprintf(e.stderr, "yesguard complete: %v\n", err)
			return exitError
		}
		return exitOK
	}
	which := req.GetDecisionId()
	if which == "" {
		which = "the approval's decision"
	}
	if *failed {
		fmt.Fprintf(e.stdout, "%s: reported failed; the action is released\n", which)
	} else {
		fmt.Fprintf(e.stdout, "%s: result reported; duplicates get it\n", which)
	}
	return exitOK
}
