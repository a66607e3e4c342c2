package guard

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// TestMetamorphic takes every dialogue of the corpus and held-out files that
// the guard must allow on a question (reason CONFIRMED, or none), and
// mutates it with the generators of metaGenerators, whose words live in
// testdata/metamorphic/<lang>.yaml. An unsafe mutant (a negated, deferred or
// changed question, a hedged or taken-back yes) must be refused; a safe one
// (fillers, politeness, a recogniser's lower case) must stay allowed. Each
// mutant is played through the real guard exactly as TestCorpus plays a
// dialogue, races racing.
//
// Rules that hold:
//   - A base dialogue is played first; one the guard refuses is skipped and
//     counted as "base refused", so a failure always means the mutation was
//     mishandled.
//   - The Go code holds no language's words: it splits sentences, finds the
//     bound value and fills templates; every word comes from the data
//     (TestMetamorphicText's fixtures aside).
//   - A template whose placeholders the dialogue cannot fill skips it, and
//     so does one whose label the dialogue would make uncertain (see
//     mutateAgent and mutateCaller): fewer mutants, each certain.
//   - The count per language and generator is bounded by metaCap, chosen by
//     a stride over the generated list: deterministic, never by time.
//
// It fails on any false accept (an unsafe mutant allowed) and on a
// false-refusal rate above metaMaxRefusalRate in any language.
// METAMORPHIC_ALL=1 logs every failure, not only the first metaLogCap per
// generator; METAMORPHIC_DUMP=dir writes every mutant to dir/<lang>.txt.
func TestMetamorphic(t *testing.T) {
	files, err := filepath.Glob("testdata/metamorphic/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in testdata/metamorphic: %v", err)
	}
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	metas := map[string]*metaFile{}
	for _, f := range files {
		m := readMeta(t, f)
		metas[m.Lang] = m
	}
	for _, lang := range slices.Sorted(maps.Keys(metas)) {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			runMetamorphic(t, lang, metas, locs)
		})
	}
}

const (
	// metaCap bounds the mutants played per language and generator.
	metaCap = 400
	// metaLogCap bounds the failures logged per language and generator.
	metaLogCap = 20
	// metaMaxRefusalRate is the highest false-refusal rate, in percent, a
	// language's safe mutants may have.
	metaMaxRefusalRate = 2.0
)

// metaGenerator is one class of mutation: want is the decision its mutants
// must get. yesWord: the class applies only where the caller's yes starts
// with one of the language's yes words, because another answer ("No
// problem.") to its question would make the label uncertain.
type metaGenerator struct {
	name    string
	want    string
	yesWord bool
}

var metaGenerators = []metaGenerator{
	{name: "negate", want: "refuse"},
	{name: "defer", want: "refuse"},
	{name: "instead", want: "refuse"},
	{name: "alternative", want: "refuse"},
	{name: "second_question", want: "refuse"},
	{name: "move_value", want: "refuse"},
	{name: "competing_number", want: "refuse"},
	{name: "other_verb", want: "refuse"},
	{name: "purpose_clause", want: "refuse"},
	{name: "negative_question", want: "refuse", yesWord: true},
	{name: "mind", want: "refuse", yesWord: true},
	{name: "bad_place", want: "refuse"},
	{name: "when_link", want: "refuse"},
	{name: "bad_on_file", want: "refuse"},
	{name: "bad_outstanding", want: "refuse"},
	{name: "bad_wait", want: "refuse"},
	{name: "bad_now_already", want: "refuse"},
	{name: "bad_confirm_frame", want: "refuse"},
	{name: "bad_possessive_date", want: "refuse"},
	{name: "instruction_two_values", want: "refuse"},
	{name: "instruction_announced", want: "refuse"},
	{name: "instruction_other_verb", want: "refuse"},
	{name: "instruction_hedged", want: "refuse"},
	{name: "container", want: "refuse"},
	// The structure-and-operators rule, tested both ways: words that
	// change the action in its slot, an operator of each class at each
	// position, and every stated argument perturbed must refuse; names,
	// titles, items, places, polite modality, confirm openers and recaps
	// in the free slots must not.
	{name: "action_modifier", want: "refuse"},
	{name: "op_condition", want: "refuse"},
	{name: "op_embedding", want: "refuse"},
	{name: "op_hedge", want: "refuse"},
	{name: "op_retraction", want: "refuse"},
	{name: "op_deferral", want: "refuse"},
	{name: "op_negation", want: "refuse"},
	{name: "op_alternative", want: "refuse"},
	{name: "op_other_tool", want: "refuse"},
	{name: "perturb_value", want: "refuse"},
	{name: "perturb_arg", want: "refuse"},
	{name: "hedge", want: "refuse"},
	{name: "backchannel", want: "refuse"},
	{name: "take_back", want: "refuse"},
	{name: "filler", want: "allow"},
	{name: "politeness", want: "allow"},
	{name: "asr", want: "allow"},
	{name: "disfluency", want: "allow"},
	{name: "agent_filler", want: "allow"},
	{name: "restated_value", want: "allow"},
	{name: "code_switch", want: "allow"},
	{name: "place", want: "allow"},
	{name: "on_file", want: "allow"},
	{name: "outstanding", want: "allow"},
	{name: "now_not_wait", want: "allow"},
	{name: "now_already", want: "allow"},
	{name: "confirm_frame", want: "allow"},
	{name: "possessive_date", want: "allow"},
	{name: "instruction", want: "allow"},
	{name: "own_object", want: "allow"},
	{name: "free_party", want: "allow"},
	{name: "free_items", want: "allow"},
	{name: "free_recap", want: "allow"},
	{name: "polite_modality", want: "allow"},
	{name: "confirm_opener", want: "allow"},
	{name: "value_before", want: "allow"},
}

// asrGenerator is the one generator with no templates: it rewrites both
// turns as a recogniser writes them.
const asrGenerator = "asr"

