package patterns

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// plainSeeds are plain questions per language (beside the suggested ones
// of askCases), each with the tool's verbs and objects, that a yes
// confirms.
var plainSeeds = []struct {
	lang, question string
	verbs, objects []string
}{
	{"en", "Would you like me to submit your appeal now?", []string{"submit"}, []string{"appeal"}},
	{"en", "Do you want me to go ahead and book the appointment for you?", []string{"book"}, []string{"appointment"}},
	{"es", "¿Quiere que le envíe la apelación ahora?", []string{"enviar"}, []string{"apelación"}},
	{"es", "¿Le agendo la cita?", []string{"agendar"}, []string{"cita"}},
	{"de", "Möchten Sie, dass ich den Termin jetzt buche?", []string{"buchen"}, []string{"Termin"}},
	{"de", "Soll ich Ihren Widerspruch heute noch einreichen?", []string{"einreichen"}, []string{"Widerspruch"}},
	{"fr", "Voulez-vous que je réserve votre rendez-vous maintenant ?", []string{"réserver"}, []string{"rendez vous"}},
	{"fr", "Je dépose le recours ?", []string{"déposer"}, []string{"recours"}},
	{"pt", "Quer que eu agende a consulta agora?", []string{"agendar"}, []string{"consulta"}},
	{"pt", "Posso cancelar a consulta?", []string{"cancelar"}, []string{"consulta"}},
	{"it", "Vuole che presenti il ricorso adesso?", []string{"presentare"}, []string{"ricorso"}},
	{"it", "Le prenoto la visita?", []string{"prenotare"}, []string{"visita"}},
	{"nl", "Zal ik de afspraak nu voor u boeken?", []string{"boeken"}, []string{"afspraak"}},
	{"nl", "Wilt u dat ik het bezwaar indien?", []string{"indienen"}, []string{"bezwaar"}},
}

// TestTheActionSlotIsExplainedAndOperatorsRefuse is the structure rule
// as a property. From plain questions a yes confirms:
//   - a word no list explains right before the action's noun (and, where
//     modifiers follow the noun, right after it) refuses: it may make the
//     action another ("a zorblik appeal");
//   - each word of the locale's operator lists (negations, conditions,
//     side clauses, alternatives, hedges, additions, the operators, the
//     words of time and order) and another tool's verb, inserted at every
//     place, refuses, unless it joins its neighbours in a listed phrase;
//   - the same made-up word as a vocative before the question ("Zorblik,
//     ...") changes nothing, and is confirmed.
func TestTheActionSlotIsExplainedAndOperatorsRefuse(t *testing.T) {
	type seed struct {
		lang, question string
		verbs, objects []string
	}
	var seeds []seed
	for _, tc := range askCases {
		seeds = append(seeds, seed{tc.lang, tc.want, tc.verbs, tc.objects})
	}
	for _, s := range plainSeeds {
		seeds = append(seeds, seed{s.lang, s.question, s.verbs, s.objects})
	}
	yes := map[string]string{"en": "Yes.", "es": "Sí.", "de": "Ja.", "fr": "Oui.", "pt": "Sim.", "it": "Sì.", "nl": "Ja."}
	otherVerb := map[string]string{"en": "cancel", "es": "cancelar", "de": "stornieren", "fr": "annuler", "pt": "desmarcar", "it": "annullare", "nl": "annuleren"}
	generated, failed := 0, 0
	fail := func(format string, args ...any) {
		failed++
		if failed <= 40 {
			t.Errorf(format, args...)
		}
	}
	for _, sd := range seeds {
		l := locale(t, sd.lang)
		tool := Tool{Action: l.CompileAction(sd.verbs, sd.objects), Others: l.MergeActions([]string{otherVerb[sd.lang]}, nil)}
		judge := func(q string) Verdict {
			return Judge(Input{Answer: Turn{Locale: l, Text: yes[sd.lang], Tool: tool}, Question: &Turn{Locale: l, Text: q, Tool: tool}})
		}
		if v := judge(sd.question); v.Outcome != Confirmed {
			t.Errorf("%s seed %q is not confirmed: %v %s", sd.lang, sd.question, v.Outcome, v.Detail)
			continue
		}
		words := strings.Fields(strings.TrimRight(sd.question, "?¿ "))
		insert := func(i int, w string) string {
			return strings.Join(slices.Insert(slices.Clone(words), i, w), " ") + "?"
		}
		// The action's noun: the first word that starts with one of the
		// tool's objects.
		noun := -1
		for i, w := range words {
			for _, o := range sd.objects {
				if first := strings.Fields(l.fold(o))[0]; noun < 0 && strings.HasPrefix(l.fold(strings.Trim(w, "¿?,.")), first) {
					noun = i
				}
			}
		}
		if noun >= 0 {
			slots := []int{noun}
			if l.postnominal {
				slots = append(slots, noun+1)
			}
			for _, i := range slots {
				generated++
				if q := insert(i, "zorblik"); judge(q).Outcome == Confirmed {
					fail("%s: %q confirmed with a word no list explains next to the action's noun", sd.lang, q)
				}
			}
		}
		generated++
		if q := "Zorblik, " + sd.question; judge(q).Outcome != Confirmed {
			v := judge(q)
			fail("%s: %q not confirmed with a vocative before the question: %v %s", sd.lang, q, v.Outcome, v.Detail)
		}
		var danger []string
		for _, w := range append(dangerWords(l), otherVerb[sd.lang]) {
			// A word that is also a form of the tool's verb (nl "indien":
			// if, and "dat ik het indien") is that verb.
			if !tool.Action.words[l.fold(w)] {
				danger = append(danger, w)
			}
		}
		for i := 0; i <= len(words); i++ {
			for _, w := range danger {
				q := insert(i, w)
				generated++
				if judge(q).Outcome != Confirmed {
					continue
				}
				if ro := insertedRole(l, q, i, tool); ro == rolePlain || ro == roleFrame || ro == roleTag || ro == roleValue {
					continue // it joined its neighbours in a listed phrase ("ahora" "mismo")
				}
				fail("%s: %q confirmed with %q inserted", sd.lang, q, w)
			}
		}
	}
	t.Logf("%d questions with a word inserted, %d wrongly judged", generated, failed)
}

