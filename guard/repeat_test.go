package guard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

func confirmed(h *harness, call string) {
	h.say(call, transcript.Agent, "Shall I submit the appeal?")
	h.say(call, transcript.Caller, "Yes.")
}

func TestDuplicateGetsOriginalAndItsResult(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	confirmed(h, "c")
	args := map[string]any{"appeal_id": "A-17"}
	first := h.check("c", "submit_appeal", args)
	want(t, first, allow, yesguardv1.Reason_REASON_CONFIRMED)

	// The original is still running: the duplicate waits briefly for its
	// result, then answers that it still runs.
	second := h.check("c", "submit_appeal", args)
	want(t, second, dup, yesguardv1.Reason_REASON_DUPLICATE)
	if second.GetOriginalResult() != nil || !second.GetOriginalRunning() {
		t.Fatalf("before Complete: result %v, running %v", second.GetOriginalResult(), second.GetOriginalRunning())
	}
	if !strings.Contains(second.GetMessage(), "still running") || !strings.Contains(second.GetMessage(), "do not tell the caller it is done") {
		t.Fatalf("message for a running original: %q", second.GetMessage())
	}
	if second.GetOriginalDecisionId() != first.GetDecisionId() {
		t.Fatalf("original = %q, want %q", second.GetOriginalDecisionId(), first.GetDecisionId())
	}

	if err := h.complete(first.GetDecisionId(), map[string]any{"ticket": "T-9"}, false); err != nil {
		t.Fatal(err)
	}
	third := h.check("c", "submit_appeal", args)
	want(t, third, dup, yesguardv1.Reason_REASON_DUPLICATE)
	if third.GetOriginalRunning() {
		t.Fatal("original_running after Complete")
	}
	if got := third.GetOriginalResult().GetFields()["ticket"].GetStringValue(); got != "T-9" {
		t.Fatalf("original_result = %v, want ticket T-9", third.GetOriginalResult())
	}
}