// metaFile is one language's generator words.
type metaFile struct {
	Lang string `yaml:"lang"`
	// YesWords: words a plain yes may start with ("yes", "sure"). A
	// caller template that replaces the yes, or lower-cases or repeats its
	// first word, applies only when the yes starts with one.
	YesWords []string `yaml:"yes_words"`
	// InformalWords mark an agent turn that addresses the caller
	// informally (de "du"); a template with a register applies only to
	// turns of that register.
	InformalWords []string `yaml:"informal_words"`
	// Currency: symbols and words written next to an amount ("€", "euros").
	Currency []string `yaml:"currency"`
	// Abbreviations: words whose dot ends no sentence ("Dr").
	Abbreviations []string `yaml:"abbreviations"`
	// OrdinalDot: a number followed by a dot and a space does not end a
	// sentence (de "am 3. März").
	OrdinalDot bool `yaml:"ordinal_dot"`
	// AsrQuestions: openers that make a sentence a question without its
	// "?" ("shall I", "..., right"); the asr generator rewrites only such
	// questions, and those that never had a "?".
	AsrQuestions []string `yaml:"asr_questions"`
	// ActionModifiers are words no locale lists that, before or after the
	// action's noun, make it another action ("a sample refund", "la
	// reserva provisional"), for {mod}; written as the frames' mod_np
	// phrases need them (de "vorläufige" + "n").
	ActionModifiers []string `yaml:"action_modifiers"`
	// Tools: per tool of the corpora, the phrases templates fill in.
	Tools map[string]metaTool `yaml:"tools"`
	// Generators: per generator name, templates for the last agent turn
	// and/or the caller's yes.
	Generators map[string]metaGen `yaml:"generators"`

	yesWords, informal, abbrevs map[string]bool
}

// metaTool holds a tool's phrase sets. Each frame is one coherent set of a
// verb (one of the tool's verbs in the corpus tools section, base form) and
// the phrases built on it; each of others is another action on the tool's
// object (another tool's verb or one no tool lists), for templates'
// {other_...} placeholders. Values may hold {value}.
type metaTool struct {
	Frames []map[string]string `yaml:"frames"`
	Others []map[string]string `yaml:"others"`
}

type metaGen struct {
	Agent  []metaTemplate `yaml:"agent"`
	Caller []metaTemplate `yaml:"caller"`
	// Pair rewrites both turns: the last agent turn, which must ask
	// nothing, and the caller's turn after it (rule 6, the caller's own
	// instruction). Both are rendered with the same frame and values.
	Pair []metaPair `yaml:"pair"`
}

// metaPair is an agent template and a caller template that go together.
type metaPair struct {
	Agent    string `yaml:"agent"`
	Caller   string `yaml:"caller"`
	Register string `yaml:"register"`
}

// pairSep joins a pair's two templates so that render fills them with the
// same frame; it is a field of its own once render has joined the words.
const pairSep = " \x00 "

// metaTemplate is a template, written as a string or as {text, register}.
type metaTemplate struct {
	Text string `yaml:"text"`
	// Register, when set, is "formal" or "informal": the template applies
	// only to agent turns of that register.
	Register string `yaml:"register"`
}

func (mt *metaTemplate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&mt.Text)
	}
	type plain metaTemplate
	return n.Decode((*plain)(mt))
}

// Placeholders the code fills; any other is a key of a tool's frame, or,
// prefixed other_, of one of its others.
var metaBuiltins = map[string]bool{
	"turn": true, "pre": true, "ctx": true, "q": true, "q_open": true, "post": true,
	"value": true, "amount2": true, "untimed": true,
	"value_off": true, "turn_value_off": true, "turn_arg_off": true, "mod": true,
	"arg": true, "arg_off": true,
	"yes": true, "yes_head": true, "yes_tail": true, "yes_lc": true, "yes_stutter": true, "yes_repeat": true,
}

var placeholderRE = regexp.MustCompile(`\{([a-z0-9_]+)\}`)

func readMeta(t *testing.T, path string) *metaFile {
	t.Helper()
	var m metaFile
	readYAMLStrict(t, path, &m)
	if want := strings.TrimSuffix(filepath.Base(path), ".yaml"); m.Lang != want {
		t.Fatalf("%s: lang %q, want %q", path, m.Lang, want)
	}
	m.yesWords = wordSet(m.YesWords)
	m.informal = wordSet(m.InformalWords)
	m.abbrevs = wordSet(m.Abbreviations)
	known := map[string]bool{}
	for _, g := range metaGenerators {
		known[g.name] = true
	}
	keys := map[string]bool{}
	for name, tool := range m.Tools {
		for i, f := range tool.Frames {
			if f["verb"] == "" {
				t.Fatalf("%s: tools.%s.frames[%d] has no verb", path, name, i)
			}
			for k := range f {
				keys[k] = true
			}
		}
		for i, o := range tool.Others {
			if o["verb"] == "" {
				t.Fatalf("%s: tools.%s.others[%d] has no verb", path, name, i)
			}
			for k := range o {
				keys["other_"+k] = true
			}
		}
	}
	for name, g := range m.Generators {
		if !known[name] || name == asrGenerator {
			t.Fatalf("%s: generator %q is not one of metaGenerators (or takes no templates)", path, name)
		}
		pairs := make([]metaTemplate, 0, len(g.Pair))
		for _, p := range g.Pair {
			if p.Agent == "" || p.Caller == "" {
				t.Fatalf("%s: %s: a pair needs an agent and a caller template: %+v", path, name, p)
			}
			// Rule 6 is about a turn that asks nothing: a pair's agent
			// template holding a question would test rule 5 instead.
			if strings.ContainsAny(p.Agent, "?¿") {
				t.Fatalf("%s: %s: pair agent template %q asks a question", path, name, p.Agent)
			}
			pairs = append(pairs, metaTemplate{Text: p.Agent + pairSep + p.Caller, Register: p.Register})
		}
		for _, mt := range slices.Concat(g.Agent, g.Caller, pairs) {
			if mt.Register != "" && mt.Register != "formal" && mt.Register != "informal" {
				t.Fatalf("%s: %s: register %q is not formal or informal", path, name, mt.Register)
			}
			for _, p := range placeholderRE.FindAllStringSubmatch(mt.Text, -1) {
				if !metaBuiltins[p[1]] && !keys[p[1]] {
					t.Fatalf("%s: %s: template %q: no tool phrase fills {%s}", path, name, mt.Text, p[1])
				}
			}
		}
	}
	return &m
}

func wordSet(ws []string) map[string]bool {
	s := map[string]bool{}
	for _, w := range ws {
		s[foldWord(w)] = true
	}
	return s
}

// checkFrames verifies that each frame's verb (and object, when given) is
// one the corpus file lists for the tool in this language, and that no
// other action uses one of the tool's verbs: the templates stay tied to
// the tools the guard judges under.
func checkFrames(t *testing.T, path string, c corpusFile, m *metaFile) {
	t.Helper()
	for name, tool := range m.Tools {
		ct := c.Tools[name]
		if ct == nil {
			continue
		}
		verbs, objects := ct.Verbs[m.Lang], ct.Objects[m.Lang]
		for i, f := range tool.Frames {
			if !slices.Contains(verbs, f["verb"]) {
				t.Errorf("%s: metamorphic %s tools.%s.frames[%d]: verb %q is not one of %v", path, m.Lang, name, i, f["verb"], verbs)
			}
			if o, ok := f["object"]; ok && !slices.Contains(objects, o) {
				t.Errorf("%s: metamorphic %s tools.%s.frames[%d]: object %q is not one of %v", path, m.Lang, name, i, o, objects)
			}
		}
		for i, o := range tool.Others {
			if slices.Contains(verbs, o["verb"]) {
				t.Errorf("%s: metamorphic %s tools.%s.others[%d]: %q is the tool's own verb", path, m.Lang, name, i, o["verb"])
			}
			for k, v := range o {
				if k != "verb" && k != "about" && namesVerb(v, verbs) {
					t.Errorf("%s: metamorphic %s tools.%s.others[%d].%s: %q holds one of the tool's verbs %v", path, m.Lang, name, i, k, v, verbs)
				}
			}
		}
	}
}

