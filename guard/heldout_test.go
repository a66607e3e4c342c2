package guard

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// TestHeldOut runs the held-out dialogues (testdata/heldout/<lang>.yaml),
// written after the rules were tuned and never tuned on, through the real
// guard. It measures how the rules generalise: it prints, per language,
// the false accepts and the false refusals of genuine plain yeses, and logs
// every failure. A false accept, or false refusals above maxRefusalRate,
// fail the test; wrong reasons are reported only. HELDOUT_ALL=1 logs every
// dialogue's decision, not only the failures.
func TestHeldOut(t *testing.T) {
	forEachCorpus(t, "testdata/heldout", false, runHeldOut)
}

func runHeldOut(t *testing.T, path string, locs *patterns.Set) {
	c := readCorpus(t, path)
	if len(c.Dialogues) == 0 {
		t.Fatalf("%s: no dialogues", path)
	}
	g, store := corpusGuard(t, path, c, locs)
	n := judgeAll(t, path, c, g, store, "heldout-"+c.Lang, func(i int, d dialogue, resp *yesguardv1.CheckResponse) string {
		got := resp.GetOutcome()
		if os.Getenv("HELDOUT_ALL") != "" {
			t.Logf("#%d %q: want %s, got %s/%s (%s)", i, d.Name, d.Want, got, resp.GetReason(), resp.GetEvidence().GetDetail())
		}
		why := fmt.Sprintf("#%d %q (tool %s %v%s)\n%s    want %s", i, d.Name, d.Tool, d.Args, raceNote(d.Race), dialogueText(d), d.Want)
		if d.Reason != "" {
			why += "/" + d.Reason
		}
		return why + fmt.Sprintf(", got %s/%s, detail: %s", got, resp.GetReason(), resp.GetEvidence().GetDetail())
	})
	yes, no, falseAccepts, falseRefusals, wrongReason, rate, failures := n.yes, n.no, n.falseAccepts, n.falseRefusals, n.wrongReasons, n.refusalRate(), n.failures
	summary := fmt.Sprintf("heldout %s: %d dialogues (%d genuine yeses, %d to refuse): false accepts %d, false refusals %d (%.1f%%)",
		c.Lang, len(c.Dialogues), yes, no, falseAccepts, falseRefusals, rate)
	fmt.Println(summary)
	fmt.Printf("heldout %s: right outcome, wrong reason %d\n", c.Lang, wrongReason)
	t.Log(summary)
	for _, f := range failures {
		t.Log(f)
	}
	if falseAccepts > 0 {
		t.Errorf("%s: %d false accepts", path, falseAccepts)
	}
	if rate > maxRefusalRate {
		t.Errorf("%s: false refusals %.1f%%, above %.0f%%", path, rate, maxRefusalRate)
	}
}

func raceNote(race bool) string {
	if race {
		return ", race"
	}
	return ""
}

// dialogueText renders a dialogue's turns, one a line, for a failure log.
func dialogueText(d dialogue) string {
	var b strings.Builder
	for _, ct := range d.Turns {
		who, text := "agent ", ct.Agent
		if ct.Caller != "" {
			who, text = "caller", ct.Caller
		}
		fmt.Fprintf(&b, "    %s: %s\n", who, text)
	}
	return b.String()
}
