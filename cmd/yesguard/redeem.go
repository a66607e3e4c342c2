package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// runRedeem redeems an ALLOW's approval, as the system of record does just
// before it executes the action, and prints the answer.
func runRedeem(ctx context.Context, args []string, e *env) int {
	const name = "redeem"
	fs, c := clientFlagSet(name, "<approval> ['<json args>']",
		"Calls Redeem, as the system of record does before it executes an allowed action: the\n"+
			"guard verifies the approval (from check's output) against the arguments given, exactly\n"+
			"as the backend would execute them, and claims it once across its replicas.\n"+
			"Exits 0 when it is REDEEMED (execute the action once); 1 when it is refused, with the\n"+
			"reason and what to do, or when the guard cannot be asked.", e, true, false)
	tool := fs.String("tool", "", "the `tool` about to be executed; when set it must be the approved one")
	callID := fs.String("call", "", "the `call` the backend acts for; when set it must be the approved one")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	pos, err := c.parse(fs, args, e, 1, 2)
	if err != nil {
		return usageError(name, err, e)
	}
	req := &yesguardv1.RedeemRequest{Approval: strings.TrimSpace(pos[0]), Tool: *tool, CallId: *callID}
	if len(pos) == 2 {
		// Parsed as the guard parses a JSON client's arguments (the
		// canonical-JSON rule): a key twice is an error, not a guess.
		req.Args = &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(pos[1]), req.Args); err != nil {
			return usageError(name, fmt.Errorf("args %q: want one JSON object, like '{\"appeal_id\":\"A-1\"}': %v", pos[1], err), e)
		}
	}
	guard, cc, err := c.dialGuard()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard redeem: %v\n", err)
		return exitUsage
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := guard.Redeem(ctx, req)
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard redeem: guard at %s: %v\n", dialTarget(c.grpcAddr), err)
		return exitError
	}
	code := exitOK
	if resp.GetReason() != yesguardv1.Reason_REASON_REDEEMED {
		code = exitError
	}
	if c.json {
		b, err := protoJSON(resp)
		if err == nil {
			err = writeJSON(e.stdout, b)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard redeem: %v\n", err)
			return exitError
		}
		return code
	}
	p := newPrinter(e.stdout, e)
	head := p.paint(ansiBold+ansiRed, "REFUSED")
	if code == exitOK {
		head = p.paint(ansiBold+ansiGreen, "REDEEMED")
	}
	fmt.Fprintf(e.stdout, "%s %s  %s\n", head, reasonName(resp.GetReason()), resp.GetTool())
	line := func(label, text string) {
		if text != "" {
			fmt.Fprintf(e.stdout, "  %-9s %s\n", label, text)
		}
	}
	line("record", resp.GetDecisionId())
	line("allowed", resp.GetAllowedDecisionId())
	line("call", resp.GetCallId())
	line("receipt", resp.GetReceipt())
	if t := resp.GetExpiresAt(); t != nil {
		line("expires", t.AsTime().Local().Format(time.RFC3339))
	}
	if resp.GetReason() == yesguardv1.Reason_REASON_APPROVAL_MISMATCH {
		line("why", mismatchHint(req, len(pos) == 2))
	}
	line("backend", resp.GetMessage())
	return code
}

// mismatchHint says, in the CLI's terms, why an approval did not match
// the request: no arguments given (redeem compares the approval with the
// arguments about to be executed), or arguments, tool or call that differ.
func mismatchHint(req *yesguardv1.RedeemRequest, argsGiven bool) string {
	if !argsGiven {
		return "no arguments were given, and the approval is checked against the arguments about to be executed: " +
			"give them as one JSON object after the approval, as the Check had them, e.g. " +
			"yesguard redeem <approval> '{\"appeal_id\":\"A-17\"}'"
	}
	what := "the arguments given"
	if req.GetTool() != "" || req.GetCallId() != "" {
		what += " (or --tool, --call)"
	}
	return what + " differ from the approved ones: the approval executes only exactly what the caller approved"
}