// metaMutant is one mutated dialogue and what it was made from.
type metaMutant struct {
	gen      metaGenerator
	file     *metaCorpus
	base     int
	template string
	d        dialogue
}

// metaCorpus is one corpus or held-out file with its own guard.
type metaCorpus struct {
	path  string
	c     corpusFile
	g     *Guard
	store *transcript.Store
}

// metaTally counts one generator's mutants in one language.
type metaTally struct {
	generated, failed int
	of                int // generated before the cap
	logs              []string
}

// metaRun is one language's run: its mutants by generator and its counts.
type metaRun struct {
	lang               string
	bases, baseRefused int
	byGen              map[string][]metaMutant
	tallies            map[string]*metaTally
	unsafeN, safeN     int
	falseAccepts       int
	falseRefusals      int
}

func runMetamorphic(t *testing.T, lang string, metas map[string]*metaFile, locs *patterns.Set) {
	r := &metaRun{lang: lang, byGen: map[string][]metaMutant{}, tallies: map[string]*metaTally{}}
	for _, dir := range []string{"testdata/corpus", "testdata/heldout"} {
		r.collect(t, filepath.Join(dir, lang+".yaml"), metas, locs)
	}
	r.play(t)
	r.report(t)
}

// collect plays each base dialogue of the file that the guard must allow on
// a question and keeps the mutants of those it allows.
func (r *metaRun) collect(t *testing.T, path string, metas map[string]*metaFile, locs *patterns.Set) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c := readCorpus(t, path)
	checkFrames(t, path, c, metas[r.lang])
	g, store := corpusGuard(t, path, c, locs)
	mc := &metaCorpus{path: path, c: c, g: g, store: store}
	for i, d := range c.Dialogues {
		if d.Want != "allow" || (d.Reason != "" && d.Reason != "CONFIRMED") {
			continue
		}
		r.bases++
		resp := playMeta(t, mc, fmt.Sprintf("meta-%s-base-%d", filepath.Base(filepath.Dir(path)), i), d)
		if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			r.baseRefused++
			t.Logf("base refused, skipped: %s #%d %q: %s/%s (%s)", path, i, d.Name, resp.GetOutcome(), resp.GetReason(), resp.GetEvidence().GetDetail())
			continue
		}
		for _, m := range mutate(c, d, metas) {
			m.file, m.base = mc, i
			r.byGen[m.gen.name] = append(r.byGen[m.gen.name], m)
		}
	}
}

