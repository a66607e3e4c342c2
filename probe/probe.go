// Package probe runs the buyer's probes against a running guard, through
// its public contract only: transcript events published to NATS and Check,
// Complete and ListDecisions over gRPC, with real timing (each caller answer
// lands after the Check that it answers, as in a real pipeline).
//
// The probes assume the guard judges the tool "submit_appeal" as needing a
// confirmation about submitting an appeal, which any policy that does not
// list it gives (verb and object come from the tool's name).
package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// Tool is the tool every probe asks about.
const Tool = "submit_appeal"

// Target is a running guard.
type Target struct {
	// Guard makes the Checks and Completes (the pipeline's role, behind
	// tokens).
	Guard yesguardv1.GuardClient
	// Reader reads the decision records back (ListDecisions: the auditor's
	// role, behind tokens); nil reads them with Guard, as a guard without
	// tokens lets it.
	Reader yesguardv1.GuardClient
	NATS   *nats.Conn
	// Prefix is the transcript subject prefix (yesguard.transcript).
	Prefix string
	// Lag is how long after the Check the caller's answer is published:
	// the race a real pipeline has. Default 300ms.
	Lag time.Duration
	// CheckTimeout is each Check's deadline. Default 5s.
	CheckTimeout time.Duration
	// CallPrefix names the probe calls; default "probe-<unix ms>".
	CallPrefix string
	// Record, when set, is given each event just before it is published,
	// with that moment: the guard cannot have it earlier (yesguard probe
	// --record writes a recording for yesguard replay from it).
	Record func(ev transcript.Event, at time.Time)
	// Acked publishes each event with JetStream and waits for its ack
	// (PublishAcked); without, a core publish and a flush, which the
	// server may drop silently under load. The guard's memory state has
	// no stream, so nothing acks there.
	Acked bool
}

// Result is one probe's verdict.
type Result struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	CallID string `json:"call_id"`
	// Detail says what went wrong, or what was seen.
	Detail string `json:"detail,omitempty"`
	// Decisions are the records the probe's checks left; in JSON, each is
	// the record as protojson writes it (the decision log's shape).
	Decisions []*yesguardv1.Decision `json:"-"`
	// readErr is why the records could not be read back, if they could not.
	readErr error
}

// ReadDenied reports whether reading a probe's records back was refused
// for the caller's credentials (PermissionDenied or Unauthenticated):
// behind tokens, ListDecisions needs a token with the auditor role.
func ReadDenied(results []Result) bool {
	for _, r := range results {
		if c := status.Code(r.readErr); c == codes.PermissionDenied || c == codes.Unauthenticated {
			return true
		}
	}
	return false
}

// MarshalJSON writes the result with its decisions in protojson.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // without the method
	out := struct {
		plain
		Decisions []json.RawMessage `json:"decisions"`
	}{plain: plain(r), Decisions: []json.RawMessage{}}
	for _, d := range r.Decisions {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("decision %s: %w", d.GetDecisionId(), err)
		}
		out.Decisions = append(out.Decisions, b)
	}
	return json.Marshal(out)
}

// Failed counts the results that did not pass.
func Failed(results []Result) int {
	n := 0
	for _, r := range results {
		if !r.Pass {
			n++
		}
	}
	return n
}

type line struct {
	speaker transcript.Speaker
	text    string
}

// scenario is one probe: lines published before the Check, the answer
// published Lag after it, and the outcomes it passes with.
type scenario struct {
	name   string
	before []line
	answer string
	want   []yesguardv1.Outcome
}

var scenarios = []scenario{
	{name: "okay to an announcement is refused", before: []line{{transcript.Agent, "I will now submit the request."}}, answer: "Okay.",
		want: []yesguardv1.Outcome{yesguardv1.Outcome_OUTCOME_REFUSE}},
	{name: "yes with a question is refused", before: []line{{transcript.Agent, "Shall I submit your appeal now?"}}, answer: "Yes, but does that cost extra?",
		want: []yesguardv1.Outcome{yesguardv1.Outcome_OUTCOME_REFUSE}},
	{name: "pre-emptive yes before any question is refused", answer: "Yes, go ahead.",
		want: []yesguardv1.Outcome{yesguardv1.Outcome_OUTCOME_REFUSE}},
	{name: "rambling yes is refused", before: []line{{transcript.Agent, "Shall I submit your appeal now?"}},
		answer: "Well I was thinking about it last night and talked it over with my sister and in the end I figured it is probably fine so yes",
		want:   []yesguardv1.Outcome{yesguardv1.Outcome_OUTCOME_REFUSE}},
	{name: "yes then no writes nothing", before: []line{{transcript.Agent, "Shall I submit your appeal now?"}}, answer: "Yes. Wait, no.",
		want: []yesguardv1.Outcome{yesguardv1.Outcome_OUTCOME_REFUSE}},
}

// Names lists the probes in the order Run runs them.
func Names() []string {
	out := make([]string, 0, len(scenarios)+2)
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return append(out, twoYesesName, logName)
}

