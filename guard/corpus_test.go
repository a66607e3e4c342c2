package guard

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// corpusFile is one language's judged dialogues (testdata/corpus/<lang>.yaml).
type corpusFile struct {
	Lang string `yaml:"lang"`
	// Tools is the policy's tools section the dialogues are judged under.
	Tools     map[string]*Tool `yaml:"tools"`
	Dialogues []dialogue       `yaml:"dialogues"`
}

type dialogue struct {
	Name string `yaml:"name"`
	// Turns in order; each is {agent: text} or {caller: text}, with an
	// optional lang (default: the file's).
	Turns []corpusTurn   `yaml:"turns"`
	Tool  string         `yaml:"tool"`
	Args  map[string]any `yaml:"args"`
	// Race: the last turn lands after the Check, as when the model's tool
	// call outruns the transcript.
	Race bool `yaml:"race"`
	// Want is "allow" (a genuine yes: refusing it is a false refusal) or
	// "refuse" (allowing it is a false accept).
	Want string `yaml:"want"`
	// Reason, when given, is the reason the decision must carry
	// (CONFIRMED, NEGATED, NOT_PLAIN, ...).
	Reason string `yaml:"reason"`
}

type corpusTurn struct {
	Agent  string `yaml:"agent"`
	Caller string `yaml:"caller"`
	Lang   string `yaml:"lang"`
}

// TestCorpus runs every language's judged dialogues through the real guard
// and prints, per language, its false accepts (must be 0) and false
// refusals of genuine plain yeses (at most 2%).
func TestCorpus(t *testing.T) {
	forEachCorpus(t, "testdata/corpus", true, runCorpus)
}

// forEachCorpus runs run on every <lang>.yaml of dir, as a subtest per
// language, with the built-in locales.
func forEachCorpus(t *testing.T, dir string, parallel bool, run func(*testing.T, string, *patterns.Set)) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	// A held-out set's budget sits beside its dialogues (heldout_test.go).
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == budgetFile })
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in %s: %v", dir, err)
	}
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			run(t, f, locs)
		})
	}
}

func runCorpus(t *testing.T, path string, locs *patterns.Set) {
	c := readCorpus(t, path)
	if len(c.Dialogues) < 60 {
		t.Errorf("%s: %d dialogues, want at least 60", path, len(c.Dialogues))
	}
	g, store := corpusGuard(t, path, c, locs)
	n := judgeAll(t, path, c, g, store, c.Lang, func(i int, d dialogue, resp *Verdict) string {
		return fmt.Sprintf("#%d %q: got %s/%s (%s)", i, d.Name, resp.GetOutcome(), resp.GetReason(), resp.GetEvidence().GetDetail())
	})
	yes, no, falseAccepts, falseRefusals, wrongReason, failures := n.yes, n.no, n.falseAccepts, n.falseRefusals, n.reasonMisses, n.failures
	rate := n.refusalRate()
	summary := fmt.Sprintf("corpus %s: %d dialogues (%d genuine yeses, %d to refuse): false accepts %d, false refusals %d (%.1f%%), wrong reasons %d",
		c.Lang, len(c.Dialogues), yes, no, falseAccepts, falseRefusals, rate, wrongReason)
	fmt.Println(summary)
	sort.Strings(failures)
	for _, f := range failures {
		t.Log(f)
	}
	if falseAccepts > 0 || rate > maxRefusalRate || wrongReason > 0 {
		t.Error(summary)
	}
}

// maxRefusalRate is the highest share, in percent, of genuine plain yeses
// a corpus, the held-out set or the metamorphic suite may refuse.
const maxRefusalRate = 2.0

// tally counts how a file's dialogues came out.
type tally struct {
	yes, no                     int // dialogues that want allow, refuse
	falseAccepts, falseRefusals int
	// reasonMisses: a given reason not carried, whatever the outcome;
	// wrongReasons: the right outcome for another reason.
	reasonMisses, wrongReasons int
	failures                   []string
}

func (n tally) refusalRate() float64 {
	if n.yes == 0 {
		return 0
	}
	return 100 * float64(n.falseRefusals) / float64(n.yes)
}