// play plays at most metaCap mutants of each generator and tallies them.
// METAMORPHIC_DUMP=dir writes every mutant played, with its decision, to
// dir/<lang>.txt, for a native speaker to read.
func (r *metaRun) play(t *testing.T) {
	t.Helper()
	var dump *os.File
	if dir := os.Getenv("METAMORPHIC_DUMP"); dir != "" {
		f, err := os.Create(filepath.Join(dir, r.lang+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dump = f
	}
	logAll := os.Getenv("METAMORPHIC_ALL") != ""
	for _, gen := range metaGenerators {
		all := r.byGen[gen.name]
		n := &metaTally{of: len(all)}
		r.tallies[gen.name] = n
		for k, m := range strideSample(all, metaCap) {
			resp := playMeta(t, m.file, fmt.Sprintf("meta-%s-%s-%d", r.lang, gen.name, k), m.d)
			n.generated++
			if dump != nil {
				fmt.Fprintf(dump, "%s %s want %s got %s/%s [%s #%d, %q]\n%s\n", r.lang, gen.name, gen.want, resp.GetOutcome(), resp.GetReason(),
					m.file.path, m.base, m.template, dialogueText(m.d))
			}
			allowed := resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW
			if gen.want == "refuse" {
				r.unsafeN++
			} else {
				r.safeN++
			}
			if allowed == (gen.want == "allow") {
				continue
			}
			n.failed++
			what := "false refusal"
			if allowed {
				what = "FALSE ACCEPT"
				r.falseAccepts++
			} else {
				r.falseRefusals++
			}
			if len(n.logs) < metaLogCap || logAll {
				n.logs = append(n.logs, fmt.Sprintf("%s %s %s (base %s #%d %q, tool %s %v%s, template %q)\n%s    got %s/%s, detail: %s",
					what, r.lang, gen.name, m.file.path, m.base, m.file.c.Dialogues[m.base].Name, m.d.Tool, m.d.Args, raceNote(m.d.Race), m.template,
					dialogueText(m.d), resp.GetOutcome(), resp.GetReason(), resp.GetEvidence().GetDetail()))
			}
		}
	}
}

// report prints a line per generator and the language's totals, logs the
// failures, and fails on any false accept and on a false-refusal rate
// above metaMaxRefusalRate.
func (r *metaRun) report(t *testing.T) {
	t.Helper()
	for _, gen := range metaGenerators {
		n := r.tallies[gen.name]
		line := fmt.Sprintf("metamorphic %s %s: %d generated, %d failed", r.lang, gen.name, n.generated, n.failed)
		if n.of > n.generated {
			line += fmt.Sprintf(" (a stride over %d)", n.of)
		}
		fmt.Println(line)
	}
	rate := 0.0
	if r.safeN > 0 {
		rate = 100 * float64(r.falseRefusals) / float64(r.safeN)
	}
	summary := fmt.Sprintf("metamorphic %s total: %d bases (%d base refused), %d unsafe mutants: false accepts %d; %d safe mutants: false refusals %d (%.1f%%)",
		r.lang, r.bases, r.baseRefused, r.unsafeN, r.falseAccepts, r.safeN, r.falseRefusals, rate)
	fmt.Println(summary)
	for _, gen := range metaGenerators {
		for _, l := range r.tallies[gen.name].logs {
			t.Log(l)
		}
	}
	if r.unsafeN == 0 || r.safeN == 0 {
		t.Errorf("metamorphic %s: %d unsafe and %d safe mutants; the templates generate nothing", r.lang, r.unsafeN, r.safeN)
	}
	if r.falseAccepts > 0 || rate > metaMaxRefusalRate {
		t.Error(summary)
	}
}

// playMeta plays d on call through the file's guard, as TestCorpus plays a
// dialogue (a race lands its late turn once the Check is in flight).
func playMeta(t *testing.T, mc *metaCorpus, call string, d dialogue) *Verdict {
	t.Helper()
	resp, err := playDialogue(t, mc.g, mc.store, call, mc.c.Lang, d)
	if err != nil {
		t.Fatalf("%s %q (%s): %v", mc.path, d.Name, call, err)
	}
	return resp
}

// strideSample returns at most limit of ms, every k-th, in order.
func strideSample(ms []metaMutant, limit int) []metaMutant {
	if len(ms) <= limit {
		return ms
	}
	out := make([]metaMutant, 0, limit)
	for i := 0; i < limit; i++ {
		out = append(out, ms[i*len(ms)/limit])
	}
	return out
}

// metaBase is what a base dialogue offers the templates.
type metaBase struct {
	c          corpusFile
	d          dialogue
	tool       *Tool
	agentIdx   int // the last agent turn, just before the caller's yes
	agentLang  string
	callerLang string
	pre, q     string // the turn before the question, and the question
	post       string // what follows the question in the turn
	sentences  []string
	qi         int
	values     []string // bound values as the agent turn writes them
	verbs      []string // the tool's verbs in the agent turn's language
	informal   bool
	turnWords  string // the agent turn's words, folded, space-separated
}

// named reports whether the agent turn holds the phrase (a frame's about).
func (b *metaBase) named(phrase string) bool {
	ws := words(phrase)
	return len(ws) > 0 && strings.Contains(" "+b.turnWords+" ", " "+strings.Join(ws, " ")+" ")
}

// asksWithoutMark reports whether the question stays one once a recogniser
// drops its "?": it has none, or it (or its last clause after a comma)
// starts with one of the language's question openers ("shall I", de "soll
// ich", "..., right"). "Le agendo la cita" or "I'll book you in, is that
// right" without the mark could be announcements: no asr mutant.
func (b *metaBase) asksWithoutMark(m *metaFile) bool {
	if !strings.ContainsRune(b.q, '?') {
		return true
	}
	starts := []string{strings.Join(words(b.q), " ")}
	if i := strings.LastIndex(b.q, ","); i >= 0 {
		starts = append(starts, strings.Join(words(b.q[i+1:]), " "))
	}
	for _, op := range m.AsrQuestions {
		o := strings.Join(words(op), " ")
		for _, st := range starts {
			if st == o || strings.HasPrefix(st, o+" ") {
				return true
			}
		}
	}
	return false
}

// mutate returns every mutant of d: one per generator, template and
// dialogue that the template fits.
func mutate(c corpusFile, d dialogue, metas map[string]*metaFile) []metaMutant {
	n := len(d.Turns)
	if n < 2 || d.Turns[n-1].Caller == "" || d.Turns[n-2].Agent == "" {
		return nil
	}
	b := &metaBase{c: c, d: d, tool: c.Tools[d.Tool], agentIdx: n - 2,
		agentLang: turnLang(d.Turns[n-2], c.Lang), callerLang: turnLang(d.Turns[n-1], c.Lang)}
	if b.tool == nil {
		return nil
	}
	am, cm := metas[b.agentLang], metas[b.callerLang]
	var out []metaMutant
	seen := map[string]bool{}
	add := func(gen metaGenerator, template string, md dialogue) {
		key := gen.name + "\x00" + dialogueText(md)
		if seen[key] || dialogueText(md) == dialogueText(d) {
			return
		}
		seen[key] = true
		out = append(out, metaMutant{gen: gen, template: template, d: md})
	}
	if am != nil {
		b.split(am)
	}
	for gi, gen := range metaGenerators {
		if gen.name == asrGenerator {
			if am == nil || !b.asksWithoutMark(am) {
				continue
			}
			md := cloneDialogue(d)
			md.Turns[n-2].Agent = asrText(md.Turns[n-2].Agent)
			md.Turns[n-1].Caller = asrText(md.Turns[n-1].Caller)
			add(gen, "(lower case, no punctuation)", md)
			continue
		}
		if am != nil && b.values != nil {
			for ti, mt := range am.Generators[gen.name].Agent {
				if text, ok := b.mutateAgent(am, cm, gen, mt, gi+ti); ok {
					md := cloneDialogue(d)
					md.Turns[n-2].Agent = text
					add(gen, mt.Text, md)
				}
			}
		}
		// A pair writes both turns in one language: only where the agent
		// and the caller speak the same one.
		if am != nil && am == cm && b.values != nil {
			for ti, p := range am.Generators[gen.name].Pair {
				if agent, caller, ok := b.mutatePair(am, gen, p, gi+ti); ok {
					md := cloneDialogue(d)
					md.Turns[n-2].Agent, md.Turns[n-1].Caller = agent, caller
					add(gen, p.Agent+" / "+p.Caller, md)
				}
			}
		}
		if cm != nil {
			for ti, mt := range cm.Generators[gen.name].Caller {
				if text, ok := b.mutateCaller(cm, gen, mt, gi+ti); ok {
					md := cloneDialogue(d)
					md.Turns[n-1].Caller = text
					add(gen, mt.Text, md)
				}
			}
		}
	}
	return out
}

func turnLang(ct corpusTurn, fileLang string) string {
	l := ct.Lang
	if l == "" {
		l = fileLang
	}
	base, _, _ := strings.Cut(l, "-")
	return strings.ToLower(base)
}

func cloneDialogue(d dialogue) dialogue {
	d.Turns = slices.Clone(d.Turns)
	return d
}

// split finds the question of the agent turn, its bound values, its
// register and the tool's verbs in its language.
func (b *metaBase) split(m *metaFile) {
	text := b.d.Turns[b.agentIdx].Agent
	b.sentences = splitSentences(text, m.abbrevs, m.OrdinalDot)
	b.qi = len(b.sentences) - 1
	for i := len(b.sentences) - 1; i >= 0; i-- {
		if strings.ContainsRune(b.sentences[i], '?') {
			b.qi = i
			break
		}
	}
	b.pre = strings.Join(b.sentences[:b.qi], " ")
	b.q = b.sentences[b.qi]
	b.post = strings.Join(b.sentences[b.qi+1:], " ")
	b.verbs = b.tool.Verbs[m.Lang]
	b.turnWords = strings.Join(words(text), " ")
	for _, w := range words(text) {
		if m.informal[w] {
			b.informal = true
		}
	}
	b.values = []string{}
	for _, arg := range b.tool.Bind {
		v, ok := locateValue(text, b.d.Args[arg], m.Currency)
		if !ok {
			b.values = nil // a bound value the turn does not state: no agent mutants
			return
		}
		b.values = append(b.values, v)
	}
}

// mutateAgent renders an agent template for this base. It skips (false)
// when a placeholder cannot be filled, when the template's register is not
// the turn's, when a bound value would not be stated in the new turn, and,
// for an unsafe generator, when the caller's yes names the tool's verb
// itself ("Yes, send it in.": an instruction that could make the mutant a
// genuine yes, so its label would be uncertain). A yes word is judged in
// the caller's language (cm, nil when no file has it).
func (b *metaBase) mutateAgent(m, cm *metaFile, gen metaGenerator, mt metaTemplate, rot int) (string, bool) {
	if mt.Register != "" && (mt.Register == "informal") != b.informal {
		return "", false
	}
	yes := b.d.Turns[len(b.d.Turns)-1].Caller
	if gen.want == "refuse" {
		if namesVerb(yes, b.c.Tools[b.d.Tool].Verbs[b.callerLang]) {
			return "", false
		}
		if gen.yesWord && (cm == nil || !cm.startsWithYesWord(yes)) {
			return "", false
		}
	}
	fill := map[string]string{
		"turn": b.d.Turns[b.agentIdx].Agent, "pre": b.pre, "q": b.q, "post": b.post,
		"ctx": b.context(),
	}
	// A question without a final mark ("Do you agree to proceed with this
	// submission") cannot be followed by another sentence.
	if _, after, ok := strings.Cut(mt.Text, "{q}"); ok && strings.TrimSpace(after) != "" && !endsSentence(b.q) {
		return "", false
	}
	if strings.HasSuffix(b.q, "?") && !endsWithTag(b.q) {
		fill["q_open"] = strings.TrimRight(strings.TrimSuffix(b.q, "?"), " \u00a0")
	}
	b.fillValues(fill)
	if n := len(m.ActionModifiers); n > 0 {
		fill["mod"] = m.ActionModifiers[rot%n]
	}
	text, ok := b.render(m, mt.Text, fill, rot)
	if !ok {
		return "", false
	}
	if perturbs(mt.Text) {
		// The mutation is the stated value itself: the call's value must
		// be gone from the turn, or the label would be uncertain.
		for _, v := range b.perturbed() {
			if strings.Contains(text, v) {
				return "", false
			}
		}
		return text, true
	}
	for _, v := range b.values {
		if !strings.Contains(text, v) {
			return "", false
		}
	}
	return text, true
}

// perturbs reports whether a template perturbs a stated argument.
func perturbs(template string) bool {
	return strings.Contains(template, "_off}")
}

// perturbed returns the call's values a perturbing template replaces: the
// bound values as the turn writes them, and the string arguments it
// states verbatim.
func (b *metaBase) perturbed() []string {
	out := slices.Clone(b.values)
	if v, ok := b.idArg(); ok {
		out = append(out, v)
	}
	return out
}

// idArg returns the first argument (by name) that is no bound one and is
// a string holding a digit that is no date or time: an id ("A-17"), an
// address ("71 Elm Street"), the last digits of a card.
func (b *metaBase) idArg() (string, bool) {
	for _, k := range slices.Sorted(maps.Keys(b.d.Args)) {
		s, isStr := b.d.Args[k].(string)
		if isStr && !slices.Contains(b.tool.Bind, k) && strings.ContainsAny(s, "0123456789") && !timedArgRE.MatchString(s) {
			return s, true
		}
	}
	return "", false
}

// offDigit writes s with its last digit changed (9 to 8, any other one
// up by one): "$71.25" "$71.26", "A-17" "A-18", "10:00" "10:01". A
// value one digit off is the error a recap or an agent makes, and the
// guard must see it.
func offDigit(s string) string {
	i := strings.LastIndexAny(s, "0123456789")
	if i < 0 {
		return ""
	}
	d := s[i]
	if d == '9' {
		d = '8'
	} else {
		d++
	}
	return s[:i] + string(d) + s[i+1:]
}

// fillValues fills {value} and {amount2} from the bound value, and
// {untimed}: it renders nothing, and only for a call that binds no date or
// time, because a template that rewrites the question from a frame's
// phrases drops the date the question stated, so it fits no booking.
func (b *metaBase) fillValues(fill map[string]string) {
	turn := b.d.Turns[b.agentIdx].Agent
	if len(b.values) > 0 {
		fill["value"] = b.values[0]
		fill["amount2"] = otherAmount(b.values[0])
		if off := offDigit(b.values[0]); off != "" {
			fill["value_off"] = off
			fill["turn_value_off"] = strings.ReplaceAll(turn, b.values[0], off)
		}
	}
	if v, ok := b.idArg(); ok {
		fill["arg"], fill["arg_off"] = v, offDigit(v)
		if strings.Contains(turn, v) {
			fill["turn_arg_off"] = strings.ReplaceAll(turn, v, offDigit(v))
		}
	}
	if !timedArgs(b.d.Args) {
		fill["untimed"] = ""
	}
}

// timedArgs reports whether a call's arguments hold a date or a time
// ("2025-03-11", "10:00", "2025-05-13T10:00").
func timedArgs(args map[string]any) bool {
	for _, v := range args {
		if s, ok := v.(string); ok && timedArgRE.MatchString(s) {
			return true
		}
	}
	return false
}

var timedArgRE = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2})`)

// mutateCaller renders a caller template. A safe template that replaces the
// yes (uses none of {yes...}) applies only when the yes starts with a yes
// word, so the question was one a new yes answers the same way; an
// unsafe one always applies, because a hedge or a take-back is not a plain yes
// whatever the question.
func (b *metaBase) mutateCaller(m *metaFile, gen metaGenerator, mt metaTemplate, rot int) (string, bool) {
	if mt.Register != "" && (mt.Register == "informal") != b.informal {
		return "", false
	}
	yes := b.d.Turns[len(b.d.Turns)-1].Caller
	usesYes := strings.Contains(mt.Text, "{yes")
	if (gen.want == "allow" && !usesYes) || gen.yesWord {
		if !m.startsWithYesWord(yes) {
			return "", false
		}
	}
	fill := map[string]string{"yes": yes}
	if head, tail, ok := strings.Cut(yes, ", "); ok && head != "" && tail != "" {
		fill["yes_head"], fill["yes_tail"] = head, tail
	}
	if m.startsWithYesWord(yes) {
		first, _, _ := strings.Cut(yes, " ")
		first = strings.TrimRightFunc(first, unicode.IsPunct)
		lc := lowerFirstRune(yes)
		fill["yes_lc"] = lc
		// A yes that repeats itself already ("Ja, ja, ...") is not
		// repeated again.
		if ws := words(yes); len(ws) < 2 || ws[1] != ws[0] {
			fill["yes_repeat"] = first + ", " + lc
			if utf8.RuneCountInString(first) >= 3 {
				fill["yes_stutter"] = string([]rune(first)[:2]) + "- " + lc
			}
		}
	}
	if len(b.values) > 0 {
		fill["value"] = b.values[0]
	}
	return b.render(m, mt.Text, fill, rot)
}

// mutatePair renders a pair's agent and caller templates with one frame.
// It skips when a placeholder cannot be filled or the register is not the
// agent turn's, and, for a safe generator, when a bound value is stated in
// neither turn: rule 6 then rightly refuses, so the label would be wrong.
func (b *metaBase) mutatePair(m *metaFile, gen metaGenerator, p metaPair, rot int) (agent, caller string, ok bool) {
	if p.Register != "" && (p.Register == "informal") != b.informal {
		return "", "", false
	}
	fill := map[string]string{}
	b.fillValues(fill)
	text, ok := b.render(m, p.Agent+pairSep+p.Caller, fill, rot)
	if !ok {
		return "", "", false
	}
	agent, caller, ok = strings.Cut(text, pairSep)
	if !ok || agent == "" || caller == "" {
		return "", "", false
	}
	if gen.want == "allow" {
		for _, v := range b.values {
			if !strings.Contains(agent, v) && !strings.Contains(caller, v) {
				return "", "", false
			}
		}
	}
	return agent, caller, true
}

func (m *metaFile) startsWithYesWord(s string) bool {
	ws := words(s)
	return len(ws) > 0 && m.yesWords[ws[0]]
}

// render fills a template: builtins from fill, other keys from one of the
// tool's frames (or others, for other_ keys) that has them all, chosen by
// rot so that a dialogue's templates rotate through the frames.
func (b *metaBase) render(m *metaFile, text string, fill map[string]string, rot int) (string, bool) {
	var frameKeys, otherKeys []string
	for _, p := range placeholderRE.FindAllStringSubmatch(text, -1) {
		switch {
		case metaBuiltins[p[1]]:
		case strings.HasPrefix(p[1], "other_"):
			otherKeys = append(otherKeys, strings.TrimPrefix(p[1], "other_"))
		default:
			frameKeys = append(frameKeys, p[1])
		}
	}
	tool := m.Tools[b.d.Tool]
	about := ""
	if len(frameKeys) > 0 {
		f, ok := pickFrame(tool.Frames, frameKeys, b.verbs, "", b.named, rot)
		if !ok {
			return "", false
		}
		for _, k := range frameKeys {
			fill[k] = f[k]
		}
		about = f["about"]
	}
	if len(otherKeys) > 0 {
		o, ok := pickFrame(tool.Others, otherKeys, nil, about, b.named, rot)
		if !ok {
			return "", false
		}
		for _, k := range otherKeys {
			fill["other_"+k] = o[k]
		}
	}
	out, ok := text, true
	for range 3 { // frame phrases may hold {value}
		out = placeholderRE.ReplaceAllStringFunc(out, func(s string) string {
			v, has := fill[s[1:len(s)-1]]
			if !has {
				ok = false
			}
			return v
		})
		if !ok || !placeholderRE.MatchString(out) {
			break
		}
	}
	if !ok || placeholderRE.MatchString(out) {
		return "", false
	}
	return strings.Join(strings.Fields(out), " "), true
}

// pickFrame picks, among the frames that have every key (and, when verbs is
// given, whose verb is one of them; when about is given, whose about, if
// any, is the same), the rot-th; of those, named keeps the ones whose about
// it reports true for, when there are any. about ties another action to
// the frame's object, so that a pronoun in one refers to the other's noun
// ("print the appeal instead of submitting it", de "ihn" for "den
// Widerspruch"); named keeps the noun the agent's turn already uses.
func pickFrame(frames []map[string]string, keys, verbs []string, about string, named func(string) bool, rot int) (map[string]string, bool) {
	fit := fitFrames(frames, keys, verbs, about)
	if named != nil {
		var same []map[string]string
		for _, f := range fit {
			if named(f["about"]) {
				same = append(same, f)
			}
		}
		if len(same) > 0 {
			fit = same
		}
	}
	if len(fit) == 0 {
		return nil, false
	}
	return fit[rot%len(fit)], true
}

func fitFrames(frames []map[string]string, keys, verbs []string, about string) []map[string]string {
	var fit []map[string]string
	for _, f := range frames {
		if verbs != nil && !slices.Contains(verbs, f["verb"]) {
			continue
		}
		if a, ok := f["about"]; ok && about != "" && a != about {
			continue
		}
		all := true
		for _, k := range keys {
			if _, ok := f[k]; !ok {
				all = false
			}
		}
		if all {
			fit = append(fit, f)
		}
	}
	return fit
}

// context is the turn before the question without the sentences that name
// the tool's verb or state a bound value: what stays true when a template
// replaces the question with another proposal.
func (b *metaBase) context() string {
	var keep []string
	for _, s := range b.sentences[:b.qi] {
		drop := namesVerb(s, b.verbs)
		for _, v := range b.values {
			if strings.Contains(s, v) {
				drop = true
			}
		}
		if !drop {
			keep = append(keep, s)
		}
	}
	return strings.Join(keep, " ")
}

// endsSentence reports whether s ends with a sentence's final mark.
func endsSentence(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(strings.TrimRight(s, "\"»)"))
	return strings.ContainsRune(".?!…", r)
}

// endsWithTag reports whether a question ends in a short tag after a comma
// ("..., right?", fr "..., c'est bien ça ?"): at most four words, which a
// template must not extend with ", or ...".
func endsWithTag(q string) bool {
	i := strings.LastIndex(q, ",")
	if i < 0 {
		return false
	}
	n := 0
	for _, f := range strings.Fields(q[i+1:]) {
		if strings.IndexFunc(f, unicode.IsLetter) >= 0 {
			n++
		}
	}
	return n <= 4
}

// splitSentences splits text after . ! ? or … followed by a space and an
// upper-case letter or opening mark, except after one of abbrevs (folded
// words: "dr") and, with ordinalDot, after a number ("am 3. März").
func splitSentences(text string, abbrevs map[string]bool, ordinalDot bool) []string {
	rs := []rune(text)
	var out []string
	start := 0
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r != '.' && r != '?' && r != '!' && r != '…' {
			continue
		}
		j := i
		for j+1 < len(rs) && strings.ContainsRune(".?!…\"»)", rs[j+1]) {
			j++
		}
		k := j + 1
		for k < len(rs) && unicode.IsSpace(rs[k]) {
			k++
		}
		if k == j+1 || k >= len(rs) {
			i = j
			continue
		}
		next := rs[k]
		opens := unicode.IsUpper(next) || strings.ContainsRune("¿¡\"«(", next)
		if !opens || (r == '.' && j == i && abbreviation(rs[start:i], abbrevs, ordinalDot)) {
			i = j
			continue
		}
		out = append(out, strings.TrimSpace(string(rs[start:j+1])))
		start, i = k, j
	}
	if rest := strings.TrimSpace(string(rs[start:])); rest != "" {
		out = append(out, rest)
	}
	return out
}

func abbreviation(before []rune, abbrevs map[string]bool, ordinalDot bool) bool {
	i := len(before)
	for i > 0 && !unicode.IsSpace(before[i-1]) {
		i--
	}
	w := before[i:]
	if len(w) == 0 {
		return false
	}
	if ordinalDot && allRunes(w, unicode.IsDigit) {
		return true
	}
	return abbrevs[foldWord(string(w))]
}

func allRunes(rs []rune, f func(rune) bool) bool {
	for _, r := range rs {
		if !f(r) {
			return false
		}
	}
	return true
}

// namesVerb reports whether text holds a word built on one of the verbs
// (the first word of each: "send" of "send in", "sacar" of "sacar cita"),
// with doubled letters collapsed (nl "betaal", "betalen"): a word that
// starts with its stem (all but its last three letters, at least three),
// or, of three letters or more, follows a particle of one to four letters
// in it (a separable verb's stem, de "sag ... ab", "reichen ... ein"; not
// "ich" of "einreichen"). It is a guess that errs towards yes: it only ever makes the
// test skip a mutant or a sentence.
func namesVerb(text string, verbs []string) bool {
	var vws []string
	for _, v := range verbs {
		if ws := words(v); len(ws) > 0 {
			vws = append(vws, collapseDoubles(ws[0]))
		}
	}
	for _, w := range words(text) {
		w = collapseDoubles(w)
		for _, v := range vws {
			vr := []rune(v)
			if len(vr) < 3 {
				continue
			}
			if strings.HasPrefix(w, string(vr[:max(3, len(vr)-3)])) {
				return true
			}
			if n := utf8.RuneCountInString(w); n >= 3 {
				for k := 1; k <= 4 && k+n <= len(vr); k++ {
					if string(vr[k:k+n]) == w {
						return true
					}
				}
			}
		}
	}
	return false
}

// collapseDoubles writes each run of one letter once ("betaal" "betal").
func collapseDoubles(w string) string {
	var b strings.Builder
	var last rune
	for i, r := range w {
		if i == 0 || r != last {
			b.WriteRune(r)
		}
		last = r
	}
	return b.String()
}

// foldWord lower-cases w and strips its accents. A transform.Chain keeps
// state, so each call builds its own: the languages run in parallel.
func foldWord(w string) string {
	fold := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	s, _, err := transform.String(fold, strings.ToLower(w))
	if err != nil {
		return strings.ToLower(w)
	}
	return s
}

// words splits text into folded words of letters (apostrophes and hyphens
// end a word).
func words(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		out = append(out, foldWord(w))
	}
	return out
}

// lowerFirstRune lower-cases the first letter of s.
func lowerFirstRune(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

// asrText writes s as a recogniser does: lower case, no punctuation, except
// inside a number ("120,50", "3:30") and a word ("mm-hmm", "l'appel").
func asrText(s string) string {
	rs := []rune(strings.ToLower(s))
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsPunct(r) {
			prev, next := rune(0), rune(0)
			if i > 0 {
				prev = rs[i-1]
			}
			if i+1 < len(rs) {
				next = rs[i+1]
			}
			inNumber := strings.ContainsRune(".,:", r) && unicode.IsDigit(prev) && unicode.IsDigit(next)
			inWord := strings.ContainsRune("'’-", r) && unicode.IsLetter(prev) && unicode.IsLetter(next)
			if !inNumber && !inWord {
				b.WriteRune(' ')
				continue
			}
		}
		b.WriteRune(r)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

var numberRE = regexp.MustCompile(`\d+(?:[.,]\d+)*`)

// locateValue finds how text writes the argument value: a number equal to
// it, with a currency written next to it (before, after or both: "$1,250.50
// pesos"), or the value verbatim.
func locateValue(text string, arg any, currency []string) (string, bool) {
	want, isNum := argNumber(arg)
	if !isNum {
		s := fmt.Sprint(arg)
		return s, s != "" && strings.Contains(text, s)
	}
	curs := sortedLongestFirst(currency)
	for _, loc := range numberRE.FindAllStringIndex(text, -1) {
		v, ok := parseAmount(text[loc[0]:loc[1]])
		if !ok || math.Abs(v-want) > 0.001 {
			continue
		}
		start, end := loc[0], loc[1]
		if w := currencyAt(text[:start], curs, true); w > 0 {
			start -= w
		}
		end += currencyAt(text[end:], curs, false)
		return text[start:end], true
	}
	return "", false
}

// currencyAt returns the length of the currency (with one space) that ends
// side (before, for the text before a number) or starts it: a currency word
// must not be part of a longer word ("euros" in "eurosystem").
func currencyAt(side string, curs []string, before bool) int {
	for _, cur := range curs {
		for _, sep := range []string{"", " ", "\u00a0"} {
			if before && strings.HasSuffix(side, cur+sep) && !joinsWord(side[:len(side)-len(cur+sep)], cur) {
				return len(cur + sep)
			}
			if !before && strings.HasPrefix(side, sep+cur) && !joinsWord(cur, side[len(sep+cur):]) {
				return len(sep + cur)
			}
		}
	}
	return 0
}

// joinsWord reports whether a ends and b starts with a letter: written
// together, they would be one word.
func joinsWord(a, b string) bool {
	ra, _ := utf8.DecodeLastRuneInString(a)
	rb, _ := utf8.DecodeRuneInString(b)
	return a != "" && b != "" && unicode.IsLetter(ra) && unicode.IsLetter(rb)
}

func sortedLongestFirst(ss []string) []string {
	out := slices.Clone(ss)
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// argNumber reads an argument as an amount: a number, or a string written
// with either decimal mark ("89,90", "1.200,50").
func argNumber(arg any) (float64, bool) {
	switch v := arg.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case string:
		return parseAmount(v)
	}
	return 0, false
}

// parseAmount reads "1,250.00", "1.200,50", "120,50", "1.200" or "45". The
// last mark is the decimal one unless it is the only kind and three digits
// follow it (a thousands mark).
func parseAmount(s string) (float64, bool) {
	last := strings.LastIndexAny(s, ".,")
	if last < 0 {
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	mark := s[last]
	other := byte(',')
	if mark == ',' {
		other = '.'
	}
	intPart, frac, thousands := s[:last], s[last+1:], other
	if strings.IndexByte(s, other) < 0 && len(frac) == 3 {
		intPart, frac, thousands = s, "", mark
	}
	if strings.IndexByte(intPart, mark) >= 0 && thousands != mark {
		return 0, false
	}
	groups := strings.Split(intPart, string(thousands))
	for i, g := range groups {
		if g == "" || (i > 0 && len(g) != 3) || (i == 0 && len(groups) > 1 && len(g) > 3) {
			return 0, false
		}
	}
	num := strings.Join(groups, "")
	if frac != "" {
		num += "." + frac
	}
	v, err := strconv.ParseFloat(num, 64)
	return v, err == nil
}

// otherAmount writes another amount (15, or 25 if the value is 15) the way
// value is written: its currency, its decimal mark and decimals.
func otherAmount(value string) string {
	loc := numberRE.FindStringIndex(value)
	if loc == nil {
		return ""
	}
	num := value[loc[0]:loc[1]]
	v, _ := parseAmount(num)
	n := 15
	if math.Abs(v-15) < 1 {
		n = 25
	}
	s := strconv.Itoa(n)
	if last := strings.LastIndexAny(num, ".,"); last >= 0 && len(num)-last-1 == 2 {
		s += num[last:last+1] + "00"
	}
	return value[:loc[0]] + s + value[loc[1]:]
}

// TestMetamorphicText checks the language-neutral text handling the
// generators rest on; its strings are fixtures, not generator words.
func TestMetamorphicText(t *testing.T) {
	t.Run("sentences", func(t *testing.T) {
		for _, tc := range []struct {
			text       string
			ordinalDot bool
			want       int
		}{
			{"Dr. Nguyen can see you Monday at 10:15. Do you want me to schedule that?", false, 2},
			{"The next opening is Thursday at 9 AM. Shall I book it for you?", false, 2},
			{"Der Termin ist am Montag, den 2. Juni, um 8 Uhr. Soll ich ihn so buchen?", true, 2},
			{"Der Termin ist am Montag, den 2. Juni, um 8 Uhr. Soll ich ihn so buchen?", false, 3},
			{"Vale, ¿te presento el recurso hoy?", false, 1},
			{"Je vous programme ce rendez-vous ? Je le réserve tout de suite si vous êtes d'accord.", false, 2},
			{"Uw factuur nr. 4711 van € 89,90 is vervallen. Wilt u die nu betalen?", false, 2},
			{"I'll submit it. Is that okay?", false, 2},
		} {
			if got := splitSentences(tc.text, wordSet([]string{"Dr", "nr"}), tc.ordinalDot); len(got) != tc.want {
				t.Errorf("splitSentences(%q, %v) = %q, want %d sentences", tc.text, tc.ordinalDot, got, tc.want)
			}
		}
	})
	t.Run("amounts", func(t *testing.T) {
		for s, want := range map[string]float64{"1,250.00": 1250, "1.200,50": 1200.5, "120,50": 120.5, "1.200": 1200, "45": 45, "75.00": 75} {
			if got, ok := parseAmount(s); !ok || got != want {
				t.Errorf("parseAmount(%q) = %v, %v; want %v", s, got, ok, want)
			}
		}
		for _, s := range []string{"14.03.2025", "1.2.3", ""} {
			if got, ok := parseAmount(s); ok {
				t.Errorf("parseAmount(%q) = %v, want no amount", s, got)
			}
		}
	})
	t.Run("values", func(t *testing.T) {
		for _, tc := range []struct {
			text     string
			arg      any
			currency []string
			want     string
		}{
			{"Your balance is $120.50, card ending in 4412. Pay it?", 120.5, []string{"$"}, "$120.50"},
			{"El importe total es de 1.200,50 pesos. ¿Se lo cobro?", 1200.5, []string{"€", "pesos"}, "1.200,50 pesos"},
			{"Soll ich den Betrag von € 89,90 überweisen?", "89,90", []string{"€", "Euro"}, "€ 89,90"},
			{"O senhor quer quitar a fatura de R$ 1.200,50, correto?", "1.200,50", []string{"R$", "reais"}, "R$ 1.200,50"},
			{"Je fais le paiement de 75,00 $ sur votre carte ?", 75, []string{"€", "$"}, "75,00 $"},
		} {
			if got, ok := locateValue(tc.text, tc.arg, tc.currency); !ok || got != tc.want {
				t.Errorf("locateValue(%q, %v) = %q, %v; want %q", tc.text, tc.arg, got, ok, tc.want)
			}
		}
		if got, ok := locateValue("Shall I pay the bill now?", 120.5, []string{"$"}); ok {
			t.Errorf("locateValue found %q in a turn without the value", got)
		}
		for value, want := range map[string]string{"$120.50": "$15.00", "1.200 pesos": "15 pesos", "15,00 €": "25,00 €"} {
			if got := otherAmount(value); got != want {
				t.Errorf("otherAmount(%q) = %q, want %q", value, got, want)
			}
		}
	})
	t.Run("asr", func(t *testing.T) {
		for in, want := range map[string]string{
			"Is that okay? Yes, $1,250.00 at 3:30.": "is that okay yes $1,250.00 at 3:30",
			"Mm-hmm.":                               "mm-hmm",
			"¿Le agendo la cita?":                   "le agendo la cita",
			"Je confirme l'annulation, d'accord ?":  "je confirme l'annulation d'accord",
		} {
			if got := asrText(in); got != want {
				t.Errorf("asrText(%q) = %q, want %q", in, got, want)
			}
		}
	})
	t.Run("verbs", func(t *testing.T) {
		for _, tc := range []struct {
			text  string
			verbs []string
			want  bool
		}{
			{"Yes, send it in.", []string{"submit", "send in"}, true},
			{"Ja, sag den ab.", []string{"stornieren", "absagen"}, true},
			{"Ja, reichen Sie ihn ein.", []string{"einreichen"}, true},
			{"Ja, betaal die maar.", []string{"betalen"}, true},
			{"Sí, cancélela.", []string{"cancelar"}, true},
			{"Yes, please.", []string{"submit", "file", "send in"}, false},
			{"Ja, den nehme ich.", []string{"absenden", "einreichen"}, false},
		} {
			if got := namesVerb(tc.text, tc.verbs); got != tc.want {
				t.Errorf("namesVerb(%q, %v) = %v, want %v", tc.text, tc.verbs, got, tc.want)
			}
		}
	})
	t.Run("tags", func(t *testing.T) {
		for q, want := range map[string]bool{
			"So I'll book you in for Tuesday, right?":                                        true,
			"Je vous annule donc le rendez-vous de lundi, c'est bien ça ?":                   true,
			"Just to confirm, you want me to cancel your appointment on March 3rd at 11 AM?": false,
			"Shall I submit it now?":                                                         false,
		} {
			if got := endsWithTag(q); got != want {
				t.Errorf("endsWithTag(%q) = %v, want %v", q, got, want)
			}
		}
	})
}