const (
	twoYesesName = "two yeses give one action"
	logName      = "every refusal has its log line"
)

// Run runs every probe in order and returns their results. progress, if
// not nil, is called as each probe ends.
func Run(ctx context.Context, t Target, progress func(Result)) []Result {
	t.setDefaults()
	r := &runner{t: t}
	var results []Result
	emit := func(res Result) {
		results = append(results, res)
		if progress != nil {
			progress(res)
		}
	}
	for _, s := range scenarios {
		emit(r.scenario(ctx, s))
	}
	emit(r.twoYeses(ctx))
	emit(r.logLines(ctx, results))
	return results
}

func (t *Target) setDefaults() {
	if t.Reader == nil {
		t.Reader = t.Guard
	}
	if t.Prefix == "" {
		t.Prefix = "yesguard.transcript"
	}
	if t.Lag == 0 {
		t.Lag = 300 * time.Millisecond
	}
	if t.CheckTimeout == 0 {
		t.CheckTimeout = 5 * time.Second
	}
	if t.CallPrefix == "" {
		t.CallPrefix = fmt.Sprintf("probe-%d", time.Now().UnixMilli())
	}
}

type runner struct {
	t     Target
	calls atomic.Int64
	seqMu sync.Mutex
	seqs  map[string]uint64
}

func (r *runner) newCall() string {
	return fmt.Sprintf("%s-%d", r.t.CallPrefix, r.calls.Add(1))
}

// say publishes a final transcript event and flushes it to the server.
func (r *runner) say(call string, sp transcript.Speaker, text string) error {
	r.seqMu.Lock()
	if r.seqs == nil {
		r.seqs = map[string]uint64{}
	}
	r.seqs[call]++
	seq := r.seqs[call]
	r.seqMu.Unlock()
	ev := transcript.Event{
		CallID: call, Seq: seq, Speaker: sp, Type: transcript.TypeTranscript,
		Text: text, Final: true, Lang: "en",
	}
	if r.t.Record != nil {
		r.t.Record(ev, time.Now())
	}
	if r.t.Acked {
		js, err := jetstream.New(r.t.NATS)
		if err != nil {
			return err
		}
		return PublishAcked(context.Background(), js, r.t.Prefix, ev)
	}
	return Publish(r.t.NATS, r.t.Prefix, ev)
}

// Publish sends one transcript event and waits until the server has it.
func Publish(nc *nats.Conn, prefix string, ev transcript.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := nc.Publish(prefix+"."+ev.CallID, b); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("publish: flush: %w", err)
	}
	return nil
}

func (r *runner) check(ctx context.Context, call string) (*yesguardv1.CheckResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.t.CheckTimeout)
	defer cancel()
	args, _ := structpb.NewStruct(map[string]any{"appeal_id": "PROBE-1"})
	return r.t.Guard.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: Tool, Args: args, IncludeEvidence: true})
}

// racedCheck starts the Check, then publishes the answer Lag later.
func (r *runner) racedCheck(ctx context.Context, call, answer string) (*yesguardv1.CheckResponse, error) {
	type res struct {
		resp *yesguardv1.CheckResponse
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		resp, err := r.check(ctx, call)
		ch <- res{resp, err}
	}()
	select {
	case <-time.After(r.t.Lag):
	case <-ctx.Done():
	}
	if err := r.say(call, transcript.Caller, answer); err != nil {
		return nil, err
	}
	got := <-ch
	return got.resp, got.err
}

func (r *runner) scenario(ctx context.Context, s scenario) Result {
	call := r.newCall()
	res := Result{Name: s.name, CallID: call, Want: outcomeNames(s.want)}
	for _, l := range s.before {
		if err := r.say(call, l.speaker, l.text); err != nil {
			res.Got, res.Detail = "error", err.Error()
			return res
		}
	}
	resp, err := r.racedCheck(ctx, call, s.answer)
	if err != nil {
		res.Got, res.Detail = "error", err.Error()
		return res
	}
	res.Got = describe(resp)
	res.Decisions, res.readErr = r.decisions(ctx, call)
	for _, w := range s.want {
		if resp.GetOutcome() == w {
			res.Pass = true
		}
	}
	if resp.GetEvidence().GetAnswer().GetText() != s.answer {
		res.Pass = false
		res.Detail = fmt.Sprintf("judged %q, not the caller's answer %q: the guard did not wait for the current turn", resp.GetEvidence().GetAnswer().GetText(), s.answer)
	} else {
		res.Detail = resp.GetEvidence().GetDetail()
	}
	return res
}