// An ALLOW carries the approval TTL of the rules it was judged under: the
// tool's own, else the defaults'; nothing else does.
func TestAllowCarriesItsApprovalTTL(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	confirmed(h, "c")
	v := h.check("c", "submit_appeal", map[string]any{"appeal_id": "A-17"})
	want(t, v, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if v.ApprovalTTL != DefaultApprovalTTL {
		t.Errorf("submit_appeal ALLOW: approval TTL %s, want the default %s", v.ApprovalTTL, DefaultApprovalTTL)
	}
	h.say("p", transcript.Agent, "Shall I pay the $20 bill now?")
	h.say("p", transcript.Caller, "Yes.")
	v = h.check("p", "pay_bill", map[string]any{"amount": 20})
	want(t, v, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if v.ApprovalTTL != 20*time.Second {
		t.Errorf("pay_bill ALLOW: approval TTL %s, want its own 20s", v.ApprovalTTL)
	}
	if dup := h.check("p", "pay_bill", map[string]any{"amount": 20}); dup.ApprovalTTL != 0 {
		t.Errorf("a %s carries an approval TTL %s", dup.GetOutcome(), dup.ApprovalTTL)
	}
}

// A duplicate waits a short time for its running original; when the
// result comes within it, the duplicate carries it.
func TestDuplicateWaitsForRunningOriginal(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	h.g.cfg.DuplicateWait = time.Minute // long enough for any machine
	confirmed(h, "c")
	first := h.check("c", "submit_appeal", nil)
	want(t, first, allow, yesguardv1.Reason_REASON_CONFIRMED)

	done := make(chan *Verdict)
	go func() { done <- h.check("c", "submit_appeal", nil) }()
	// The duplicate is waiting: it answers once the original completes.
	waitFor(t, func() bool { return h.inFlight() == 1 })
	if err := h.complete(first.GetDecisionId(), map[string]any{"ok": true}, false); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	want(t, resp, dup, yesguardv1.Reason_REASON_DUPLICATE)
	if !resp.GetOriginalResult().GetFields()["ok"].GetBoolValue() {
		t.Fatalf("duplicate did not get the result: %v", resp)
	}
}

func TestFailedCompletionIsNeverReplayed(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	confirmed(h, "c")
	first := h.check("c", "submit_appeal", nil)
	want(t, first, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if err := h.complete(first.GetDecisionId(), nil, true); err != nil {
		t.Fatal(err)
	}
	// The retry is judged afresh on the same yes, not given the failure.
	retry := h.check("c", "submit_appeal", nil)
	want(t, retry, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if retry.GetDecisionId() == first.GetDecisionId() {
		t.Fatal("retry reused the failed decision")
	}
	if err := h.complete("01NOTADECISION", nil, false); err == nil {
		t.Fatal("Complete of an unknown decision succeeded")
	}
}

func TestEvidenceUsedForOtherArguments(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	confirmed(h, "c")
	want(t, h.check("c", "submit_appeal", map[string]any{"appeal_id": "A-17"}), allow, yesguardv1.Reason_REASON_CONFIRMED)
	second := h.check("c", "submit_appeal", map[string]any{"appeal_id": "A-18"})
	want(t, second, refuse, yesguardv1.Reason_REASON_EVIDENCE_USED)
	if second.GetOriginalDecisionId() == "" {
		t.Fatal("EVIDENCE_USED without the decision that used it")
	}
	// A new question and a new yes allow it.
	h.say("c", transcript.Agent, "Shall I submit appeal A-18 now?")
	h.say("c", transcript.Caller, "Yes please.")
	want(t, h.check("c", "submit_appeal", map[string]any{"appeal_id": "A-18"}), allow, yesguardv1.Reason_REASON_CONFIRMED)
}

func TestTwoYesesOneAllow(t *testing.T) {
	// Probe 6: two yeses in quick succession and two identical calls at
	// the same moment give exactly one ALLOW.
	h := newHarness(t, "testdata/policy.yaml")
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	h.say("c", transcript.Caller, "Yes.")
	h.say("c", transcript.Caller, "Yes, yes.")
	const n = 16
	var wg sync.WaitGroup
	got := make(chan *Verdict, n)
	for range n {
		wg.Go(func() {
			got <- h.check("c", "submit_appeal", map[string]any{"appeal_id": "A-17"})
		})
	}
	wg.Wait()
	close(got)
	var all []*Verdict
	allowID := ""
	for r := range got {
		all = append(all, r)
		if r.GetOutcome() == allow {
			allowID = r.GetDecisionId()
		}
	}
	allows, dups := 0, 0
	for _, r := range all {
		switch r.GetOutcome() {
		case allow:
			allows++
		case dup:
			dups++
			if r.GetOriginalDecisionId() != allowID {
				t.Errorf("duplicate points at %s, want %s", r.GetOriginalDecisionId(), allowID)
			}
		default:
			t.Errorf("unexpected %s/%s", r.GetOutcome(), r.GetReason())
		}
	}
	if allows != 1 || dups != n-1 {
		t.Fatalf("%d allows and %d duplicates, want 1 and %d", allows, dups, n-1)
	}
}

func TestQuantityRepeat(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	h.say("c", transcript.Caller, "A large pizza please.")
	first := h.check("c", "add_item", map[string]any{"sku": "pizza-l"})
	want(t, first, allow, yesguardv1.Reason_REASON_NOT_REQUIRED)

	// The model records the same item again with other arguments.
	rep := h.check("c", "add_item", map[string]any{"sku": "pizza-l", "note": "extra cheese"})
	want(t, rep, ignored, yesguardv1.Reason_REASON_QUANTITY_REPEAT)
	if rep.GetOriginalDecisionId() != first.GetDecisionId() {
		t.Fatalf("original = %q, want %q", rep.GetOriginalDecisionId(), first.GetDecisionId())
	}
	// A quantity argument alone is not enough: the caller did not state one.
	want(t, h.check("c", "add_item", map[string]any{"sku": "pizza-l", "qty": 2}), ignored, yesguardv1.Reason_REASON_QUANTITY_REPEAT)

	// The caller asks for two more: an explicit quantity goes through.
	h.say("c", transcript.Agent, "Added.")
	h.say("c", transcript.Caller, "Actually make that two more.")
	want(t, h.check("c", "add_item", map[string]any{"sku": "pizza-l", "qty": 2}), allow, yesguardv1.Reason_REASON_NOT_REQUIRED)

	// Another item is not a repeat.
	want(t, h.check("c", "add_item", map[string]any{"sku": "cola"}), allow, yesguardv1.Reason_REASON_NOT_REQUIRED)
}

// inFlight is how many Checks the engine is judging or waiting on.
func (h *harness) inFlight() int { return int(gaugeValue(h.g.inFlight)) }

// Before an ALLOW the engine settles the call (with the JetStream state:
// waits for this replica to apply what the stream holds of it); an event
// that lands meanwhile is judged, not the stale yes.
func TestSettleJudgesWhatArrivedMeanwhile(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	confirmed(h, "c")
	settled := 0
	h.g.cfg.Settle = func(_ context.Context, call string) error {
		settled++
		if settled == 1 {
			// The replica catches up: the caller's no, published before
			// the Check, arrives now.
			h.say(call, transcript.Caller, "Wait, no.")
		}
		return nil
	}
	want(t, h.check("c", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_NEGATED)
	if settled != 1 {
		t.Fatalf("settled %d times, want once (a refusal needs none)", settled)
	}
	// A settle that fails refuses: the guard cannot vouch for the call.
	confirmed(h, "d")
	h.g.cfg.Settle = func(context.Context, string) error { return errors.New("stream unreachable") }
	want(t, h.check("d", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_TRANSCRIPT_GAP)
}

// A late utterance that sorts in front of a caller turn already used does
// not make it a new turn. Red team finding 5: the turn was keyed on its
// first utterance's id, which the late "Okay," changed, and the same yes
// allowed a second action.
func TestLateHeadKeepsTheTurnUsed(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	at := func(ev transcript.Event, start, end int64) transcript.Event {
		ev.StartMS, ev.EndMS = &start, &end
		return ev
	}
	ev := func(sp transcript.Speaker, seq uint64, text string) transcript.Event {
		src := "stt"
		if sp == transcript.Agent {
			src = "tts"
		}
		return transcript.Event{CallID: "late", Speaker: sp, Type: transcript.TypeTranscript, Final: true, Text: text, Source: src, Epoch: 1, Seq: seq}
	}
	h.apply(at(ev(transcript.Agent, 1, "Shall I submit the appeal?"), 0, 1800))
	h.apply(at(ev(transcript.Caller, 1, "Yes."), 2100, 2400))
	first := h.check("late", "submit_appeal", map[string]any{"appeal_id": "A-17"})
	want(t, first, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if err := h.complete(first.GetDecisionId(), nil, false); err != nil {
		t.Fatal(err)
	}
	want(t, h.check("late", "submit_appeal", map[string]any{"appeal_id": "A-18"}), refuse, yesguardv1.Reason_REASON_EVIDENCE_USED)

	h.apply(at(ev(transcript.Caller, 2, "Okay,"), 1900, 2050)) // late, in front of the yes
	if got := h.g.Transcript("late"); len(got) != 2 || got[1].GetText() != "Okay, Yes." {
		t.Fatalf("the late utterance did not join the turn: %v", got)
	}
	resp := h.check("late", "submit_appeal", map[string]any{"appeal_id": "A-18"})
	want(t, resp, refuse, yesguardv1.Reason_REASON_EVIDENCE_USED)
	if resp.GetOriginalDecisionId() != first.GetDecisionId() {
		t.Fatalf("EVIDENCE_USED names %q, want %q", resp.GetOriginalDecisionId(), first.GetDecisionId())
	}
}
