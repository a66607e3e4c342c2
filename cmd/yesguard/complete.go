package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// runComplete reports an allowed call's result, as a pipeline does after
// running the tool, so that a duplicate gets it instead of waiting.
func runComplete(ctx context.Context, args []string, e *env) int {
	const name = "complete"
	fs, c := clientFlagSet(name, "<decision_id> ['<json result>']",
		"Reports the result of the tool an ALLOW let run (Complete), so that a duplicate of the\n"+
			"call gets that result. --failed releases the action instead: a retry is judged afresh.", e, true, false)
	failed := fs.Bool("failed", false, "the tool failed: release the reservation")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	pos, err := c.parse(fs, args, e, 1, 2)
	if err != nil {
		return usageError(name, err, e)
	}
	req := &yesguardv1.CompleteRequest{DecisionId: pos[0], Failed: *failed}
	if len(pos) == 2 {
		var m map[string]any
		if err := json.Unmarshal([]byte(pos[1]), &m); err != nil || m == nil {
			return usageError(name, fmt.Errorf("result %q: want a JSON object, like '{\"status\":\"filed\"}'", pos[1]), e)
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
	if _, err := guard.Complete(ctx, req); err != nil {
		fmt.Fprintf(e.stderr, "yesguard complete: guard at %s: %v\n", dialTarget(c.grpcAddr), err)
		return exitError
	}
	if c.json {
		if err := writeJSON(e.stdout, map[string]any{"decision_id": req.GetDecisionId(), "failed": req.GetFailed()}); err != nil {
			fmt.Fprintf(e.stderr, "yesguard complete: %v\n", err)
			return exitError
		}
		return exitOK
	}
	if *failed {
		fmt.Fprintf(e.stdout, "%s: reported failed; the action is released\n", req.GetDecisionId())
	} else {
		fmt.Fprintf(e.stdout, "%s: result reported; duplicates get it\n", req.GetDecisionId())
	}
	return exitOK
}
