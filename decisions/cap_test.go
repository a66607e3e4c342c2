package decisions

import (
	"context"
	"testing"
	"time"

	"github.com/yesguard/yesguard/internal/natstest"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// capCall is finding 13's call: an ALLOW and its Complete, then a flood of
// refusals and of duplicates of that action, far past a per-call bound of
// perCall.
func capCall(perCall int) (allow, complete *yesguardv1.Decision, all []*yesguardv1.Decision) {
	at := time.Duration(0)
	next := func(o yesguardv1.Outcome, k yesguardv1.DecisionKind) *yesguardv1.Decision {
		at += time.Millisecond
		d := record("capped", at, 10)
		d.Outcome, d.Kind, d.Tool, d.ArgsHash = o, k, "submit_appeal", "h1"
		all = append(all, d)
		return d
	}
	allow = next(yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.DecisionKind_DECISION_KIND_CHECK)
	complete = next(yesguardv1.Outcome_OUTCOME_UNSPECIFIED, yesguardv1.DecisionKind_DECISION_KIND_COMPLETE)
	for range 4 * perCall {
		next(yesguardv1.Outcome_OUTCOME_DUPLICATE, yesguardv1.DecisionKind_DECISION_KIND_CHECK)
		next(yesguardv1.Outcome_OUTCOME_REFUSE, yesguardv1.DecisionKind_DECISION_KIND_CHECK)
	}
	return allow, complete, all
}

// checkCapped: the call's list holds the ALLOW and the Complete, and at
// most max records.
func checkCapped(t *testing.T, s Store, allow, complete *yesguardv1.Decision, max int) {
	t.Helper()
	list, _, err := s.List(t.Context(), "capped", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range list {
		seen[d.GetDecisionId()] = true
	}
	if !seen[allow.GetDecisionId()] || !seen[complete.GetDecisionId()] {
		t.Errorf("%d records listed; the ALLOW kept %v, the Complete kept %v", len(list), seen[allow.GetDecisionId()], seen[complete.GetDecisionId()])
	}
	if len(list) > max {
		t.Errorf("%d records listed, want at most %d", len(list), max)
	}
}

// Finding 13: the per-call bound discarded the ALLOW (and its Complete)
// first to make room for the duplicates that followed it.
func TestCapKeepsTheAllow(t *testing.T) {
	const perCall = 5
	allow, complete, all := capCall(perCall)
	t.Run("memory", func(t *testing.T) {
		s := NewMemory(MemoryLimits{MaxPerCall: perCall})
		for _, d := range all {
			_ = s.Add(context.Background(), d)
		}
		checkCapped(t, s, allow, complete, perCall)
	})
	t.Run("stream", func(t *testing.T) {
		ns := natstest.JetStream(t)
		_, js := natstest.Connect(t, ns.ClientURL())
		if _, err := js.CreateOrUpdateStream(t.Context(), StreamConfig("YG_DECISIONS", DefaultSubjectPrefix, time.Hour, 64<<20, perCall, 1)); err != nil {
			t.Fatal(err)
		}
		s := NewStream(js, "YG_DECISIONS", DefaultSubjectPrefix)
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		for _, d := range all {
			if err := s.Add(t.Context(), d); err != nil {
				t.Fatal(err)
			}
		}
		// perCall actions, perCall refusals, perCall repeats of the one action.
		checkCapped(t, s, allow, complete, 3*perCall)
	})
}
