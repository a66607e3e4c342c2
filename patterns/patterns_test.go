package patterns

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"unicode/utf8"
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
		{"Mm-hmm.", verdict{notPlain: true}}, // a backchannel alone: "I am listening", not yes
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
	others := l.MergeActions([]string{"email", "cancel", "refund"}, nil)
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
	for _, w := range []string{"submits", "submitted", "submitting", "scheduling", "scheduled", "cancelled", "sent in", "send it in"} {
		if len(a.verbs.find(l.Parse(w).Tokens())) == 0 {
			t.Errorf("%q does not match", w)
		}
	}
	// The nouns a verb makes name what it acts on, not the action:
	// "cancel the reservation" is no booking.
	for _, w := range []string{"submission", "cancellation", "scheduler"} {
		if len(a.verbs.find(l.Parse(w).Tokens())) != 0 || len(a.objects.find(l.Parse(w).Tokens())) == 0 {
			t.Errorf("%q: want a noun of the verb, an object", w)
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

// FuzzJudge holds the judge to what must be true of any text: it never
// panics; it decides the same twice; a refusal says why; an allowed yes
// holds no negation and leaves no word of the question unexplained; a
// negated answer names its negation.
func FuzzJudge(f *testing.F) {
	l := en(f)
	a := l.CompileAction([]string{"submit", "send in"}, []string{"appeal"})
	others := l.MergeActions([]string{"cancel", "email"}, []string{"copy"})
	tool := Tool{Action: a, Others: others}
	for _, s := range [][2]string{{"Shall I submit the appeal?", "Yes."}, {"Shall I submit it?", "Yes. Wait, no."},
		{"¿Envíe?", "sí"}, {"I can submit it now. Sound good?", "1,200.50"}, {"j'envoie", "--"}, {"’'", "* ~"},
		{"Would you like me to submit it later?", "yes"}, {"Shall I send it in for you today?", "sure, go ahead"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, question, answer string) {
		in := Input{
			Answer:   Turn{Locale: l, Text: answer, Tool: tool},
			Question: &Turn{Locale: l, Text: question, Tool: tool},
			Args:     []Argument{{Name: "appeal_id", Value: "A-17"}},
		}
		v := Judge(in)
		if again := Judge(in); again.Outcome != v.Outcome || again.Detail != v.Detail {
			t.Fatalf("judged twice: %v (%s), then %v (%s)", v.Outcome, v.Detail, again.Outcome, again.Detail)
		}
		if !v.Outcome.Allows() && v.Detail == "" {
			t.Fatalf("%q / %q: %v without a detail", question, answer, v.Outcome)
		}
		j := l.JudgeAnswer(l.Parse(answer), a, nil)
		if v.Outcome.Allows() && (j.Negated || len(v.Unexplained) > 0) {
			t.Fatalf("%q / %q allowed with a negation or unexplained words %q", question, answer, v.Unexplained)
		}
		if j.Negated {
			found := false
			for _, m := range j.Matches {
				found = found || m.Rule == "negation"
			}
			if !found {
				t.Fatalf("%q negated without a negation match: %+v", answer, j.Matches)
			}
		}
		txt := l.Parse(question)
		l.Numbers(txt)
		l.StatesQuantity(txt)
	})
}

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o600) }

// --- German and Dutch, and the locale keys they brought ---------------------

// locale loads one embedded locale by language code.
func locale(t testing.TB, lang string) *Locale {
	t.Helper()
	s, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	l := s.Get(lang)
	if l == nil {
		t.Fatalf("no %s locale", lang)
	}
	return l
}

