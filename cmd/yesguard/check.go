package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// runCheck asks the guard whether a tool call may run, as a pipeline does
// before each consequential tool, and prints the decision.
func runCheck(ctx context.Context, args []string, e *env) int {
	const name = "check"
	fs, c := clientFlagSet(name, "<call> <tool> ['<json args>']",
		"Calls Check for the tool call and prints the decision: outcome, reason, the evidence\n"+
			"turns, what matched, how long the guard waited, the message for the model, and for an\n"+
			"ALLOW its signed approval (for 'yesguard redeem' or the backend) and when it expires.\n"+
			"Exits 0 whatever the outcome; 1 when the guard cannot be asked.", e, true, false)
	responseID := fs.String("response-id", "", "the model response that made this call (`id`)")
	toolCallID := fs.String("tool-call-id", "", "the model's own `id` for the call; logged")
	respondingTo := fs.Int64("responding-to-ms", 0, "audio time (`ms`) at which the caller turn the model answers ended")
	timeout := fs.Duration("timeout", 10*time.Second, "the Check's deadline")
	pos, err := c.parse(fs, args, e, 2, 3)
	if err != nil {
		return usageError(name, err, e)
	}
	if err := checkCallID(pos[0]); err != nil {
		return usageError(name, err, e)
	}
	req := &yesguardv1.CheckRequest{
		CallId: pos[0], Tool: pos[1], ResponseId: *responseID, ToolCallId: *toolCallID, RespondingToMs: *respondingTo,
		IncludeEvidence: true, // the CLI prints the whole evidence
	}
	argsJSON := "{}"
	if len(pos) == 3 {
		argsJSON = pos[2]
		var m map[string]any
		if err := json.Unmarshal([]byte(argsJSON), &m); err != nil || m == nil {
			return usageError(name, fmt.Errorf("args %q: want a JSON object, like '{\"appeal_id\":\"A-1\"}'", argsJSON), e)
		}
		if req.Args, err = structpb.NewStruct(m); err != nil {
			return usageError(name, fmt.Errorf("args: %w", err), e)
		}
		b, _ := json.Marshal(m) // sorted keys, as the guard logs them
		argsJSON = string(b)
	}

	guard, cc, err := c.dialGuard()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard check: %v\n", err)
		return exitUsage
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := guard.Check(ctx, req)
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard check: guard at %s: %v\n", dialTarget(c.grpcAddr), err)
		return exitError
	}

	if c.json {
		b, err := protoJSON(resp)
		if err == nil {
			err = writeJSON(e.stdout, b)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard check: %v\n", err)
			return exitError
		}
		return exitOK
	}
	newPrinter(e.stdout, e).decision(decisionOf(req, resp, argsJSON), "")
	if a := resp.GetAsk(); a != nil {
		// The guard's own question: what the pipeline speaks as the agent.
		fmt.Fprintf(e.stdout, "  %-9s %s (%s, %s; say it as the agent, e.g. yesguard say %s agent %q --response-id %s)\n",
			"ask", a.GetText(), a.GetLang(), a.GetId(), req.GetCallId(), a.GetText(), a.GetId())
	}
	if a := resp.GetApproval(); a != "" {
		fmt.Fprintf(e.stdout, "  %-9s %s\n", "approval", a)
		fmt.Fprintf(e.stdout, "  %-9s %s\n", "", "expires "+resp.GetApprovalExpiresAt().AsTime().Local().Format(time.RFC3339)+"; redeem it: yesguard redeem <approval> '<json args>'")
	}
	return exitOK
}