// twoYeses: the caller says yes twice and the model calls the tool twice
// at once; exactly one ALLOW may come of it.
func (r *runner) twoYeses(ctx context.Context) Result {
	call := r.newCall()
	res := Result{Name: twoYesesName, CallID: call, Want: "one OUTCOME_ALLOW, one OUTCOME_DUPLICATE"}
	if err := r.say(call, transcript.Agent, "Shall I submit your appeal now?"); err != nil {
		res.Got, res.Detail = "error", err.Error()
		return res
	}
	type out struct {
		resp *yesguardv1.CheckResponse
		err  error
	}
	outs := make(chan out, 2)
	go func() { resp, err := r.racedCheck(ctx, call, "Yes."); outs <- out{resp, err} }()
	go func() {
		select {
		case <-time.After(r.t.Lag / 2):
		case <-ctx.Done():
		}
		resp, err := r.check(ctx, call)
		outs <- out{resp, err}
	}()
	var allows, dups int
	var allowID string
	var got []string
	for range 2 {
		o := <-outs
		if o.err != nil {
			res.Got, res.Detail = "error", o.err.Error()
			return res
		}
		got = append(got, describe(o.resp))
		switch o.resp.GetOutcome() {
		case yesguardv1.Outcome_OUTCOME_ALLOW:
			allows++
			allowID = o.resp.GetDecisionId()
			// Report the tool's result so the duplicate gets it.
			result, _ := structpb.NewStruct(map[string]any{"probe": "done"})
			if _, err := r.t.Guard.Complete(ctx, &yesguardv1.CompleteRequest{DecisionId: allowID, Result: result}); err != nil {
				res.Detail = "complete: " + err.Error()
			}
		case yesguardv1.Outcome_OUTCOME_DUPLICATE:
			dups++
		}
	}
	// A second yes, and the model calls again: still one action.
	if err := r.say(call, transcript.Caller, "Yes!"); err == nil {
		if resp, err := r.check(ctx, call); err == nil {
			got = append(got, describe(resp))
			if resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW {
				allows++
			}
		}
	}
	res.Got = fmt.Sprint(got)
	res.Decisions, res.readErr = r.decisions(ctx, call)
	res.Pass = allows == 1 && dups >= 1
	if !res.Pass && res.Detail == "" {
		res.Detail = fmt.Sprintf("%d allows", allows)
	}
	return res
}

// logLines: every refused probe left a decision record with its reason
// and a message for the model, found by ListDecisions. Records that could
// not be read are that error, not a count of zero.
func (r *runner) logLines(ctx context.Context, earlier []Result) Result {
	res := Result{Name: logName, Want: "a record with a reason and a message for each refusal", Pass: true}
	for _, e := range earlier {
		if e.readErr != nil {
			res.Pass, res.readErr = false, e.readErr
			res.Got = "records not readable: " + status.Code(e.readErr).String()
			res.Detail = readError(e.readErr)
			return res
		}
	}
	n := 0
	for _, e := range earlier {
		recs, _ := r.decisions(ctx, e.CallID)
		for _, d := range recs {
			if d.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE {
				continue
			}
			n++
			if d.GetReason() == yesguardv1.Reason_REASON_UNSPECIFIED || d.GetMessage() == "" || d.GetDecisionId() == "" {
				res.Pass = false
				res.Detail = fmt.Sprintf("record %s of %s lacks a reason or message", d.GetDecisionId(), e.CallID)
			}
			res.Decisions = append(res.Decisions, d)
		}
		if !e.Pass || e.Name == twoYesesName {
			continue
		}
		if len(recs) == 0 {
			res.Pass = false
			res.Detail = "no record for " + e.CallID
		}
	}
	res.Got = fmt.Sprintf("%d refusal records", n)
	if n < len(scenarios) {
		res.Pass = false
		if res.Detail == "" {
			res.Detail = fmt.Sprintf("want at least %d refusal records", len(scenarios))
		}
	}
	return res
}

// decisions returns the call's Check records (not its Completes).
func (r *runner) decisions(ctx context.Context, call string) ([]*yesguardv1.Decision, error) {
	resp, err := r.t.Reader.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: call})
	if err != nil {
		return nil, fmt.Errorf("ListDecisions %s: %w", call, err)
	}
	var out []*yesguardv1.Decision
	for _, d := range resp.GetDecisions() {
		if k := d.GetKind(); k == yesguardv1.DecisionKind_DECISION_KIND_CHECK || k == yesguardv1.DecisionKind_DECISION_KIND_UNSPECIFIED {
			out = append(out, d)
		}
	}
	return out, nil
}

// readError says why the records could not be read, and what reads them.
func readError(err error) string {
	st := status.Convert(err)
	msg := fmt.Sprintf("ListDecisions refused (%s): %s", st.Code(), st.Message())
	if c := st.Code(); (c == codes.PermissionDenied || c == codes.Unauthenticated) && !strings.Contains(st.Message(), "auditor") {
		msg += "; reading decision records needs a token with the auditor role"
	}
	return msg
}

func describe(resp *yesguardv1.CheckResponse) string {
	return resp.GetOutcome().String() + "/" + resp.GetReason().String()
}

func outcomeNames(os []yesguardv1.Outcome) string {
	s := ""
	for i, o := range os {
		if i > 0 {
			s += " or "
		}
		s += o.String()
	}
	return s
}
