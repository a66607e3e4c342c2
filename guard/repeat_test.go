package guard

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

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

	// The original is still running: the duplicate waits for its result
	// within its own deadline, then answers without it.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	second, err := h.checkErr(ctx, "c", "submit_appeal", args)
	if err != nil {
		t.Fatal(err)
	}
	want(t, second, dup, yesguardv1.Reason_REASON_DUPLICATE)
	if second.GetOriginalResult() != nil {
		t.Fatalf("result before Complete: %v", second.GetOriginalResult())
	}
	if second.GetOriginalDecisionId() != first.GetDecisionId() {
		t.Fatalf("original = %q, want %q", second.GetOriginalDecisionId(), first.GetDecisionId())
	}

	result, _ := structpb.NewStruct(map[string]any{"ticket": "T-9"})
	if _, err := h.g.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId(), Result: result}); err != nil {
		t.Fatal(err)
	}
	third := h.check("c", "submit_appeal", args)
	want(t, third, dup, yesguardv1.Reason_REASON_DUPLICATE)
	if got := third.GetOriginalResult().GetFields()["ticket"].GetStringValue(); got != "T-9" {
		t.Fatalf("original_result = %v, want ticket T-9", third.GetOriginalResult())
	}
}

func TestDuplicateWaitsForRunningOriginal(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	confirmed(h, "c")
	first := h.check("c", "submit_appeal", nil)
	want(t, first, allow, yesguardv1.Reason_REASON_CONFIRMED)

	done := make(chan *yesguardv1.CheckResponse)
	go func() {
		resp, err := h.checkErr(context.Background(), "c", "submit_appeal", nil)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	// The duplicate is waiting: it answers once the original completes.
	waitFor(t, func() bool { return h.inFlight() == 1 })
	result, _ := structpb.NewStruct(map[string]any{"ok": true})
	if _, err := h.g.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId(), Result: result}); err != nil {
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
	if _, err := h.g.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId(), Failed: true}); err != nil {
		t.Fatal(err)
	}
	// The retry is judged afresh on the same yes, not given the failure.
	retry := h.check("c", "submit_appeal", nil)
	want(t, retry, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if retry.GetDecisionId() == first.GetDecisionId() {
		t.Fatal("retry reused the failed decision")
	}
	_, err := h.g.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: "01NOTADECISION"})
	if err == nil {
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
	got := make(chan *yesguardv1.CheckResponse, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := h.checkErr(context.Background(), "c", "submit_appeal", map[string]any{"appeal_id": "A-17"})
			if err != nil {
				t.Error(err)
				return
			}
			got <- resp
		}()
	}
	// Complete the one ALLOW so the duplicates waiting on it answer.
	var allowID string
	waitFor(t, func() bool {
		for _, d := range h.sink.all() {
			if d.GetOutcome() == allow {
				allowID = d.GetDecisionId()
				return true
			}
		}
		return false
	})
	if _, err := h.g.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: allowID}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(got)
	allows, dups := 0, 0
	for r := range got {
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

func (h *harness) inFlight() int {
	var n int
	// ChecksInFlight is a gauge; read it through the registry-free
	// collector.
	n = int(gaugeValue(h.m.ChecksInFlight))
	return n
}
