package server

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

func grpcEvents(e *e2e, result string) float64 {
	return testutil.ToFloat64(e.srv.tmetrics.GRPCEvents.WithLabelValues(result))
}

func turnEvent(call, speaker, text string) *yesguardv1.TranscriptEvent {
	return &yesguardv1.TranscriptEvent{CallId: call, Type: "transcript", Speaker: speaker, Text: text, Final: true, Lang: "en"}
}

// A pipeline that holds only the gRPC connection publishes its transcript
// through the guard: the Check judges it as it judges NATS's events, and
// a retried request (the same source, epoch and seq) is stored once.
func TestPublishTranscriptClientNumbered(t *testing.T) {
	e := startE2E(t)
	call := "grpc-client-numbered"
	q, yes := turnEvent(call, "agent", "Shall I submit your appeal A-17 now?"), turnEvent(call, "caller", "Yes, please.")
	q.Source, q.Epoch, q.Seq = "py", 7, 1
	yes.Source, yes.Epoch, yes.Seq = "py", 7, 2
	req := &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{q, yes}}
	resp, err := e.client.PublishTranscript(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetEvents()) != 2 || resp.GetEvents()[1].GetSeq() != 2 || resp.GetEvents()[1].GetDuplicate() {
		t.Fatalf("published %v, want 2 events stored under their own seqs", resp.GetEvents())
	}
	again, err := e.client.PublishTranscript(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range again.GetEvents() {
		if !ev.GetDuplicate() || ev.GetStreamSeq() != resp.GetEvents()[i].GetStreamSeq() {
			t.Errorf("retried event %d: %v, want the duplicate of stream seq %d", i, ev, resp.GetEvents()[i].GetStreamSeq())
		}
	}
	d, err := e.check(t.Context(), call, "submit_appeal", map[string]any{"appeal_id": "A-17"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("Check: %v %v (%s), want ALLOW", d.GetOutcome(), d.GetReason(), d.GetDetail())
	}
	if got := d.GetEvidence().GetAnswer().GetText(); got != "Yes, please." {
		t.Errorf("answer %q, want the caller's one turn (the retry stored nothing)", got)
	}
	if s, dup := grpcEvents(e, transcript.WriteStored), grpcEvents(e, transcript.WriteDuplicate); s != 2 || dup != 2 {
		t.Errorf("grpc events stored %v, duplicate %v; want 2 and 2", s, dup)
	}
}

// With guard_sequenced the guard numbers each (call, source) from 1 under
// its own epoch, and refuses events that bring their own numbers.
func TestPublishTranscriptGuardNumbered(t *testing.T) {
	e := startE2E(t)
	call := "grpc-guard-numbered"
	var seqs []uint64
	for _, ev := range []*yesguardv1.TranscriptEvent{
		turnEvent(call, "agent", "Shall I submit your appeal A-17 now?"),
		turnEvent(call, "caller", "Yes. Wait, no."),
	} {
		resp, err := e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{ev}, GuardSequenced: true})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.GetEvents()[0]
		if got.GetSource() != transcript.GuardSource || got.GetEpoch() == 0 {
			t.Fatalf("stored as %v, want source %q and the guard's epoch", got, transcript.GuardSource)
		}
		seqs = append(seqs, got.GetSeq())
	}
	if seqs[0] != 1 || seqs[1] != 2 {
		t.Fatalf("seqs %v, want 1 and 2", seqs)
	}
	d, err := e.check(t.Context(), call, "submit_appeal", map[string]any{"appeal_id": "A-17"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("Check: %v %v (%s), want NEGATED", d.GetOutcome(), d.GetReason(), d.GetDetail())
	}

	numbered := turnEvent(call, "caller", "Yes.")
	numbered.Seq = 9
	_, err = e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{numbered}, GuardSequenced: true})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "leave them 0") {
		t.Fatalf("a numbered event with guard_sequenced: %v, want InvalidArgument", err)
	}
	_, err = e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{turnEvent(call, "caller", "Yes.")}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "source, epoch and seq") {
		t.Fatalf("an unnumbered event without guard_sequenced: %v, want InvalidArgument", err)
	}
}