func TestFoldIsSafeConcurrently(t *testing.T) {
	in := []string{"Überweisung", "Straße", "geannuleerd én", "réservez-le", "Möchten Sie fortfahren?"}
	want := []string{"uberweisung", "strasse", "geannuleerd en", "reservez-le", "mochten sie fortfahren?"}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := i % len(in)
				if got := Fold(in[k]); got != want[k] {
					errs <- fmt.Sprintf("Fold(%q) = %q", in[k], got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestParseGermanDutch(t *testing.T) {
	de, nl := locale(t, "de"), locale(t, "nl")
	for _, tc := range []struct {
		l      *Locale
		in     string
		tokens [][]string
	}{
		// ordinal_dot: a date is one sentence.
		{de, "Soll ich den Termin am 12. Mai buchen?", [][]string{{"soll", "ich", "den", "termin", "am", "12", "mai", "buchen"}}},
		{de, "Es kostet 120. Soll ich?", [][]string{{"es", "kostet", "120"}, {"soll", "ich"}}},
		// clitics: 's is es.
		{de, "Genau, so machen wir's. Wenn's geht!", [][]string{{"genau", "so", "machen", "wir", "es"}, {"wenn", "es", "geht"}}},
		{de, "Überweisung über 1.200,50 €", [][]string{{"uberweisung", "uber", "1.200,50"}}},
		{nl, "Oké, dien 't maar in. Ik wacht.", [][]string{{"oke", "dien", "t", "maar", "in"}, {"ik", "wacht"}}},
	} {
		got := tc.l.Parse(tc.in)
		if len(got.Sentences) != len(tc.tokens) {
			t.Errorf("%s Parse(%q) = %+v", tc.l.Lang(), tc.in, got)
			continue
		}
		for i, s := range got.Sentences {
			if strings.Join(s.Tokens, "|") != strings.Join(tc.tokens[i], "|") {
				t.Errorf("%s Parse(%q)[%d] = %q, want %q", tc.l.Lang(), tc.in, i, s.Tokens, tc.tokens[i])
			}
		}
	}
	// English keeps a dot after a number as a sentence end.
	if got := en(t).Parse("Step 2. Shall I submit it?"); len(got.Sentences) != 2 {
		t.Errorf("en ordinal dot: %+v", got)
	}
}

func TestNumbersWithDecimalComma(t *testing.T) {
	for _, lang := range []string{"de", "nl"} {
		l := locale(t, lang)
		for in, want := range map[string]float64{
			"120,50 €": 120.5, "€ 120,50": 120.5, "120,50 Euro": 120.5, "1.200,50": 1200.5, "1.200": 1200, "45": 45,
		} {
			nums := l.Numbers(l.Parse(in))
			if len(nums) != 1 || nums[0] != want {
				t.Errorf("%s Numbers(%q) = %v, want %v", lang, in, nums, want)
			}
		}
	}
}

func TestInflectionGermanDutch(t *testing.T) {
	for _, tc := range []struct {
		lang     string
		verbs    []string
		match    []string
		nonMatch []string
	}{
		{"de", []string{"einreichen"}, []string{
			"einreichen", "einreiche", "reiche den Widerspruch ein", "Reichen Sie ihn bitte ein, danke",
			"eingereicht", "einzureichen", "reicht ihn ein, sobald Sie zustimmen",
		}, []string{"reichen", "Das reicht.", "Reicht Ihnen ein Termin am Dienstag?", "Einreichung"}},
		{"de", []string{"absenden", "absagen"}, []string{"sende ihn ab", "abgesendet", "abzusenden", "sagen Sie den Termin ab", "abgesagt"},
			[]string{"Ich sage Ihnen ab Montag Bescheid", "Soll ich Ihnen sagen, ab wann"}},
		{"de", []string{"buchen", "stornieren", "zahlen"}, []string{"gebucht", "bucht", "buche", "storniert", "storniere", "gezahlt"}, []string{"Buchung", "Stornierung"}},
		{"nl", []string{"indienen"}, []string{"indienen", "indien", "dien het bezwaar in", "ingediend", "in te dienen", "indient"}, []string{"dienen", "in de tussentijd dienen", "indiening"}},
		{"nl", []string{"boeken", "betalen", "annuleren"}, []string{"boek", "boekt", "geboekt", "boekte", "betaal", "betaalt", "betaald", "betaalde", "annuleer", "geannuleerd"}, []string{"boeking", "betaling"}},
		{"nl", []string{"afzeggen", "inplannen", "overmaken"}, []string{"zeg hem af", "afgezegd", "ingepland", "plan het in", "overgemaakt", "maak het over"}, []string{"zeg", "plan"}},
	} {
		l := locale(t, tc.lang)
		a := l.CompileAction(tc.verbs, nil)
		for _, s := range tc.match {
			if len(a.verbs.find(l.Parse(s).Tokens())) == 0 {
				t.Errorf("%s %v: %q does not match", tc.lang, tc.verbs, s)
			}
		}
		for _, s := range tc.nonMatch {
			if sp := a.verbs.find(l.Parse(s).Tokens()); len(sp) != 0 {
				t.Errorf("%s %v: %q matches as a verb (%v)", tc.lang, tc.verbs, s, sp[0].p.src)
			}
		}
	}
	// Nouns a verb makes are objects: they stand in a plain yes.
	de := locale(t, "de")
	a := de.CompileAction([]string{"buchen"}, []string{"Termin"})
	if !de.NamesObject(de.Parse("Die Buchung ist vorbereitet."), a) || !a.words["buchungen"] {
		t.Error("Buchung is not an object of buchen")
	}
	// Nouns take their plural.
	nl := locale(t, "nl")
	b := nl.CompileAction([]string{"indienen"}, []string{"afspraak", "bezwaar"})
	for _, w := range []string{"afspraken", "bezwaren"} {
		if !nl.NamesObject(nl.Parse(w), b) {
			t.Errorf("nl %q is not an object", w)
		}
	}
}

func TestStemVariants(t *testing.T) {
	nl := locale(t, "nl")
	for word, want := range map[string][]string{
		"betalen": {"betaal", "betaald"}, "afspraak": {"afspraken"}, "zeggen": {"zeg", "zegt"},
		"leven": {"leef", "leeft"}, "plannen": {"plan", "gepland"},
	} {
		forms := nl.forms(word, !strings.HasPrefix(word, "afspraak"))
		if word == "afspraak" {
			forms = nl.forms(word, false)
		}
		for _, w := range want {
			if !forms[w] {
				t.Errorf("nl forms(%q) lacks %q", word, w)
			}
		}
	}
	if v, ok := doubleVowel("boek"); ok {
		t.Errorf("doubleVowel(boek) = %q", v)
	}
}

type verdict struct{ negated, notPlain, affirmative, verb bool }

func judge(l *Locale, a *Action, text string) verdict {
	j := l.JudgeAnswer(l.Parse(text), a, nil)
	if j.Negated {
		return verdict{negated: true}
	}
	return verdict{j.Negated, j.NotPlain, j.Affirmative, j.Verb}
}

func TestJudgeAnswerGermanDutch(t *testing.T) {
	yes, no, notPlain := verdict{affirmative: true}, verdict{negated: true}, verdict{notPlain: true, affirmative: true}
	de, nl := locale(t, "de"), locale(t, "nl")
	deA := de.CompileAction([]string{"einreichen"}, []string{"Widerspruch"})
	nlA := nl.CompileAction([]string{"boeken", "indienen"}, []string{"afspraak", "bezwaar"})
	for _, tc := range []struct {
		l    *Locale
		a    *Action
		text string
		want verdict
	}{
		{de, deA, "Ja, genau.", yes},
		{de, deA, "Passt, danke schön.", yes},
		{de, deA, "Jawohl.", yes},
		{de, deA, "In Ordnung.", yes},
		{de, deA, "Aber gerne!", yes},
		{de, deA, "Kein Problem, machen Sie das.", yes},
		{de, deA, "Klar, warum nicht.", yes},
		{de, deA, "Genau, so machen wir's.", yes},
		{de, deA, "Können Sie gerne so machen.", yes},
		{de, deA, "Stimmt, das ist richtig.", yes},
		{de, deA, "Ja, reichen Sie ihn bitte ein.", verdict{affirmative: true, verb: true}},
		{de, deA, "Ja, reichen Sie ihn für meine Schwester ein.", verdict{notPlain: true, affirmative: true, verb: true}},
		{de, deA, "Nein.", no},
		{de, deA, "Ja. Moment, doch nicht.", no},
		{de, deA, "Warten Sie mal.", no},
		{de, deA, "Nicht schlecht.", no},
		{de, deA, "Kein Problem, aber nicht heute.", no},
		{de, deA, "Ich denke schon.", verdict{notPlain: true}},
		{de, deA, "Ja, aber erst morgen.", notPlain},
		{de, deA, "Ja, wenn's geht.", notPlain},
		{de, deA, "Ja, und schicken Sie mir auch eine Kopie.", notPlain},
		{de, deA, "Kostet das extra", verdict{notPlain: true}},
		{de, deA, "Stimmt das", notPlain},
		{de, deA, "Können Sie das später ändern", verdict{notPlain: true}},
		{nl, nlA, "Ja, doe maar.", yes},
		{nl, nlA, "Prima hoor.", yes},
		{nl, nlA, "Is goed.", yes},
		{nl, nlA, "Geen bezwaar.", yes},
		{nl, nlA, "Ja, boek maar.", verdict{affirmative: true, verb: true}},
		{nl, nlA, "Ja, dien het bezwaar maar in.", verdict{affirmative: true, verb: true}},
		{nl, nlA, "Ja, maar boek hem later.", verdict{notPlain: true, affirmative: true, verb: true}},
		{nl, nlA, "Boek maar, maar dan om vier uur.", verdict{notPlain: true, verb: true}},
		{nl, nlA, "Nee hoor.", no},
		{nl, nlA, "Toch maar niet.", no},
		{nl, nlA, "Laat maar.", no},
		{nl, nlA, "Wacht even.", no},
		{nl, nlA, "Denk het wel.", verdict{notPlain: true}},
		{nl, nlA, "Ja, mits het gratis is.", notPlain},
		{nl, nlA, "Kan ik het later wijzigen", notPlain},
	} {
		got := judge(tc.l, tc.a, tc.text)
		if got != tc.want {
			j := tc.l.JudgeAnswer(tc.l.Parse(tc.text), tc.a, nil)
			t.Errorf("%s %q = %+v, want %+v (%s; %v)", tc.l.Lang(), tc.text, got, tc.want, j.Detail, j.Matches)
		}
	}
}

func TestLastQuestionOpenAndStarts(t *testing.T) {
	de, nl := locale(t, "de"), locale(t, "nl")
	for _, tc := range []struct {
		l    *Locale
		text string
		ok   bool
	}{
		{de, "Soll ich den Widerspruch jetzt einreichen", true},
		{de, "Bitte bestätigen Sie, dass ich den Termin buchen soll.", true},
		{de, "Sind Sie einverstanden, dass ich den Termin buche.", true},
		{de, "Ich reiche den Widerspruch jetzt ein.", false},
		{de, "Wann soll ich den Termin buchen?", false},
		{de, "Soll ich den Termin am Dienstag oder lieber am Mittwoch buchen?", false},
		{de, "Soll ich den Termin buchen oder nicht?", true},
		{de, "Das passt so, oder?", true},
		{de, "Soll ich den Termin buchen, oder möchten Sie noch überlegen?", false},
		{de, "Soll ich Ihnen erklären, wie der Widerspruch eingereicht wird?", false},
		{de, "Haben Sie die Rechnung schon bezahlt?", false},
		{de, "Möchten Sie den Widerspruch lieber selbst einreichen?", false},
		{de, "Spricht etwas dagegen, wenn ich den Widerspruch einreiche?", false},
		{de, "Lassen Sie mich wissen, ob ich den Widerspruch einreichen soll.", true},
		{nl, "Heeft u de rekening al betaald?", false},
		{nl, "Kunt u bevestigen of ik het bezwaar mag indienen?", true},
		{nl, "Zal ik de afspraak boeken, of wilt u er nog over nadenken?", false},
		{nl, "Zal ik de afspraak boeken of niet?", true},
		{nl, "Zal ik het bezwaar indienen", true},
		{nl, "Kunt u bevestigen dat ik de afspraak mag boeken.", true},
		{nl, "Dat zal ik nu voor u indienen.", false},
		{nl, "Wanneer zal ik de afspraak boeken?", false},
		{nl, "Zal ik de afspraak op dinsdag of liever op woensdag boeken?", false},
	} {
		if _, ok := tc.l.LastQuestion(tc.l.Parse(tc.text)); ok != tc.ok {
			t.Errorf("%s LastQuestion(%q) = %v, want %v", tc.l.Lang(), tc.text, ok, tc.ok)
		}
	}
}

func TestRefersGovernBefore(t *testing.T) {
	de, nl := locale(t, "de"), locale(t, "nl")
	deSubmit := de.CompileAction([]string{"einreichen"}, []string{"Widerspruch"})
	dePay := de.CompileAction([]string{"bezahlen", "zahlen"}, []string{"Rechnung"})
	deBook := de.CompileAction([]string{"buchen"}, []string{"Termin"})
	deOthers := de.MergeActions([]string{"stornieren", "zuschicken"}, nil)
	nlPay := nl.CompileAction([]string{"betalen"}, []string{"rekening"})
	nlBook := nl.CompileAction([]string{"boeken"}, []string{"afspraak"})
	nlOthers := nl.MergeActions([]string{"annuleren", "mailen"}, nil)
	for _, tc := range []struct {
		l         *Locale
		a, others *Action
		sentence  string
		want      RefKind
	}{
		{de, deSubmit, deOthers, "Möchten Sie mit dem Widerspruch fortfahren?", RefObject},
		{de, deSubmit, deOthers, "Möchten Sie fortfahren?", RefProceed},
		{de, deSubmit, deOthers, "Okay, möchten Sie fortfahren?", RefProceed},
		{de, dePay, deOthers, "Möchten Sie die Zahlung von 120,50 Euro bestätigen?", RefObject},
		{de, deBook, deOthers, "Möchten Sie den Termin am Dienstag um 10 Uhr bestätigen?", RefObject},
		{de, dePay, deOthers, "Möchten Sie mit der Erstattung fortfahren?", RefOther},
		{de, deSubmit, deOthers, "Möchten Sie den Widerspruch jetzt prüfen und dann fortfahren?", RefOther},
		// A side clause is not what is asked.
		{de, deSubmit, deOthers, "Möchten Sie den Widerspruch noch einmal durchgehen, bevor wir fortfahren?", RefNone},
		{de, deSubmit, deOthers, "Möchten Sie noch etwas ändern, bevor ich den Widerspruch einreiche?", RefNone},
		{de, deSubmit, deOthers, "Soll ich den Widerspruch einreichen, bevor die Frist abläuft?", RefVerb},
		{nl, nl.CompileAction([]string{"indienen"}, []string{"bezwaar"}), nlOthers, "Wilt u nog iets wijzigen voordat ik het bezwaar indien?", RefNone},
		// A confirmation sent is not confirming.
		{de, deSubmit, deOthers, "Möchten Sie eine Bestätigung per E-Mail?", RefNone},
		{de, deBook, deOthers, "Soll ich die Buchung stornieren?", RefOther},
		{de, deSubmit, deOthers, "Sind Sie damit einverstanden?", RefBack},
		{de, deSubmit, deOthers, "Ich reiche ihn ein, sobald Sie zustimmen.", RefVerb},
		{nl, nlPay, nlOthers, "Mag ik de betaling van 230 euro uitvoeren?", RefObject},
		{nl, nlPay, nlOthers, "Wilt u doorgaan met de terugbetaling?", RefOther},
		{nl, nlBook, nlOthers, "Zal ik de boeking annuleren?", RefOther},
		{nl, nlBook, nlOthers, "Wilt u de afspraak op dinsdag om tien uur bevestigen?", RefObject},
		// English is unchanged: no object before a proceed phrase.
		{en(t), en(t).CompileAction([]string{"submit"}, []string{"appeal"}), nil, "Would you like to proceed?", RefProceed},
	} {
		s := tc.l.Parse(tc.sentence).Sentences[0]
		if got := tc.l.Refers(s, tc.a, tc.others); got.Kind != tc.want {
			t.Errorf("%s Refers(%q) = %v %v, want %v", tc.l.Lang(), tc.sentence, got.Kind, got.Matches, tc.want)
		}
	}
}

func TestStatesQuantityGermanDutch(t *testing.T) {
	de, nl := locale(t, "de"), locale(t, "nl")
	for _, tc := range []struct {
		l    *Locale
		text string
		want bool
	}{
		{de, "Noch zwei, bitte.", true},
		{de, "Zwei mehr.", true},
		{de, "Noch eins davon.", true},
		{de, "Ja, gerne.", false},
		{de, "Ja, einen Kaffee.", false},
		{nl, "Nog twee, graag.", true},
		{nl, "Nog een koffie.", true},
		{nl, "Ja, een koffie.", false},
	} {
		if got := tc.l.StatesQuantity(tc.l.Parse(tc.text)); got != tc.want {
			t.Errorf("%s StatesQuantity(%q) = %v", tc.l.Lang(), tc.text, got)
		}
	}
}

func TestValidateNewKeys(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"clitic without apostrophe", minimalLocale + "clitics: {s: es}\n", "clitics"},
		{"clitic for two words", minimalLocale + "clitics: {\"'s\": \"es ist\"}\n", "clitics"},
		{"empty particle", minimalLocale + "particles: [\"\"]\n", "particles[0]"},
		{"duplicate open question", minimalLocale + "open_questions: [wann, Wann]\n", "open_questions[1]"},
		{"empty stem ending", minimalLocale + "inflection: {stem_endings: {\"\": x}}\n", "stem_endings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFS(fstest.MapFS{"xx.yaml": {Data: []byte(tc.body)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

// A test locale for the question rules, independent of the shipped files.
const questionLocale = `lang: xx
name: Test
max_plain_words: 5
affirmatives: [si]
negations: ["no", "non"]
hedges: [forse]
conditions: [ma]
question_words: [cosa]
confirm_requests: ["vuole che", "mi dica se"]
question_starts: [devo]
proceed: [procedere]
back_references: [va bene]
open_questions: ["non vuole", quando, se]
alternatives: [o]
side_clauses: [prima che]
glue: [la, lo, il, io, le]
`

func TestOpenQuestionRules(t *testing.T) {
	s, err := LoadFS(fstest.MapFS{"xx.yaml": {Data: []byte(questionLocale)}})
	if err != nil {
		t.Fatal(err)
	}
	l := s.Get("xx")
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"Vuole che la prenoti?", true},
		// Partly overlapping the confirm request still opens the question.
		{"Non vuole che la prenoti?", false},
		// Wholly inside it ("se" of "mi dica se"), it belongs to it.
		{"Mi dica se la prenoto.", true},
		{"Quando vuole che la prenoti?", false},
		{"Vuole che la prenoti o che la cancelli?", false},
		{"Vuole che la prenoti o no?", true},
		{"Va bene, o?", true},
	} {
		if _, ok := l.LastQuestion(l.Parse(tc.text)); ok != tc.ok {
			t.Errorf("LastQuestion(%q) = %v, want %v", tc.text, ok, tc.ok)
		}
	}
	a := l.CompileAction([]string{"prenotare"}, []string{"visita"})
	for _, tc := range []struct {
		text string
		want RefKind
	}{
		// Nothing but asking words points back.
		{"Devo?", RefBack},
		{"Devo lo?", RefBack},
		{"Devo cantare?", RefNone},
		// A side clause is not what is asked.
		{"Devo cantare prima che prenotare la visita?", RefNone},
		{"Devo prenotare prima che la visita cominci?", RefVerb},
	} {
		if got := l.Refers(l.Parse(tc.text).Sentences[0], a, nil); got.Kind != tc.want {
			t.Errorf("Refers(%q) = %v, want %v", tc.text, got.Kind, tc.want)
		}
	}
	if l.NamesObject(l.Parse("Prima che la visita cominci."), a) || l.NamesObject(l.Parse("Quando la visita comincia."), a) {
		t.Error("an object in a side clause or an open question counts")
	}
	if !l.NamesObject(l.Parse("La visita."), a) {
		t.Error("an object does not count")
	}
}

func FuzzJudgeGermanDutch(f *testing.F) {
	de, nl := locale(f, "de"), locale(f, "nl")
	deA := de.CompileAction([]string{"einreichen", "buchen"}, []string{"Widerspruch", "Termin"})
	nlA := nl.CompileAction([]string{"indienen", "boeken"}, []string{"bezwaar", "afspraak"})
	for _, s := range []string{
		"Ja, reichen Sie ihn bitte ein.", "Möchten Sie mit dem Widerspruch fortfahren?", "am 12. Mai", "geht's",
		"Ja, dien het maar in.", "Boek maar, maar dan om 4 uur.", "Wilt u de betaling van € 1.200,50 bevestigen?",
		"ein", "in te", "'s", "maar", "oder", "bevor ich einreiche", "12. ", "1.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []struct {
			l *Locale
			a *Action
		}{{de, deA}, {nl, nlA}} {
			txt := c.l.Parse(s)
			j := c.l.JudgeAnswer(txt, c.a, TokenSet(txt))
			if j.Negated && j.NotPlain {
				t.Fatalf("%q judged negated and not plain", s)
			}
			q, _ := c.l.LastQuestion(txt)
			if len(txt.Sentences) > 0 {
				c.l.Refers(q.Sentence, c.a, c.a)
			}
			c.l.NamesObject(txt, c.a)
			c.l.Numbers(txt)
		}
	})
}

