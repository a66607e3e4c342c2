package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/probe"
	"github.com/yesguard/yesguard/server"
)

// runProbe runs the buyer's probes against a running guard and exits 1
// when one fails.
func runProbe(ctx context.Context, args []string, e *env) int {
	const name = "probe"
	fs, c := clientFlagSet(name, "",
		"Runs the buyer's probes against a running guard over its public contract: transcript\n"+
			"events on NATS, Check, Complete and ListDecisions over gRPC, with real timing (each\n"+
			"caller answer lands --lag after the Check it answers). Prints PASS or FAIL for each\n"+
			"with its decision records; exits 0 when all pass, 1 when one fails or the guard\n"+
			"cannot be reached.", e, true, true)
	lag := fs.Duration("lag", 300*time.Millisecond, "how long after each Check the caller's answer is published")
	checkTimeout := fs.Duration("check-timeout", 5*time.Second, "each Check's deadline")
	callPrefix := fs.String("call-prefix", "", "`prefix` of the probe calls' ids; default probe-<unix ms>")
	noAck := fs.Bool("no-ack", false, "publish with core NATS and a flush, without JetStream's ack (which the server may drop silently under load)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on the whole run after this long")
	record := fs.String("record", "", "write the run's events and decision records to this JSONL `file`, for yesguard replay")
	auditorToken := fs.String("auditor-token", "", "bearer `token` with the auditor role, to read the records back (ListDecisions) "+
		"from a guard with --grpc-tokens when --token has only the pipeline's; prefer YESGUARD_AUDITOR_TOKEN")
	bindEnv(fs, "auditor-token")
	c.envNames = append(c.envNames, "auditor-token")
	if _, err := c.parse(fs, args, e, 0, 0); err != nil {
		return usageError(name, err, e)
	}
	if *lag <= 0 || *checkTimeout <= 0 {
		return usageError(name, fmt.Errorf("--lag and --check-timeout must be above 0"), e)
	}
	if *callPrefix != "" {
		if err := checkCallID(*callPrefix); err != nil {
			return usageError(name, fmt.Errorf("--call-prefix: %w", err), e)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	guard, cc, err := c.dialGuard()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard probe: %v\n", err)
		return exitUsage
	}
	defer cc.Close()
	reader := guard
	if *auditorToken != "" {
		r, rcc, err := c.dialGuardWith(*auditorToken)
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard probe: --auditor-token: %v\n", err)
			return exitUsage
		}
		defer rcc.Close()
		reader = r
	}
	target := dialTarget(c.grpcAddr)
	// Ask the health service first, so that a guard not there fails in
	// one line instead of seven. A deployment without it is probed anyway.
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	hresp, err := healthgrpc.NewHealthClient(cc).Check(hctx, &healthgrpc.HealthCheckRequest{Service: server.GuardService})
	hcancel()
	switch {
	case status.Code(err) == codes.Unimplemented || status.Code(err) == codes.NotFound:
	case err != nil:
		fmt.Fprintf(e.stderr, "yesguard probe: cannot reach the guard at %s: %v\n", target, err)
		return exitError
	case hresp.GetStatus() != healthgrpc.HealthCheckResponse_SERVING:
		fmt.Fprintf(e.stderr, "yesguard probe: warning: the guard at %s says %s: its transcript feed is down, so it refuses everything\n",
			target, hresp.GetStatus())
	}
	nc, err := c.connectNATS()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard probe: %v\n", err)
		return exitError
	}
	defer nc.Close()

	t := probe.Target{
		Guard: guard, Reader: reader, NATS: nc, Prefix: c.subjectPrefix,
		Lag: *lag, CheckTimeout: *checkTimeout, CallPrefix: *callPrefix, Acked: !*noAck,
	}
	var rec *recorder
	if *record != "" {
		if rec, err = newRecorder(*record); err != nil {
			fmt.Fprintf(e.stderr, "yesguard probe: --record: %v\n", err)
			return exitUsage
		}
		t.Record = rec.event
	}
	names := probe.Names()
	p := newPrinter(e.stdout, e)
	var progress func(probe.Result)
	if !c.json {
		fmt.Fprintf(e.stdout, "Probing the guard at %s: %d probes, transcripts to %s on %s.<call>, each answer %s after its Check.\n",
			target, len(names), auth.RedactURLs(c.natsURL), c.subjectPrefix, ms(*lag))
		i := 0
		progress = func(r probe.Result) {
			i++
			printResult(p, i, len(names), r)
		}
	}
	start := time.Now()
	results := probe.Run(ctx, t, progress)
	failed := probe.Failed(results)
	code := exitOK
	if failed > 0 {
		code = exitError
	}
	if rec != nil {
		if err := rec.finish(ctx, reader, results); err != nil {
			fmt.Fprintf(e.stderr, "yesguard probe: --record %s: %v\n", *record, err)
			code = exitError
		} else if !c.json {
			fmt.Fprintf(e.stdout, "Recorded the run to %s: yesguard replay %s\n", *record, *record)
		}
	}

	if c.json {
		if err := writeJSON(e.stdout, struct {
			Guard         string         `json:"guard"`
			NATS          string         `json:"nats"`
			SubjectPrefix string         `json:"subject_prefix"`
			Passed        int            `json:"passed"`
			Failed        int            `json:"failed"`
			DurationMS    int64          `json:"duration_ms"`
			Results       []probe.Result `json:"results"`
		}{target, auth.RedactURLs(c.natsURL), c.subjectPrefix, len(results) - failed, failed, time.Since(start).Milliseconds(), results}); err != nil {
			fmt.Fprintf(e.stderr, "yesguard probe: %v\n", err)
			return exitError
		}
		return code
	}
	fmt.Fprintln(e.stdout)
	if failed == 0 {
		fmt.Fprintf(e.stdout, "%s all %d probes passed in %.1fs.\n", p.paint(ansiBold+ansiGreen, "PASS:"), len(results), time.Since(start).Seconds())
	} else {
		fmt.Fprintf(e.stdout, "%s %d of %d probes failed.\n", p.paint(ansiBold+ansiRed, "FAIL:"), failed, len(results))
	}
	if probe.ReadDenied(results) {
		if *auditorToken == "" {
			fmt.Fprintf(e.stdout, "The guard would not show its records to this token: give a token with the auditor role in YESGUARD_AUDITOR_TOKEN (or --auditor-token).\n")
		} else {
			fmt.Fprintf(e.stdout, "The guard would not show its records to the --auditor-token: is it a token with the auditor role, bound to these calls?\n")
		}
	} else if len(results) > 0 && results[0].CallID != "" {
		fmt.Fprintf(e.stdout, "A call's full record: yesguard decisions %s\n", results[0].CallID)
	}
	return code
}

// printResult writes one probe's verdict and its decision records.
func printResult(p printer, i, n int, r probe.Result) {
	w := p.w
	verdict := p.paint(ansiBold+ansiGreen, "PASS")
	if !r.Pass {
		verdict = p.paint(ansiBold+ansiRed, "FAIL")
	}
	fmt.Fprintf(w, "\n%s  %d/%d  %s\n", verdict, i, n, r.Name)
	if r.CallID != "" {
		fmt.Fprintf(w, "      call %s\n", r.CallID)
	}
	fmt.Fprintf(w, "      want %s\n", r.Want)
	fmt.Fprintf(w, "      got  %s\n", r.Got)
	if r.Detail != "" && (!r.Pass || r.CallID == "") {
		fmt.Fprintf(w, "      %s\n", r.Detail)
	}
	if r.CallID == "" {
		// The log probe: its records are the other probes', shown there.
		for _, d := range r.Decisions {
			fmt.Fprintf(w, "      %s %s %s: %s\n", d.GetCallId(), outcomeName(d.GetOutcome()), reasonName(d.GetReason()), d.GetDecisionId())
		}
		return
	}
	for _, d := range r.Decisions {
		p.decision(d, "      ")
	}
}