// dangerWords returns one-word entries of the lists whose words change
// what a question proposes.
//
// A word the plain words, frames or tags explain by design is left out.
func dangerWords(l *Locale) []string {
	f := l.file
	explained := map[string]bool{}
	for _, list := range [][]string{f.PlainWords, f.Frames, f.Tags} {
		for _, p := range list {
			explained[l.fold(p)] = true
		}
	}
	var out []string
	for _, list := range [][]string{f.Conditions, f.SideClauses, f.Alternatives, f.NotModifiers, f.Hedges, f.Additions, f.operatorPhrases()} {
		for _, p := range list {
			// Elisions ("n'") stand only joined to their word.
			if ws := strings.Fields(p); len(ws) == 1 && !strings.HasSuffix(ws[0], "'") && !slices.Contains(out, ws[0]) && !explained[l.fold(ws[0])] {
				out = append(out, ws[0])
			}
		}
	}
	return out
}

// insertedRole returns the role the word inserted at word index i of q
// took.
func insertedRole(l *Locale, q string, i int, tool Tool) role {
	// Words before i, as the question was split on spaces, and the tokens
	// they make.
	prefix := strings.Join(strings.Fields(q)[:i], " ")
	n := len(l.Parse(prefix).Tokens())
	for _, s := range l.Parse(q).Sentences {
		if n < len(s.Tokens) {
			r := l.read(s, tool, newCallArgs(nil), false)
			return r.roles[n]
		}
		n -= len(s.Tokens)
	}
	return unexplained
}