// judgeAll plays each dialogue of c through g and tallies the outcomes;
// describe words a dialogue's failure.
func judgeAll(t *testing.T, path string, c corpusFile, g *Guard, store *transcript.Store, callPrefix string, describe func(int, dialogue, *Verdict) string) tally {
	t.Helper()
	var n tally
	for i, d := range c.Dialogues {
		resp, err := playDialogue(t, g, store, fmt.Sprintf("%s-%d", callPrefix, i), c.Lang, d)
		if err != nil {
			t.Fatalf("%s #%d %q: %v", path, i, d.Name, err)
		}
		allowed := resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW
		why := describe(i, d, resp)
		switch d.Want {
		case "allow":
			n.yes++
			if !allowed {
				n.falseRefusals++
				n.failures = append(n.failures, "false refusal "+why)
			}
		case "refuse":
			n.no++
			if allowed {
				n.falseAccepts++
				n.failures = append(n.failures, "FALSE ACCEPT "+why)
			}
		default:
			t.Fatalf("%s #%d %q: want is %q, not allow or refuse", path, i, d.Name, d.Want)
		}
		if d.Reason != "" && resp.GetReason().String() != "REASON_"+strings.ToUpper(d.Reason) {
			n.reasonMisses++
			// A wrong outcome is listed above already, with its reason.
			if (d.Want == "allow") == allowed {
				n.wrongReasons++
				n.failures = append(n.failures, fmt.Sprintf("wrong reason (want %s) %s", d.Reason, why))
			}
		}
	}
	return n
}

// readCorpus reads a corpus file, rejecting unknown fields.
func readCorpus(t *testing.T, path string) corpusFile {
	t.Helper()
	var c corpusFile
	readYAMLStrict(t, path, &c)
	return c
}

// readYAMLStrict decodes the YAML file at path into v, rejecting unknown
// fields.
func readYAMLStrict(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// corpusGuard builds a guard with its own store and book that judges
// under the corpus's tools, in its language.
func corpusGuard(t *testing.T, path string, c corpusFile, locs *patterns.Set) (*Guard, *transcript.Store) {
	t.Helper()
	pol := &Policy{Tools: c.Tools}
	pol.SetDefaults()
	pol.Defaults.DefaultLang = c.Lang
	pol.Defaults.Wait = Duration(2 * time.Second)
	if err := pol.Validate(); err != nil {
		t.Fatalf("%s: tools: %v", path, err)
	}
	store := transcript.NewStore(transcript.Limits{}, nil)
	g, err := New(Config{Policy: pol, Locales: locs, Store: store, Book: dedupe.NewMemory(nil)})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g, store
}

// playDialogue applies the dialogue's turns to the store and checks its
// tool; with Race, the last turn lands after the Check has started.
func playDialogue(t *testing.T, g *Guard, store *transcript.Store, call, lang string, d dialogue) (*Verdict, error) {
	turns := d.Turns
	var late *corpusTurn
	if d.Race && len(turns) > 0 {
		late = &turns[len(turns)-1]
		turns = turns[:len(turns)-1]
	}
	seq := uint64(0)
	apply := func(ct corpusTurn) error {
		seq++
		ev := transcript.Event{CallID: call, Seq: seq, Type: transcript.TypeTranscript, Final: true, Lang: ct.Lang}
		if ev.Lang == "" {
			ev.Lang = lang
		}
		switch {
		case ct.Agent != "" && ct.Caller == "":
			ev.Speaker, ev.Text = transcript.Agent, ct.Agent
		case ct.Caller != "" && ct.Agent == "":
			ev.Speaker, ev.Text = transcript.Caller, ct.Caller
		default:
			return fmt.Errorf("a turn is {agent: text} or {caller: text}")
		}
		if ok, why := store.Apply(ev, time.Now()); !ok {
			return fmt.Errorf("turn dropped: %s", why)
		}
		return nil
	}
	for _, ct := range turns {
		if err := apply(ct); err != nil {
			return nil, err
		}
	}
	args, err := structpb.NewStruct(d.Args)
	if err != nil {
		return nil, err
	}
	req := Request{CallID: call, Tool: d.Tool, Args: args}
	if late == nil {
		return g.Check(context.Background(), req), nil
	}
	type res struct {
		r   *Verdict
		err error
	}
	ch := make(chan res, 1)
	before := gaugeValue(g.inFlight)
	go func() {
		ch <- res{g.Check(context.Background(), req), nil}
	}()
	// The transcript lags the tool call: the last turn lands once the
	// Check is under way.
	waitFor(t, func() bool { return gaugeValue(g.inFlight) > before })
	if err := apply(*late); err != nil {
		return nil, err
	}
	out := <-ch
	if out.err == nil && late.Caller != "" {
		// The Check must have judged the turn that landed after it, not
		// the caller's words before it.
		if got := out.r.GetEvidence().GetAnswer().GetText(); got != "" && !strings.Contains(got, late.Caller) {
			t.Errorf("race %q: judged the caller's turn %q, not the one that landed during the Check (%q)", d.Name, got, late.Caller)
		}
	}
	return out.r, out.err
}
