package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/replay"
	"github.com/yesguard/yesguard/transcript"
)

// runReplay re-judges recorded calls under the current policy and prints
// each decision beside the recorded one: exit 0 when every decision is the
// same, 1 when one changed or the recording cannot be read, 2 for bad
// flags.
func runReplay(ctx context.Context, args []string, e *env) int {
	const name = "replay"
	fs, c := clientFlagSet(name, "[FILE]",
		"Re-judges recorded calls under the policy and locales given here (as serve's) and prints\n"+
			"each decision beside the one recorded at the time, marking those that changed. The\n"+
			"recording is a JSONL FILE of events and decision records (yesguard probe --record writes\n"+
			"one; the format is in the README, \"Replaying calls\"), or, without FILE, one call (--call)\n"+
			"read from the guard over gRPC (ListDecisions with its events: behind tokens, an auditor's\n"+
			"token in YESGUARD_TOKEN), or with --from-streams from its streams on NATS JetStream.\n"+
			"Exits 0 when every decision is the same, 1 when one changed.", e, true, true)
	policy := fs.String("policy", "", "policy YAML `file` to judge under; empty: the default policy")
	locales := fs.String("locales-dir", "", "`dir`ectory of <lang>.yaml locales loaded over the built-in ones")
	call := fs.String("call", "", "the call to replay (required without FILE; with FILE, only this call)")
	fromStreams := fs.Bool("from-streams", false, "read --call from the guard's JetStream streams (--nats-url, with a NATS user that may read them) instead of over gRPC")
	s := replay.DefaultStreams
	fs.StringVar(&s.TranscriptStream, "transcript-stream", s.TranscriptStream, "JetStream `stream` of the transcript events")
	fs.StringVar(&s.DecisionStream, "decision-stream", s.DecisionStream, "JetStream `stream` of the decision records")
	fs.StringVar(&s.DecisionPrefix, "decision-prefix", s.DecisionPrefix, "decision records are on <`prefix`>.<call_id>")
	timeout := fs.Duration("timeout", time.Minute, "give up reading the call after this long")
	// Not the nats clients' default (_INBOX), which the pipeline's user
	// may read: what replay reads must reach only replay.
	fs.StringVar(&c.natsAuth.InboxPrefix, "nats-inbox-prefix", auth.DefaultCLIInbox,
		"the NATS `prefix` of the replies to this client (its permissions should let only it subscribe there)")
	pos, err := c.parse(fs, args, e, 0, 1)
	if err != nil {
		return usageError(name, err, e)
	}
	s.TranscriptPrefix = c.subjectPrefix

	var calls []*replay.Call
	if len(pos) == 1 {
		f, err := os.Open(pos[0])
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard replay: %v\n", err)
			return exitError
		}
		rec, err := replay.ReadJSONL(f)
		_ = f.Close()
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard replay: %s: %v\n", pos[0], err)
			return exitError
		}
		calls = rec.Calls
		if *call != "" {
			one := rec.Call(*call)
			if one == nil {
				fmt.Fprintf(e.stderr, "yesguard replay: %s holds no call %q\n", pos[0], *call)
				return exitError
			}
			calls = []*replay.Call{one}
		}
	} else {
		if *call == "" {
			return usageError(name, fmt.Errorf("give a recording FILE, or --call to read one call from the guard"), e)
		}
		if err := checkCallID(*call); err != nil {
			return usageError(name, fmt.Errorf("--call: %w", err), e)
		}
		rctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		read := readFromGuard
		if *fromStreams {
			read = func(ctx context.Context, c *clientFlags, call string) (*replay.Call, error) {
				return readFromStreams(ctx, c, s, call)
			}
		}
		one, err := read(rctx, c, *call)
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard replay: %v\n", err)
			return exitError
		}
		if len(one.Events) == 0 {
			fmt.Fprintf(e.stderr, "yesguard replay: warning: no transcript events of %s are held any more (past the transcript stream's retention?): its Checks are re-judged on none\n", *call)
		}
		calls = []*replay.Call{one}
	}

	var results []*replay.Result
	code := exitOK
	for _, rc := range calls {
		res, err := replay.Replay(ctx, rc, replay.Options{Policy: *policy, LocalesDir: *locales})
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard replay: %v\n", err)
			return exitUsage
		}
		if res.Changed() > 0 {
			code = exitError
		}
		results = append(results, res)
	}
	if c.json {
		if err := replay.JSON(e.stdout, results); err != nil {
			fmt.Fprintf(e.stderr, "yesguard replay: %v\n", err)
			return exitError
		}
		return code
	}
	replay.Text(e.stdout, results)
	return code
}

// readFromStreams reads one call from the guard's JetStream streams.
func readFromStreams(ctx context.Context, c *clientFlags, s replay.Streams, callID string) (*replay.Call, error) {
	nc, err := c.connectNATS()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return replay.ReadStreams(ctx, js, s, callID)
}

// readFromGuard reads one call over gRPC: every page of its records, and
// its transcript events.
func readFromGuard(ctx context.Context, c *clientFlags, callID string) (*replay.Call, error) {
	guard, cc, err := c.dialGuard()
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	records, events, err := listCall(ctx, guard, callID, true)
	if err != nil {
		if code := status.Code(err); code == codes.PermissionDenied || code == codes.Unauthenticated {
			return nil, fmt.Errorf("read %s from the guard at %s: %w (replay reads with the auditor role: give an auditor's token in YESGUARD_TOKEN)", callID, dialTarget(c.grpcAddr), err)
		}
		return nil, fmt.Errorf("read %s from the guard at %s: %w", callID, dialTarget(c.grpcAddr), err)
	}
	return replay.FromGuard(callID, records, events)
}

// listCall reads every page of a call's records with ListDecisions and,
// when events is set, its transcript events, which come with the first
// page.
func listCall(ctx context.Context, guard yesguardv1.GuardClient, callID string, events bool) ([]*yesguardv1.Decision, []*yesguardv1.ReceivedEvent, error) {
	var (
		records []*yesguardv1.Decision
		evs     []*yesguardv1.ReceivedEvent
		token   string
	)
	for {
		first := token == ""
		resp, err := guard.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: callID, PageToken: token, IncludeEvents: events && first})
		if err != nil {
			return nil, nil, err
		}
		records = append(records, resp.GetDecisions()...)
		if first {
			evs = resp.GetEvents()
		}
		if token = resp.GetNextPageToken(); token == "" {
			return records, evs, nil
		}
	}
}

// recorder writes a probe run as a recording: each event as the probe
// publishes it, then every record of the run's calls.
type recorder struct {
	mu sync.Mutex
	f  *os.File
	w  *replay.Writer
}

func newRecorder(path string) (*recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &recorder{f: f, w: replay.NewWriter(f)}, nil
}

func (r *recorder) event(ev transcript.Event, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.Event(ev, at)
}

// finish writes the records of the probe calls (all kinds: Completes too)
// and closes the file.
func (r *recorder) finish(ctx context.Context, guard yesguardv1.GuardClient, results []probe.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range results {
		if res.CallID == "" {
			continue
		}
		records, _, err := listCall(ctx, guard, res.CallID, false)
		if err != nil {
			_ = r.f.Close()
			return fmt.Errorf("list decisions of %s: %w", res.CallID, err)
		}
		for _, d := range records {
			r.w.Decision(d)
		}
	}
	if err := r.w.Err(); err != nil {
		_ = r.f.Close()
		return err
	}
	return r.f.Close()
}