// TestWhatTheVerbGovernsIsTheToolsObject: with the tool's verb, a
// container of its object ("a copy of the claim", locales containers) is
// not the object, in every language, and the detail names it; the same
// noun is explained for a tool that lists it as its own object.
func TestWhatTheVerbGovernsIsTheToolsObject(t *testing.T) {
	for _, tc := range []struct {
		lang, question, container string
		verbs, objects            []string
	}{
		{"en", "Shall I send you a copy of the claim?", "copy", []string{"submit", "send"}, []string{"claim"}},
		{"en", "Shall I send the receipt for the claim?", "receipt", []string{"submit", "send"}, []string{"claim"}},
		{"en", "Do you want me to send you a confirmation of the claim?", "confirmation", []string{"submit", "send"}, []string{"claim"}},
		{"es", "¿Quiere que presente una copia de la apelación?", "copia", []string{"presentar"}, []string{"apelación"}},
		{"de", "Soll ich die Eingangsbestätigung für den Widerspruch einreichen?", "eingangsbestatigung", []string{"einreichen"}, []string{"Widerspruch"}},
		{"fr", "Voulez-vous que je dépose une copie du recours ?", "copie", []string{"déposer"}, []string{"recours"}},
		{"it", "Vuole che presenti una copia del ricorso?", "copia", []string{"presentare"}, []string{"ricorso"}},
		{"nl", "Zal ik een kopie van het bezwaar indienen?", "kopie", []string{"indienen"}, []string{"bezwaar"}},
		{"pt", "Quer que eu submeta uma cópia do recurso?", "copia", []string{"submeter"}, []string{"recurso"}},
	} {
		l := locale(t, tc.lang)
		tool := Tool{Action: l.CompileAction(tc.verbs, tc.objects), Others: l.MergeActions([]string{"email"}, []string{"copy"})}
		v := Judge(Input{Answer: Turn{Locale: l, Text: "Ok.", Tool: tool}, Question: &Turn{Locale: l, Text: tc.question, Tool: tool}})
		named := slices.ContainsFunc(v.Unexplained, func(w string) bool { return slices.Contains(strings.Fields(w), tc.container) })
		if v.Outcome != QuestionNotPlain || !named || !strings.Contains(v.Detail, strconv.Quote(tc.container)+" names something") {
			t.Errorf("%s %q: %s %q %q, want question_not_plain naming container %q", tc.lang, tc.question, v.Outcome, v.Detail, v.Unexplained, tc.container)
		}
	}
	l := locale(t, "en")
	own := Tool{Action: l.CompileAction([]string{"email"}, []string{"copy"})}
	if v := Judge(Input{Answer: Turn{Locale: l, Text: "Yes.", Tool: own}, Question: &Turn{Locale: l, Text: "Shall I email you a copy of the appeal?", Tool: own}}); v.Outcome != Confirmed {
		t.Errorf("a tool whose object is the copy: %s %q, want confirmed", v.Outcome, v.Detail)
	}
}

// TestAnInstructionMayStateTheCallsValue: with no question, the caller's
// instruction may state the bound value itself (rule 6); a value that is
// none of the call's still refuses.
func TestAnInstructionMayStateTheCallsValue(t *testing.T) {
	for _, tc := range []struct {
		lang, statement, answer string
		verbs, objects          []string
		want                    Outcome
	}{
		{"en", "Your new bill has come in.", "Please pay the bill of $120.50 now.", []string{"pay"}, []string{"bill"}, Instructed},
		{"en", "Your new bill has come in.", "Please pay the bill of $99.00 now.", []string{"pay"}, []string{"bill"}, ArgumentMismatch},
		{"nl", "Uw nieuwe rekening is binnen.", "Betaal de rekening van 120,50 euro nu maar.", []string{"betalen"}, []string{"rekening"}, Instructed},
	} {
		l := locale(t, tc.lang)
		tool := Tool{Action: l.CompileAction(tc.verbs, tc.objects)}
		v := Judge(Input{Answer: Turn{Locale: l, Text: tc.answer, Tool: tool}, Question: &Turn{Locale: l, Text: tc.statement, Tool: tool},
			Args: []Argument{{Name: "amount", Value: 120.5}}, Bind: []string{"amount"}})
		if v.Outcome != tc.want {
			t.Errorf("%s %q after %q: %s %q, want %s", tc.lang, tc.answer, tc.statement, v.Outcome, v.Detail, tc.want)
		}
	}
}