func TestTextDetails(t *testing.T) {
	set, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	en, es, fr, pt := set.Get("en"), set.Get("es"), set.Get("fr"), set.Get("pt")

	// Clause breaks are kept, abbreviations and p.m. do not end sentences.
	txt := en.Parse("Before I submit it, would you like Dr. Patel at 3 p.m. on Tuesday? Fine.")
	if len(txt.Sentences) != 2 || len(txt.Sentences[0].Breaks) != 1 || txt.Sentences[0].Breaks[0] != 4 || !txt.Sentences[0].Marked {
		t.Fatalf("parse = %+v", txt.Sentences)
	}

	// "1 200,50" is one number where the decimal mark is a comma.
	if txt := en.Parse("I booked it for 3 p.m. Would you like a copy?"); len(txt.Sentences) != 2 {
		t.Fatalf("a capital after p.m. starts a new sentence: %+v", txt.Sentences)
	}

	if got := fr.Numbers(fr.Parse("la facture de 1 200,50 € ?")); len(got) != 1 || got[0] != 1200.5 {
		t.Fatalf("fr numbers = %v", got)
	}
	if got := en.Numbers(en.Parse("I have 2 100 dollar bills")); len(got) != 2 {
		t.Fatalf("en numbers = %v: a space groups thousands only with a decimal comma", got)
	}

	// "sí" and "si" stay apart: a condition after a yes is not covered.
	a := es.CompileAction([]string{"enviar"}, []string{"apelación"})
	if j := es.JudgeAnswer(es.Parse("Sí, si se envía ahora."), a, nil); !j.NotPlain {
		t.Fatalf("condition \"si\" after \"sí\" judged %+v", j)
	}
	if j := es.JudgeAnswer(es.Parse("Sí."), a, nil); j.NotPlain || !j.Affirmative {
		t.Fatalf("\"Sí.\" judged %+v", j)
	}

	// Excluded forms do not match; hyphenated policy words do.
	book := pt.CompileAction([]string{"agendar"}, nil)
	if len(book.verbs.find(pt.Parse("Posso verificar a agenda do médico?").Tokens())) != 0 {
		t.Fatal("pt \"agenda\" matched agendar")
	}
	if len(book.verbs.find(pt.Parse("Posso agendar a consulta?").Tokens())) == 0 {
		t.Fatal("pt \"agendar\" did not match")
	}
	rdv := fr.CompileAction([]string{"confirmer"}, []string{"rendez-vous"})
	if len(rdv.objects.find(fr.Parse("Souhaitez-vous confirmer le rendez-vous de mardi ?").Tokens())) == 0 {
		t.Fatal("fr rendez-vous did not match")
	}
}

// Fold's table path must give what Unicode normalisation gives.
func TestFoldTable(t *testing.T) {
	for r := rune(0); r < 0x3000; r++ {
		in := "A" + string(r) + "b"
		if got, want := Fold(in), slowFold(in); got != want {
			t.Fatalf("Fold(%q) = %q, slowFold = %q", in, got, want)
		}
	}
}

func FuzzFold(f *testing.F) {
	for _, s := range []string{"Envíe", "Straße", "ÇA VA", "e\u0301", "I’ll", "İstanbul", "ﬁne", "Ǆ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got, want := Fold(s), slowFold(s); got != want {
			t.Fatalf("Fold(%q) = %q, slowFold = %q", s, got, want)
		}
	})
}
