package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/yesguard/yesguard/patterns"
)

// TestHeldOut runs the held-out dialogues (testdata/heldout/<lang>.yaml),
// written after the rules were tuned and never tuned on, through the real
// guard. It measures how the rules generalise: it prints, per language,
// the false accepts and the false refusals of genuine plain yeses, and logs
// every failure. A false accept, or false refusals above maxRefusalRate,
// fail the test; wrong reasons are reported only. A set that has not met
// that goal yet carries a budget.yaml (see budgetFile): there the test
// fails when the judge does worse than the budget. HELDOUT_ALL=1 logs every
// dialogue's decision, not only the failures.
func TestHeldOut(t *testing.T) {
	forEachCorpus(t, "testdata/heldout", true, heldOutRunner("heldout"))
}

// TestHeldOutBlind runs the blind set (testdata/heldout2/<lang>.yaml): 555
// dialogues written before the plain-question rule by someone who had read
// neither the locales nor the judge (see testdata/heldout2/README.md). Same
// figures and same failure rule as TestHeldOut.
func TestHeldOutBlind(t *testing.T) {
	forEachCorpus(t, "testdata/heldout2", true, heldOutRunner("blind"))
}

// TestHeldOutBlind3 runs the second blind set (testdata/heldout3/): 592
// dialogues written after the plain-question rule by someone who had read
// neither the rules, the locales nor the earlier sets, and never tuned on
// (see testdata/heldout3/README.md). Same figures and failure rule.
func TestHeldOutBlind3(t *testing.T) {
	forEachCorpus(t, "testdata/heldout3", true, heldOutRunner("blind3"))
}

// TestHeldOutBlind4 measures the judge on the fourth blind set: recaps and
// questions in the style of realtime LLM agents, six domains, values in
// words, written without reading the rules (testdata/heldout4/README.md).
func TestHeldOutBlind4(t *testing.T) {
	forEachCorpus(t, "testdata/heldout4", true, heldOutRunner("blind4"))
}

// TestHeldOutBlind5 measures the judge on the fifth blind set: written,
// like the fourth, without reading the rules, in other businesses, and
// kept sealed while the structure rule was tuned on the fourth
// (testdata/heldout5/README.md).
func TestHeldOutBlind5(t *testing.T) {
	forEachCorpus(t, "testdata/heldout5", true, heldOutRunner("blind5"))
}

// TestHeldOutBlind6 measures the judge on the sixth blind set, written
// after the structure rule landed, never tuned on
// (testdata/heldout6/README.md).
func TestHeldOutBlind6(t *testing.T) {
	forEachCorpus(t, "testdata/heldout6", true, heldOutRunner("blind6"))
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
	b, ok := readBudget(t, filepath.Dir(path))[c.Lang]
	if !ok {
		if falseAccepts > 0 {
			t.Errorf("%s: %d false accepts", path, falseAccepts)
		}
		if rate > maxRefusalRate {
			t.Errorf("%s: false refusals %.1f%%, above %.0f%%", path, rate, maxRefusalRate)
		}
		return
	}
	// A set with a budget has not met the goal yet: it fails when the judge
	// gets worse than the figures recorded there, and says when the budget
	// can come down.
	fmt.Printf("%s %s: budget %d false accepts, %d false refusals; goal 0 and %.0f%% (%d)\n",
		label, c.Lang, b.FalseAccepts, b.FalseRefusals, maxRefusalRate, int(maxRefusalRate*float64(yes)/100))
	if falseAccepts > b.FalseAccepts {
		t.Errorf("%s: %d false accepts, above the budget of %d (%s)", path, falseAccepts, b.FalseAccepts, budgetFile)
	}
	if falseRefusals > b.FalseRefusals {
		t.Errorf("%s: %d false refusals, above the budget of %d (%s)", path, falseRefusals, b.FalseRefusals, budgetFile)
	}
	if falseAccepts < b.FalseAccepts || falseRefusals < b.FalseRefusals {
		fmt.Printf("%s %s: better than its budget: lower it in %s to %d and %d\n", label, c.Lang, budgetFile, falseAccepts, falseRefusals)
	}
}

// budgetFile, beside a held-out set's files, records per language the
// false accepts and false refusals the judge may not exceed while the set
// is above the goal (0 false accepts, maxRefusalRate). It only comes down.
const budgetFile = "budget.yaml"

type budget struct {
	FalseAccepts  int `yaml:"false_accepts"`
	FalseRefusals int `yaml:"false_refusals"`
}

// readBudget reads dir's budget file, by language; none is an empty map.
func readBudget(t *testing.T, dir string) map[string]budget {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, budgetFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Languages map[string]budget `yaml:"languages"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", filepath.Join(dir, budgetFile), err)
	}
	return doc.Languages
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
