package guard

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/yesguard/yesguard/patterns"
)

// TestHeldOut runs the held-out dialogues (testdata/heldout/<lang>.yaml),
// written after the rules were tuned and never tuned on, through the real
// guard. It measures how the rules generalise: it prints, per language,
// the false accepts and the false refusals of genuine plain yeses, and logs
// every failure. A false accept, or false refusals above maxRefusalRate,
// fail the test; wrong reasons are reported only. HELDOUT_ALL=1 logs every
// dialogue's decision, not only the failures.
func TestHeldOut(t *testing.T) {
	forEachCorpus(t, "testdata/heldout", false, heldOutRunner("heldout"))
}

// TestHeldOutBlind runs the blind set (testdata/heldout2/<lang>.yaml): 555
// dialogues written before the plain-question rule by someone who had read
// neither the locales nor the judge (see testdata/heldout2/README.md). Same
// figures and same failure rule as TestHeldOut.
func TestHeldOutBlind(t *testing.T) {
	forEachCorpus(t, "testdata/heldout2", false, heldOutRunner("blind"))
}

// TestHeldOutBlind3 runs the second blind set (testdata/heldout3/): 592
// dialogues written after the plain-question rule by someone who had read
// neither the rules, the locales nor the earlier sets, and never tuned on
// (see testdata/heldout3/README.md). Same figures and failure rule.
func TestHeldOutBlind3(t *testing.T) {
	forEachCorpus(t, "testdata/heldout3", false, heldOutRunner("blind3"))
}

// heldOutRunner runs one held-out file, printing its figures after label.
func heldOutRunner(label string) func(*testing.T, string, *patterns.Set) {
	return func(t *testing.T, path string, locs *patterns.Set) { runHeldOut(t, label, path, locs) }
}

func runHeldOut(t *testing.T, label, path string, locs *patterns.Set) {
	c := readCorpus(t, path)
	if len(c.Dialogues) == 0 {
		t.Fatalf("%s: no dialogues", path)
	}
	g, store := corpusGuard(t, path, c, locs)
	n := judgeAll(t, path, c, g, store, label+"-"+c.Lang, func(i int, d dialogue, resp *Verdict) string {
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
	summary := fmt.Sprintf("%s %s: %d dialogues (%d genuine yeses, %d to refuse): false accepts %d, false refusals %d (%.1f%%)",
		label, c.Lang, len(c.Dialogues), yes, no, falseAccepts, falseRefusals, rate)
	fmt.Println(summary)
	fmt.Printf("%s %s: right outcome, wrong reason %d\n", label, c.Lang, wrongReason)
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
