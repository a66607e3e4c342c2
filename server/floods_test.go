package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/decisions"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// floodPublisher publishes as a pipeline does, through the guard's
// embedded NATS (the pipeline's account): JetStream publishes with acks.
type floodPublisher struct {
	t  *testing.T
	js jetstream.JetStream
}

func newFloodPublisher(t *testing.T, e *e2e) *floodPublisher {
	t.Helper()
	js, err := jetstream.New(e.pub)
	if err != nil {
		t.Fatal(err)
	}
	return &floodPublisher{t: t, js: js}
}

// publish stores ev and returns the stream's answer: nil, or the error
// the publisher is told.
func (p *floodPublisher) publish(ev transcript.Event) error {
	p.t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := fmt.Sprintf("%s.%s.%d.%d", ev.CallID, ev.Source, ev.Epoch, ev.Seq)
	_, err = p.js.Publish(ctx, DefaultSubjectPrefix+"."+ev.CallID, b, jetstream.WithMsgID(id))
	return err
}

func (p *floodPublisher) must(ev transcript.Event) {
	p.t.Helper()
	if err := p.publish(ev); err != nil {
		p.t.Fatalf("publish %s seq %d: %v", ev.CallID, ev.Seq, err)
	}
}

// ask publishes a question and a plain yes on call, from source (seqs 1
// and 2 of epoch 1).
func (p *floodPublisher) ask(call, source string) {
	p.t.Helper()
	p.must(event(call, transcript.Agent, source, 1, 1, "Shall I submit your appeal now?"))
	p.must(event(call, transcript.Caller, source, 1, 2, "Yes, please."))
}

// checkOutcome runs a Check of submit_appeal on call.
func checkOutcome(t *testing.T, e *e2e, call string) *yesguardv1.CheckResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.check(ctx, call, "submit_appeal", map[string]any{"appeal_id": "A-" + call})
	if err != nil {
		t.Fatalf("check %s: %v", call, err)
	}
	return resp
}

func wantOutcome(t *testing.T, what string, resp *yesguardv1.CheckResponse, outcome yesguardv1.Outcome, reason yesguardv1.Reason) {
	t.Helper()
	if resp.GetOutcome() != outcome || resp.GetReason() != reason {
		t.Errorf("%s: %v %v (%s), want %v %v", what, resp.GetOutcome(), resp.GetReason(), resp.GetDetail(), outcome, reason)
	}
}

// A flood of events on fresh call ids filled --max-calls, and every new
// call was then refused UNKNOWN_CALL until the idle TTL emptied the store.
// Now a publisher past its own bound churns through its own calls that
// never had a Check, a full store makes room the same way, and a call a
// Check asked about is never evicted: a new call after the flood is
// allowed, and the call checked before it is still held.
func TestFloodOfCallIDsLocksNoCallOut(t *testing.T) {
	for _, tc := range []struct {
		name        string
		floodSource string // the flood's publisher; "stt" is the pipeline's own
	}{
		{"another publisher", "flood"},
		{"the pipeline's own source", "stt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startE2E(t, func(c *Config) {
				c.Limits.MaxCalls, c.Limits.MaxCallsPerPublisher = 40, 20
			})
			p := newFloodPublisher(t, e)
			p.ask("held-1", "stt")
			wantOutcome(t, "the call checked before the flood", checkOutcome(t, e, "held-1"), yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED)

			before := e.eventsSeen()
			const flood = 300
			for i := range flood {
				p.must(event(fmt.Sprintf("flood-%d", i), transcript.Caller, tc.floodSource, 1, 1, "hi"))
			}
			e.waitApplied(before, flood)
			if n := e.srv.store.Len(); n > 40 {
				t.Errorf("the store holds %d calls, above --max-calls 40", n)
			}

			p.ask("new-1", "stt")
			wantOutcome(t, "a new call after the flood", checkOutcome(t, e, "new-1"), yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED)
			if snap, _ := e.srv.store.Snapshot("held-1"); !snap.Exists {
				t.Error("the call whose ALLOW is reserved was evicted by the flood")
			}
			if got := counterValue(t, e, "yesguard_transcript_calls_evicted_total", "cause", "pressure"); got < flood-40 {
				t.Errorf("calls evicted under pressure: %v, want at least %d", got, flood-40)
			}
		})
	}
}

