package patterns

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

func en(t testing.TB) *Locale {
	t.Helper()
	s, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	l := s.Get("en-US")
	if l == nil {
		t.Fatal("no en locale for en-US")
	}
	return l
}

func TestFoldAndParse(t *testing.T) {
	l := en(t)
	for _, tc := range []struct {
		in     string
		tokens [][]string
		marked []bool
	}{
		{"Yes. Wait, no.", [][]string{{"yes"}, {"wait", "no"}}, []bool{false, false}},
		{"Shall I pay $1,200.50?", [][]string{{"shall", "i", "pay", "1,200.50"}}, []bool{true}},
		{"That’s RIGHT", [][]string{{"that's", "right"}}, []bool{false}},
		{"¿Envíe la apelación", [][]string{{"envie", "la", "apelacion"}}, []bool{true}},
		{"mm-hmm… sure!", [][]string{{"mm", "hmm"}, {"sure"}}, []bool{false, false}},
		{"Straße", [][]string{{"strasse"}}, []bool{false}},
		{"", nil, nil},
	} {
		got := l.Parse(tc.in)
		if len(got.Sentences) != len(tc.tokens) {
			t.Fatalf("Parse(%q) = %+v", tc.in, got)
		}
		for i, s := range got.Sentences {
			if strings.Join(s.Tokens, "|") != strings.Join(tc.tokens[i], "|") || s.Marked != tc.marked[i] {
				t.Errorf("Parse(%q)[%d] = %q marked=%v, want %q marked=%v", tc.in, i, s.Tokens, s.Marked, tc.tokens[i], tc.marked[i])
			}
		}
	}
}

