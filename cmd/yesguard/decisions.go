package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// runDecisions prints a call's evidence and refusal log.
func runDecisions(ctx context.Context, args []string, e *env) int {
	const name = "decisions"
	fs, c := clientFlagSet(name, "<call>",
		"Prints the call's decision records (ListDecisions), oldest first: one block per\n"+
			"decision with its outcome, reason, evidence and the message for the model.\n"+
			"Exits 1 when the guard holds none for the call.", e, true, false)
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	pos, err := c.parse(fs, args, e, 1, 1)
	if err != nil {
		return usageError(name, err, e)
	}
	call := pos[0]
	if err := checkCallID(call); err != nil {
		return usageError(name, err, e)
	}
	guard, cc, err := c.dialGuard()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard decisions: %v\n", err)
		return exitUsage
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// Page by page: one answer is bounded (in records and bytes) however
	// many records the call has.
	var ds []*yesguardv1.Decision
	for token := ""; ; {
		resp, err := guard.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: call, PageToken: token})
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard decisions: guard at %s: %v\n", dialTarget(c.grpcAddr), err)
			return exitError
		}
		ds = append(ds, resp.GetDecisions()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	code := exitOK
	if len(ds) == 0 {
		code = exitError
	}

	if c.json {
		out := struct {
			CallID    string            `json:"call_id"`
			Decisions []json.RawMessage `json:"decisions"`
		}{CallID: call, Decisions: []json.RawMessage{}}
		for _, d := range ds {
			b, err := protoJSON(d)
			if err != nil {
				fmt.Fprintf(e.stderr, "yesguard decisions: %v\n", err)
				return exitError
			}
			out.Decisions = append(out.Decisions, b)
		}
		if err := writeJSON(e.stdout, out); err != nil {
			fmt.Fprintf(e.stderr, "yesguard decisions: %v\n", err)
			return exitError
		}
		return code
	}
	if len(ds) == 0 {
		fmt.Fprintf(e.stderr, "yesguard decisions: the guard at %s holds no decisions for call %q "+
			"(no Check for it yet, or forgotten an hour after its last)\n", dialTarget(c.grpcAddr), call)
		return code
	}
	p := newPrinter(e.stdout, e)
	checks, refused, completes, redeems := 0, 0, 0, 0
	for _, d := range ds {
		switch {
		case d.GetKind() == yesguardv1.DecisionKind_DECISION_KIND_COMPLETE:
			completes++
		case d.GetKind() == yesguardv1.DecisionKind_DECISION_KIND_REDEEM:
			redeems++
		case d.GetOutcome() == yesguardv1.Outcome_OUTCOME_REFUSE:
			refused++
			checks++
		default:
			checks++
		}
	}
	head := fmt.Sprintf("call %s: %s, %d refused", call, plural(checks, "decision"), refused)
	if completes > 0 {
		head += ", " + plural(completes, "completion")
	}
	if redeems > 0 {
		head += ", " + plural(redeems, "redeem")
	}
	fmt.Fprintln(e.stdout, head)
	for _, d := range ds {
		fmt.Fprintln(e.stdout)
		p.decision(d, "")
	}
	return code
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
