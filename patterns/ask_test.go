package patterns

import "testing"

// askCases are a tool's words as a policy gives them, per language, with
// the plain question a refusal must suggest: grammatical in the language,
// the article agreeing with the noun.
var askCases = []struct {
	lang           string
	verbs, objects []string
	want, yes      string
}{
	{"en", []string{"submit", "file", "send in"}, []string{"appeal"}, "Shall I submit the appeal?", "Yes."},
	{"en", []string{"send a copy", "email"}, []string{"copy"}, "Shall I email the copy?", "Yes please."},
	{"es", []string{"presentar", "enviar"}, []string{"apelación"}, "¿Quiere que proceda a presentar su apelación?", "Sí."},
	{"es", []string{"sacar cita", "agendar"}, []string{"cita"}, "¿Quiere que proceda a agendar su cita?", "Sí, claro."},
	{"de", []string{"einreichen"}, []string{"Widerspruch"}, "Soll ich den Widerspruch jetzt einreichen?", "Ja."},
	{"de", []string{"bezahlen"}, []string{"Rechnung"}, "Soll ich die Rechnung jetzt bezahlen?", "Ja, bitte."},
	{"de", []string{"mailen"}, []string{"Kopie"}, "Soll ich die Kopie jetzt mailen?", "Ja."},
	{"fr", []string{"soumettre"}, []string{"recours"}, "Puis-je soumettre votre recours ?", "Oui."},
	{"fr", []string{"payer"}, []string{"facture"}, "Puis-je payer votre facture ?", "Oui, allez-y."},
	{"pt", []string{"submeter"}, []string{"recurso"}, "Posso submeter o seu recurso agora?", "Sim."},
	{"pt", []string{"marcar consulta", "agendar"}, []string{"consulta"}, "Posso agendar a sua consulta agora?", "Pode."},
	{"pt", []string{"pagar"}, []string{"fatura"}, "Posso pagar a sua fatura agora?", "Sim, pode."},
	{"it", []string{"presentare"}, []string{"ricorso"}, "Vuole che proceda a presentare il suo ricorso?", "Sì."},
	{"it", []string{"prenotare"}, []string{"prenotazione"}, "Vuole che proceda a prenotare la sua prenotazione?", "Sì, grazie."},
	{"it", []string{"pagare"}, []string{"bolletta"}, "Vuole che proceda a pagare la sua bolletta?", "Va bene."},
	{"nl", []string{"indienen"}, []string{"bezwaar"}, "Zal ik uw bezwaar nu indienen?", "Ja."},
	{"nl", []string{"betalen"}, []string{"rekening"}, "Zal ik uw rekening nu betalen?", "Ja, graag."},
}

// TestAskForIsPlainAndGrammatical: the question a refusal suggests is the
// locale's template filled grammatically, and it is itself a plain
// question the judge allows a yes to.
func TestAskForIsPlainAndGrammatical(t *testing.T) {
	for _, tc := range askCases {
		l := locale(t, tc.lang)
		a := l.CompileAction(tc.verbs, tc.objects)
		got := l.AskFor(a)
		if got != tc.want {
			t.Errorf("%s %v %v: AskFor = %q, want %q", tc.lang, tc.verbs, tc.objects, got, tc.want)
			continue
		}
		tool := Tool{Action: a}
		v := Judge(Input{Answer: Turn{Locale: l, Text: tc.yes, Tool: tool}, Question: &Turn{Locale: l, Text: got, Tool: tool}})
		if v.Outcome != Confirmed {
			t.Errorf("%s: a yes to the suggested %q is %v: %s", tc.lang, got, v.Outcome, v.Detail)
		}
	}
}