func TestParseNumber(t *testing.T) {
	l := en(t)
	for in, want := range map[string]float64{
		"120.50": 120.5, "120,50": 120.5, "1,200.50": 1200.5, "1,200": 1200, "1,200,000": 1200000,
		"1.200,50": 1200.5, "42": 42, "two": 2, "dozen": 12,
	} {
		got, ok := l.ParseNumber(in)
		if !ok || got != want {
			t.Errorf("ParseNumber(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := l.ParseNumber("appeal"); ok {
		t.Error("a word read as a number")
	}
}

func TestJudgeAnswer(t *testing.T) {
	l := en(t)
	a := l.CompileAction([]string{"submit", "send in"}, []string{"appeal"})
	type verdict struct{ negated, notPlain, affirmative, verb bool }
	for _, tc := range []struct {
		text string
		want verdict
	}{
		{"Yes.", verdict{affirmative: true}},
		{"Yeah sure, go ahead.", verdict{affirmative: true}},
		{"Mm-hmm.", verdict{affirmative: true}},
		{"Yes please, thank you so much.", verdict{affirmative: true}},
		{"No problem.", verdict{affirmative: true}},
		{"Yes, send it in.", verdict{affirmative: true, verb: true}},
		{"Submit the appeal.", verdict{verb: true}},
		{"No.", verdict{negated: true}},
		{"Yes. Wait, no.", verdict{negated: true}},
		{"Don't.", verdict{negated: true}},
		{"Hold on a second.", verdict{negated: true}},
		{"Yes, I guess.", verdict{notPlain: true, affirmative: true}},
		{"Yes if it's free.", verdict{notPlain: true, affirmative: true}},
		{"Yes, but does that cost extra?", verdict{notPlain: true, affirmative: true}},
		{"Yes and also email me.", verdict{notPlain: true, affirmative: true}},
		{"What does that mean", verdict{notPlain: true}},
		{"Yes the blue one with the stripes please", verdict{notPlain: true, affirmative: true}},
		{"Tell me more.", verdict{notPlain: true}},
	} {
		j := l.JudgeAnswer(l.Parse(tc.text), a, nil)
		got := verdict{j.Negated, j.NotPlain, j.Affirmative, j.Verb}
		// A negated turn stops judging; only Negated matters there.
		if tc.want.negated {
			if !j.Negated {
				t.Errorf("%q: not negated: %+v", tc.text, j)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%q = %+v, want %+v (detail %q)", tc.text, got, tc.want, j.Detail)
		}
		if got.notPlain && j.Detail == "" {
			t.Errorf("%q: not plain without a detail", tc.text)
		}
	}
}

func TestEchoOfTheQuestionIsPlain(t *testing.T) {
	l := en(t)
	q := l.Parse("Shall I book Tuesday at 3?")
	echo := TokenSet(q)
	if j := l.JudgeAnswer(l.Parse("Yes, Tuesday at 3."), nil, echo); j.NotPlain || !j.Affirmative {
		t.Fatalf("echo judged %+v", j)
	}
	if j := l.JudgeAnswer(l.Parse("Yes, Wednesday at 3."), nil, echo); !j.NotPlain {
		t.Fatalf("a changed detail judged plain: %+v", j)
	}
}

func TestLastQuestion(t *testing.T) {
	l := en(t)
	for _, tc := range []struct {
		text, want string
		ok         bool
	}{
		{"Shall I submit the appeal?", "shall i submit the appeal?", true},
		{"Please confirm if you would like to proceed with this appointment.", "please confirm if you would like to proceed with this appointment.", true},
		{"Do you agree to proceed with this submission", "do you agree to proceed with this submission", true},
		{"Shall I submit it? Would you like a copy too?", "would you like a copy too?", true},
		{"Shall I submit it? I will email a copy as well.", "shall i submit it?", true},
		{"I will now submit the request.", "", false},
		{"Okay.", "", false},
		{"I'll go ahead and submit the appeal.", "", false},
	} {
		q, ok := l.LastQuestion(l.Parse(tc.text))
		if ok != tc.ok || (ok && q.Sentence.Raw != tc.want) {
			t.Errorf("LastQuestion(%q) = %q, %v; want %q, %v", tc.text, q.Sentence.Raw, ok, tc.want, tc.ok)
		}
	}
}

func TestRefers(t *testing.T) {
	l := en(t)
	a := l.CompileAction([]string{"submit", "file"}, []string{"appeal", "submission"})
	others := l.MergeActions([]string{"email", "cancel", "refund"})
	for _, tc := range []struct {
		sentence string
		want     RefKind
	}{
		{"Shall I submit the appeal?", RefVerb},
		{"Should I get that appeal submitted?", RefVerb},
		{"Is the appeal filed yet?", RefVerb},
		{"Do you agree to proceed with this appeal?", RefObject},
		{"Please confirm the appeal.", RefObject},
		{"Would you like to proceed?", RefProceed},
		{"Shall I go ahead with it?", RefProceed},
		{"Do you want me to do that?", RefBack},
		{"Sound good?", RefBack},
		{"Would you like a copy of the appeal emailed to you?", RefOther},
		{"Would you like to proceed with the refund?", RefOther},
		{"Shall I cancel it?", RefOther},
		{"Would you like a receipt?", RefNone},
	} {
		s := l.Parse(tc.sentence).Sentences[0]
		if got := l.Refers(s, a, others); got.Kind != tc.want {
			t.Errorf("Refers(%q) = %v %v, want %v", tc.sentence, got.Kind, got.Matches, tc.want)
		}
	}
}

func TestInflection(t *testing.T) {
	l := en(t)
	a := l.CompileAction([]string{"submit", "schedule", "cancel", "send in"}, nil)
	for _, w := range []string{"submits", "submitted", "submitting", "submission", "scheduling", "scheduled", "cancelled", "cancellation", "sent in", "send it in"} {
		if len(a.verbs.find(l.Parse(w).Tokens())) == 0 {
			t.Errorf("%q does not match", w)
		}
	}
	for _, w := range []string{"sub", "mission", "sending"} {
		if len(a.verbs.find(l.Parse(w).Tokens())) != 0 {
			t.Errorf("%q matches", w)
		}
	}
}

func TestStatesQuantityAndValues(t *testing.T) {
	l := en(t)
	for text, want := range map[string]bool{"Two more please.": true, "Another one.": true, "Add 3.": true, "Yes.": false} {
		if got := l.StatesQuantity(l.Parse(text)); got != want {
			t.Errorf("StatesQuantity(%q) = %v", text, got)
		}
	}
	q := l.Parse("Shall I book Dr. Smith for Tuesday?")
	if !l.ContainsValue(q, "tuesday") || l.ContainsValue(q, "Wednesday") || !l.ContainsValue(q, "Smith") {
		t.Error("ContainsValue wrong")
	}
}

const minimalLocale = `lang: xx
name: Test
max_plain_words: 5
affirmatives: [ja]
negations: [nein]
hedges: [vielleicht]
conditions: [aber]
question_words: [was]
confirm_requests: [bitte bestatigen]
proceed: [weiter]
back_references: [das]
`

func TestLocaleValidationNamesFileAndKey(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"wrong lang", strings.Replace(minimalLocale, "lang: xx", "lang: yy", 1), "xx.yaml: lang"},
		{"unknown key", minimalLocale + "affirmativs: [x]\n", "affirmativs"},
		{"empty phrase", strings.Replace(minimalLocale, "[ja]", "[ja, \"\"]", 1), "affirmatives[1]"},
		{"duplicate phrase", strings.Replace(minimalLocale, "[ja]", "[ja, JA]", 1), "affirmatives[1]"},
		{"missing list", strings.Replace(minimalLocale, "negations: [nein]\n", "", 1), "negations"},
		{"gap at the edge", strings.Replace(minimalLocale, "[weiter]", "[\"* weiter\"]", 1), "proceed[0]"},
		{"bad max", strings.Replace(minimalLocale, "max_plain_words: 5", "max_plain_words: 0", 1), "max_plain_words"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFS(fstest.MapFS{"xx.yaml": {Data: []byte(tc.body)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
	s, err := LoadFS(fstest.MapFS{"xx.yaml": {Data: []byte(minimalLocale)}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Get("xx-YY") == nil || s.Get("en") != nil {
		t.Fatal("Get by tag wrong")
	}
}

func TestLoadDirOverridesAndAdds(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/xx.yaml", minimalLocale); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Get("xx") == nil || s.Get("en") == nil {
		t.Fatalf("langs = %v", s.Langs())
	}
	if err := writeFile(dir+"/en.yaml", "lang: en\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "en.yaml") {
		t.Fatalf("a broken override loaded: %v", err)
	}
}

func FuzzJudge(f *testing.F) {
	l := en(f)
	a := l.CompileAction([]string{"submit", "send in"}, []string{"appeal"})
	for _, s := range []string{"Yes.", "Yes. Wait, no.", "¿Envíe?", "1,200.50", "j'envoie", "--", "’'", "* ~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		txt := l.Parse(s)
		j := l.JudgeAnswer(txt, a, TokenSet(txt))
		if j.Negated && j.NotPlain {
			t.Fatalf("%q judged negated and not plain", s)
		}
		if q, ok := l.LastQuestion(txt); ok {
			l.Refers(q.Sentence, a, a)
		}
		l.Numbers(txt)
		l.StatesQuantity(txt)
	})
}

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o600) }