// An event the NATS ingesters would reject is refused, counted with the
// ingesters' reason and limit, never stored, and leaves its call
// uncertain: it may have been the caller's "Wait, no.".
func TestPublishTranscriptRejectsAsNATS(t *testing.T) {
	e := startE2E(t)
	call := "grpc-rejected"
	for _, ev := range []*yesguardv1.TranscriptEvent{
		turnEvent(call, "agent", "Shall I submit your appeal A-17 now?"),
		turnEvent(call, "caller", "Yes."),
	} {
		if _, err := e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{ev}, GuardSequenced: true}); err != nil {
			t.Fatal(err)
		}
	}
	long := turnEvent(call, "caller", strings.Repeat("no ", 2000))
	before := testutil.ToFloat64(e.srv.tmetrics.EventsRejected.WithLabelValues(transcript.ReasonTextTooLong))
	_, err := e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{long}, GuardSequenced: true})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), transcript.ReasonTextTooLong) {
		t.Fatalf("a text over the limit: %v, want InvalidArgument naming %s", err, transcript.ReasonTextTooLong)
	}
	if got := testutil.ToFloat64(e.srv.tmetrics.EventsRejected.WithLabelValues(transcript.ReasonTextTooLong)); got != before+1 {
		t.Errorf("events_rejected_total{reason=text_too_long} %v, want %v", got, before+1)
	}
	if got := testutil.ToFloat64(e.srv.tmetrics.LimitHits.WithLabelValues(transcript.LimitTextBytes)); got != 1 {
		t.Errorf("limit_hits_total{limit=text_bytes} %v, want 1", got)
	}
	if got := grpcEvents(e, transcript.WriteRejected); got != 1 {
		t.Errorf("grpc_events_total{result=rejected} %v, want 1", got)
	}
	d, err := e.check(t.Context(), call, "submit_appeal", map[string]any{"appeal_id": "A-17"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_GAP {
		t.Fatalf("Check after a rejected event: %v %v (%s), want TRANSCRIPT_GAP", d.GetOutcome(), d.GetReason(), d.GetDetail())
	}

	// The seq of the rejected event was given back: the next is 3, no gap.
	resp, err := e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{turnEvent(call, "agent", "Sorry?")}, GuardSequenced: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetEvents()[0].GetSeq(); got != 3 {
		t.Errorf("the event after a rejected one got seq %d, want 3", got)
	}

	_, err = e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("no events: %v, want InvalidArgument", err)
	}
}

// Without a transcript stream there is nothing to acknowledge the events:
// the memory state refuses the RPC rather than pretend they are stored.
func TestPublishTranscriptMemoryState(t *testing.T) {
	e := startE2E(t, func(c *Config) { c.State = StateMemory })
	_, err := e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{
		Events: []*yesguardv1.TranscriptEvent{turnEvent("mem", "caller", "Yes.")}, GuardSequenced: true})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("PublishTranscript with the memory state: %v, want FailedPrecondition", err)
	}
}

// The guard's counters are bounded by the calls in progress: call_ended
// forgets a call's.
func TestPublishTranscriptForgetsEndedCalls(t *testing.T) {
	e := startE2E(t)
	call := "grpc-ended"
	publish := func(ev *yesguardv1.TranscriptEvent) *yesguardv1.PublishedTranscriptEvent {
		t.Helper()
		resp, err := e.client.PublishTranscript(t.Context(), &yesguardv1.PublishTranscriptRequest{Events: []*yesguardv1.TranscriptEvent{ev}, GuardSequenced: true})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetEvents()[0]
	}
	publish(turnEvent(call, "agent", "Hello."))
	w := e.srv.js.writer.Load()
	if got := w.Counters(); got != 1 {
		t.Fatalf("%d counters after one call's event, want 1", got)
	}
	if got := publish(&yesguardv1.TranscriptEvent{CallId: call, Type: "call_ended"}).GetSeq(); got != 2 {
		t.Fatalf("call_ended got seq %d, want 2", got)
	}
	if got := w.Counters(); got != 0 {
		t.Fatalf("%d counters after call_ended, want 0", got)
	}
}
