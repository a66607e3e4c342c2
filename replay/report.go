package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

func outcomeName(o yesguardv1.Outcome) string { return strings.TrimPrefix(o.String(), "OUTCOME_") }

func reasonName(r yesguardv1.Reason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "REASON_"))
}

// Text writes each call's decisions, the recorded one above the one made
// now, and a summary line.
func Text(w io.Writer, results []*Result) {
	same, changed, otherDetail := 0, 0, 0
	for _, r := range results {
		checks := 0
		for _, p := range r.Pairs {
			if p.Now != nil {
				checks++
			}
		}
		fmt.Fprintf(w, "call %s: %d checks re-judged on %d events under %s\n", r.CallID, checks, r.Events, r.PolicyVersion)
		if r.Dropped > 0 {
			fmt.Fprintf(w, "  (%d events did not decode and were dropped, as the guard drops them)\n", r.Dropped)
		}
		for i, p := range r.Pairs {
			d := p.Recorded
			at := d.GetTime().AsTime().UTC().Format("15:04:05.000")
			switch d.GetKind() {
			case yesguardv1.DecisionKind_DECISION_KIND_COMPLETE:
				what := "completed"
				if d.GetReason() == yesguardv1.Reason_REASON_FAILED {
					what = "failed"
				}
				fmt.Fprintf(w, "  #%d %s %s %s %s\n", i+1, at, what, d.GetOriginalDecisionId(), p.Note)
				continue
			case yesguardv1.DecisionKind_DECISION_KIND_REDEEM:
				fmt.Fprintf(w, "  #%d %s redeem %s: %s\n", i+1, at, d.GetDecisionId(), p.Note)
				continue
			}
			call := d.GetTool()
			if a := d.GetArgs(); a != "" && a != "{}" {
				call += " " + a
			}
			fmt.Fprintf(w, "  #%d %s %s  waited %d ms  %s\n", i+1, at, call, d.GetWaitedMs(), d.GetDecisionId())
			fmt.Fprintf(w, "     recorded  %-9s %-20s %s\n", outcomeName(d.GetOutcome()), reasonName(d.GetReason()), d.GetEvidence().GetDetail())
			if p.Now == nil {
				fmt.Fprintf(w, "     now       not judged: %s\n", p.Note)
				changed++
				continue
			}
			mark := "same"
			switch {
			case !p.Same:
				mark = "CHANGED"
				changed++
			case !p.DetailSame:
				mark = "same outcome, other detail"
				same++
				otherDetail++
			default:
				same++
			}
			fmt.Fprintf(w, "     now       %-9s %-20s %s  [%s]\n", outcomeName(p.Now.Outcome), reasonName(p.Now.Reason), p.Now.GetEvidence().GetDetail(), mark)
		}
	}
	if otherDetail > 0 {
		fmt.Fprintf(w, "%d decisions re-judged: %d same (%d of them with another detail), %d changed.\n", same+changed, same, otherDetail, changed)
		return
	}
	fmt.Fprintf(w, "%d decisions re-judged: %d same, %d changed.\n", same+changed, same, changed)
}

type jsonReport struct {
	Same    int        `json:"same"`
	Changed int        `json:"changed"`
	Calls   []jsonCall `json:"calls"`
}

type jsonCall struct {
	CallID        string     `json:"call_id"`
	PolicyVersion string     `json:"policy_version"`
	Events        int        `json:"events"`
	Dropped       int        `json:"dropped_events"`
	Decisions     []jsonPair `json:"decisions"`
}

type jsonPair struct {
	DecisionID string        `json:"decision_id"`
	Kind       string        `json:"kind"`
	Time       string        `json:"time"`
	Tool       string        `json:"tool,omitempty"`
	Args       string        `json:"args,omitempty"`
	WaitedMS   int64         `json:"waited_ms"`
	Recorded   jsonDecision  `json:"recorded"`
	Now        *jsonDecision `json:"now,omitempty"`
	Same       bool          `json:"same"`
	DetailSame bool          `json:"detail_same"`
	Note       string        `json:"note,omitempty"`
}

type jsonDecision struct {
	Outcome            string `json:"outcome"`
	Reason             string `json:"reason"`
	Detail             string `json:"detail,omitempty"`
	OriginalDecisionID string `json:"original_decision_id,omitempty"`
}

// JSON writes one JSON document of the results.
func JSON(w io.Writer, results []*Result) error {
	rep := jsonReport{Calls: []jsonCall{}}
	for _, r := range results {
		jc := jsonCall{CallID: r.CallID, PolicyVersion: r.PolicyVersion, Events: r.Events, Dropped: r.Dropped, Decisions: []jsonPair{}}
		for _, p := range r.Pairs {
			d := p.Recorded
			jp := jsonPair{
				DecisionID: d.GetDecisionId(), Kind: strings.ToLower(strings.TrimPrefix(d.GetKind().String(), "DECISION_KIND_")),
				Time: d.GetTime().AsTime().UTC().Format("2006-01-02T15:04:05.000Z07:00"), Tool: d.GetTool(), Args: d.GetArgs(), WaitedMS: d.GetWaitedMs(),
				Recorded: jsonDecision{outcomeName(d.GetOutcome()), reasonName(d.GetReason()), d.GetEvidence().GetDetail(), d.GetOriginalDecisionId()},
				Same:     p.Same, DetailSame: p.DetailSame, Note: p.Note,
			}
			if p.Now != nil {
				jp.Now = &jsonDecision{outcomeName(p.Now.Outcome), reasonName(p.Now.Reason), p.Now.GetEvidence().GetDetail(), p.Now.OriginalDecisionID}
			}
			if isCheck(d) {
				if p.Same {
					rep.Same++
				} else {
					rep.Changed++
				}
			}
			jc.Decisions = append(jc.Decisions, jp)
		}
		rep.Calls = append(rep.Calls, jc)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}