// A Check in flight on a call keeps it: the flood cannot evict it from
// under the Check, which then judges the caller's words.
func TestFloodOfCallIDsSparesACheckInFlight(t *testing.T) {
	e := startE2E(t, func(c *Config) { c.Limits.MaxCalls, c.Limits.MaxCallsPerPublisher = 40, 40 })
	p := newFloodPublisher(t, e)
	p.must(event("wait-1", transcript.Agent, "stt", 1, 1, "Shall I submit your appeal now?"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan *yesguardv1.CheckResponse, 1)
	go func() {
		resp, err := e.check(ctx, "wait-1", "submit_appeal", map[string]any{"appeal_id": "A-wait-1"})
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	eventuallyFor(t, "the Check in flight", func() bool { return (&replica{t: t, reg: e.reg}).inFlight() == 1 })
	before := e.eventsSeen()
	for i := range 200 {
		p.must(event(fmt.Sprintf("flood-%d", i), transcript.Caller, "stt", 1, 1, "hi"))
	}
	e.waitApplied(before, 200)
	p.must(event("wait-1", transcript.Caller, "stt", 1, 2, "Yes, please."))
	wantOutcome(t, "the Check in flight through the flood", <-done, yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED)
}

// A flood on one call's subject starved the Checks of other calls: the
// per-call rate limit dropped its events only after the stream stored
// them and the guard read them. Now the stream holds at most
// --max-events-per-call events of a call and refuses the rest to their
// publisher, who sees why; the guard reads no more of the flood, the
// flooded call refuses (its next words would be refused too), and the
// other calls are judged.
func TestFloodOnOneSubjectIsRefusedAtTheStream(t *testing.T) {
	const perCall = 50
	e := startE2E(t, func(c *Config) { c.Limits.MaxEventsPerCall, c.Limits.MaxEventsPerSecond = perCall, 10000 })
	p := newFloodPublisher(t, e)
	p.ask("flooded", "stt")
	var refused error
	for i := 3; i <= 4*perCall; i++ {
		err := p.publish(event("flooded", transcript.Caller, "stt", 1, uint64(i), "flood"))
		if err != nil {
			refused = err
			break
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum messages per subject exceeded") {
		t.Fatalf("the flood's publisher was told %v, want the stream's per-subject limit", refused)
	}
	s, err := jetstream.New(e.srv.nc.Load())
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stream(t.Context(), TranscriptStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(DefaultSubjectPrefix+".flooded"))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[DefaultSubjectPrefix+".flooded"]; n != perCall {
		t.Errorf("the stream holds %d events of the flooded call, want its bound %d", n, perCall)
	}
	p.ask("other-1", "stt")
	wantOutcome(t, "another call", checkOutcome(t, e, "other-1"), yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED)
	resp := checkOutcome(t, e, "flooded")
	wantOutcome(t, "the flooded call", resp, yesguardv1.Outcome_OUTCOME_REFUSE, yesguardv1.Reason_REASON_TRANSCRIPT_GAP)
	if !strings.Contains(resp.GetDetail(), "--max-events-per-call") {
		t.Errorf("the flooded call's refusal %q does not name the limit", resp.GetDetail())
	}
	if got := counterValue(t, e, "yesguard_transcript_limit_hits_total", "limit", "events_per_call"); got != 1 {
		t.Errorf("limit_hits_total{limit=events_per_call} = %v, want 1", got)
	}
}

// Overrunning the transcript stream made it discard events before the
// guard applied them, silently for their publishers, and every call was
// refused. Now the stream refuses a new event past its bound (the
// publisher is told, and retries with the same message id), and the guard
// makes room from 90% full by purging the oldest events it has applied:
// a flood of three times the stream loses no event a Check needs, and
// locks no call out. (TestStreamOverrunWhileStalledRefusesThePublisher,
// in package transcript, is the replica that lags and cannot make room.)
func TestOverrunStreamRefusesPublishersNeverDiscards(t *testing.T) {
	e := startE2E(t, func(c *Config) { c.TranscriptMaxBytes = 1 << 20 })
	p := newFloodPublisher(t, e)
	p.ask("live-1", "stt")
	text := strings.Repeat("flood ", 680) // about 4 KB
	told := 0
	for i := range 768 { // 3 MB: three times the stream
		if i == 400 {
			retried(t, p, event("live-1", transcript.Caller, "stt", 1, 3, "Wait, no."))
		}
		if err := p.publish(event(fmt.Sprintf("over-%d", i), transcript.Caller, "flood", 1, 1, text)); err != nil {
			if !strings.Contains(err.Error(), "maximum bytes exceeded") {
				t.Fatalf("flood publish %d: %v", i, err)
			}
			told++
		}
	}
	t.Logf("%d flood publishes were refused to their publisher", told)
	wantOutcome(t, "the live call whose no came mid-flood", checkOutcome(t, e, "live-1"), yesguardv1.Outcome_OUTCOME_REFUSE, yesguardv1.Reason_REASON_NEGATED)
	eventuallyFor(t, "the guard makes room", func() bool {
		return counterValue(t, e, "yesguard_transcript_limit_hits_total", "limit", "stream_bytes") >= 1
	})
	p.ask("new-1", "stt")
	wantOutcome(t, "a new call after the flood", checkOutcome(t, e, "new-1"), yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED)
	if got := counterValue(t, e, "yesguard_transcript_events_rejected_total", "reason", transcript.ReasonStreamDiscarded); got != 0 {
		t.Errorf("%v events discarded before the guard applied them", got)
	}
}

// retried publishes ev until the stream takes it, with the same message
// id, as a publisher told "maximum bytes exceeded" does.
func retried(t *testing.T, p *floodPublisher, ev transcript.Event) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := p.publish(ev)
		if err == nil {
			return
		}
		if attempt == 100 {
			t.Fatalf("publish %s: %v", ev.CallID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// counterValue is the value of the counter name with label = value in
// e's registry (0 when absent).
func counterValue(t *testing.T, e *e2e, name, label, value string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// notePolicy has a tool that needs no confirmation: each Check of it is
// an ALLOW at once, so a test can stuff a call with records quickly.
const notePolicy = "tools:\n  note:\n    confirm: false\n"

// stuff writes n records of about 60 KB (their arguments) on call, eight
// Checks at a time.
func stuff(t *testing.T, client yesguardv1.GuardClient, call string, n int) {
	t.Helper()
	blob := strings.Repeat("x", 60000)
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			args, err := structpb.NewStruct(map[string]any{"n": i, "blob": blob})
			if err != nil {
				errs <- err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resp, err := client.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: "note", Args: args})
			if err == nil && resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
				err = fmt.Errorf("check %d: %v %v", i, resp.GetOutcome(), resp.GetReason())
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A call stuffed with large decision records broke the audit tools:
// ListDecisions answered ResourceExhausted (60 MB against gRPC's 4 MB), a
// page view rendered 630 MB of HTML, and reading the records dropped the
// connection the Checks ran on. Now a record is bounded, a ListDecisions
// page ends at its byte budget with a token for the next, the call page
// shows one page with a link to the next, and the records are read on a
// NATS connection of their own.
func TestStuffedCallPagesUnderTheLimits(t *testing.T) {
	e := startE2E(t, withPolicy(notePolicy), func(c *Config) { c.HTTPAddr = "127.0.0.1:0" })
	const call, n = "stuffed", 80 // 80 records of 60 KB: 4.8 MB, over gRPC's 4 MiB
	stuff(t, e.client, call, n)

	main, audit := e.srv.nc.Load(), e.srv.auditNC.Load()
	if audit == nil || audit == main {
		t.Fatal("the decision records are read on the Checks' own connection")
	}
	mainIn, auditIn := main.Stats().InBytes, audit.Stats().InBytes

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen, pages := map[string]bool{}, 0
	for token := ""; ; {
		resp, err := e.client.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: call, PageToken: token, IncludeTranscript: true})
		if err != nil {
			t.Fatalf("ListDecisions page %d: %v", pages+1, err)
		}
		pages++
		if size := proto.Size(resp); size > 4<<20 {
			t.Errorf("page %d is %d bytes, over gRPC's 4 MiB", pages, size)
		}
		for _, d := range resp.GetDecisions() {
			if proto.Size(d) > decisions.MaxRecordBytes {
				t.Errorf("record %s is %d bytes, over the bound", d.GetDecisionId(), proto.Size(d))
			}
			seen[d.GetDecisionId()] = true
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seen) != n || pages < 2 {
		t.Errorf("paged through %d records in %d pages, want %d in at least 2", len(seen), pages, n)
	}
	if got := audit.Stats().InBytes - auditIn; got < 4<<20 {
		t.Errorf("the audit connection read %d bytes, want the records' 4.8 MB", got)
	}
	if got := main.Stats().InBytes - mainIn; got > 1<<20 {
		t.Errorf("the Checks' connection read %d bytes while the records were listed", got)
	}

	// The call page: one page of records, and a link to the next.
	pageURL := "http://" + e.srv.HTTPAddr() + "/calls/" + call
	for pages = 0; pageURL != ""; pages++ {
		code, body := httpGet(t, pageURL)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%.500s", pageURL, code, body)
		}
		if len(body) > 8<<20 {
			t.Errorf("call page %d is %d bytes", pages+1, len(body))
		}
		pageURL = ""
		if _, rest, ok := strings.Cut(body, `<a href="/calls/`+call+`?`); ok && strings.Contains(rest[:200], "Next records") {
			href, _, _ := strings.Cut(rest, `"`)
			pageURL = "http://" + e.srv.HTTPAddr() + "/calls/" + call + "?" + strings.ReplaceAll(href, "&amp;", "&")
		}
		if pages > n {
			t.Fatal("the call pages never end")
		}
	}
	// A page holds at most 50 records, and fewer when their bytes reach
	// a ListDecisions page's budget.
	if want := (n + 49) / 50; pages < want {
		t.Errorf("the call took %d pages, want at least %d", pages, want)
	}
}
