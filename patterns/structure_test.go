package patterns

import "testing"

// TestTheStructureRule: the judge explains the proposal's structure and
// refuses on operators. Each case is a class of issue 18: a genuine yes
// in the model's own words that the allow-list refused, or a wrong
// action or value it allowed.
func TestTheStructureRule(t *testing.T) {
	type arg = Argument
	for _, tc := range []struct {
		name, lang, question, answer string
		verbs, objects               []string
		args                         []arg
		bind                         []string
		want                         Outcome // 0: refused, for any reason
	}{
		// Free slots: payees, party sizes, titles, items.
		{"payee after to", "en", "Shall I send $42.10 to Maria Lopez from your checking?", "Yes.", []string{"send", "transfer"}, []string{"transfer"}, []arg{{"amount", 42.1}}, []string{"amount"}, Confirmed},
		{"a party size", "en", "Shall I book a table for four people on Tuesday, December 8 at 3 pm?", "Yes please.", []string{"book"}, []string{"table"}, []arg{{"date", "2026-12-08"}, {"time", "15:00"}}, []string{"date", "time"}, Confirmed},
		{"a title and surname", "de", "Soll ich den Termin bei Frau Dr. Kaya buchen?", "Ja.", []string{"buchen"}, []string{"Termin"}, nil, nil, Confirmed},
		{"polite modality", "en", "I can cancel it right away if you'd like. Shall I?", "Yes.", []string{"cancel"}, []string{"order"}, nil, nil, Confirmed},
		{"a value one sentence before", "en", "Your refund comes to $38. Shall I issue it now?", "Yes.", []string{"issue", "refund"}, []string{"refund"}, []arg{{"amount", 38.0}}, []string{"amount"}, Confirmed},
		{"a light verb with the action's noun", "en", "Shall I take the payment of $71.25 today?", "Yes.", []string{"pay"}, []string{"payment"}, []arg{{"amount", 71.25}}, []string{"amount"}, Confirmed},
		{"the README's booking example", "en", "Shall I book your appointment for Tuesday at 3pm?", "Yes please.", []string{"book"}, []string{"appointment"}, []arg{{"day", "tuesday"}, {"time", "15:00"}}, []string{"day", "time"}, Confirmed},
		{"the README's booking example, another day", "en", "Shall I book your appointment for Tuesday at 3pm?", "Yes please.", []string{"book"}, []string{"appointment"}, []arg{{"day", "wednesday"}, {"time", "15:00"}}, []string{"day", "time"}, ArgumentMismatch},
		// The action's slot: what changes the action refuses.
		{"a test payment", "en", "Shall I make a test payment of $40?", "Yes.", []string{"pay"}, []string{"payment"}, []arg{{"amount", 40.0}}, []string{"amount"}, 0},
		{"an unknown modifier before the noun", "en", "Shall I submit a sample appeal?", "Yes.", []string{"submit"}, []string{"appeal"}, nil, nil, QuestionNotPlain},
		{"an unknown modifier after the noun", "es", "¿Puedo agendar la cita provisional?", "Sí.", []string{"agendar"}, []string{"cita"}, nil, nil, QuestionNotPlain},
		{"another verb governing the noun", "en", "Shall I forward the appeal?", "Yes.", []string{"submit"}, []string{"appeal"}, nil, nil, 0},
		// Operators.
		{"a condition", "en", "If the card is declined, shall I submit the appeal?", "Yes.", []string{"submit"}, []string{"appeal"}, nil, nil, QuestionNotPlain},
		{"embedding", "fr", "Voulez-vous que je vérifie si je peux déposer le recours ?", "Oui.", []string{"déposer"}, []string{"recours"}, nil, nil, QuestionNotPlain},
		{"a retraction after the question", "en", "Shall I cancel the order? Actually, hold on, let me first see whether it has shipped.", "Yes.", []string{"cancel"}, []string{"order"}, nil, nil, QuestionNotPlain},
		{"a hedge", "it", "Magari potrei presentare il ricorso?", "Sì.", []string{"presentare"}, []string{"ricorso"}, nil, nil, QuestionNotPlain},
		// An alternative the turn offers outside its question: a yes does
		// not say which, unless the question states the call's value.
		{"an alternative before a pronoun question", "en", "You could move to Standard or to Standard with Ads. Should I switch you over?", "Yeah.", []string{"switch", "change"}, []string{"plan"}, []arg{{"plan", "Standard with Ads"}}, nil, QuestionNotPlain},
		{"an alternative sentence before the question", "it", "Per domenica 27 posso offrirle il pacchetto Detox oppure il pacchetto Aromaterapia. Lo prenoto?", "Sì, lo prenoti.", []string{"prenotare"}, []string{"pacchetto"}, []arg{{"package", "Detox"}}, nil, QuestionNotPlain},
		{"an alternative, the question picks the call's date", "en", "I have Monday the 7th, or Wednesday the 9th. Shall I book Wednesday the 9th at 2 pm?", "Yes.", []string{"book"}, []string{"appointment"}, []arg{{"date", "2026-12-09"}, {"time", "14:00"}}, []string{"date", "time"}, Confirmed},
		// A backchannel alone says "I am listening", not yes.
		{"a bare backchannel", "pt", "Quer que eu marque a consulta?", "Uhum.", []string{"marcar"}, []string{"consulta"}, nil, nil, NotPlain},
		{"a backchannel before a yes", "de", "Soll ich den Termin buchen?", "Mhm, genau.", []string{"buchen"}, []string{"Termin"}, nil, nil, Confirmed},
		// Values: every one the turn states for an argument is the call's.
		{"two values, the question picks one", "en", "I can do Monday the 7th or Wednesday the 9th at 2 pm. Shall I book Wednesday the 9th at 2 pm?", "Yes.", []string{"book"}, []string{"appointment"}, []arg{{"date", "2026-12-09"}, {"time", "14:00"}}, []string{"date", "time"}, Confirmed},
		{"two values, the question picks none", "en", "You have $212.40 on the account, and $80 of it is past due. Shall I pay it?", "Yes.", []string{"pay"}, []string{"bill"}, []arg{{"amount", 80.0}}, []string{"amount"}, ArgumentMismatch},
		{"a house number in the recap", "en", "So that's the roof damage at 71 Maple Street. Shall I file it?", "Yes.", []string{"file"}, []string{"claim"}, []arg{{"address", "17 Maple Street"}}, nil, ArgumentMismatch},
		{"the last digits of a card", "en", "Shall I pay the $204 on the debit card ending 1243?", "Yes.", []string{"pay"}, []string{"bill"}, []arg{{"amount", 204.0}, {"last4", "1234"}}, []string{"amount"}, ArgumentMismatch},
		{"the call's last digits of a card", "en", "Shall I pay the $204 on the debit card ending 1234?", "Yes.", []string{"pay"}, []string{"bill"}, []arg{{"amount", 204.0}, {"last4", "1234"}}, []string{"amount"}, Confirmed},
		{"another name next to the call's", "es", "Mesa para cuatro a nombre de Julia Serna. ¿Se la reservo?", "Sí.", []string{"reservar"}, []string{"mesa"}, []arg{{"name", "Julia Sierra"}}, nil, ArgumentMismatch},
		{"another doctor after the title", "en", "Tuesday at two with Dr. Marsh. Shall I book it?", "Yes.", []string{"book"}, []string{"appointment"}, []arg{{"vet", "Dr. Haddad"}}, nil, ArgumentMismatch},
		// "Would you mind": a no that says go ahead consents, a yes does not.
		{"mind, no go ahead", "en", "Would you mind if I submitted the appeal now?", "No, not at all, go ahead.", []string{"submit"}, []string{"appeal"}, nil, nil, Confirmed},
		{"mind, a bare no", "en", "Would you mind if I submitted the appeal now?", "No.", []string{"submit"}, []string{"appeal"}, nil, nil, Negated},
		{"mind, yes", "en", "Would you mind if I submitted the appeal now?", "Yes, go ahead.", []string{"submit"}, []string{"appeal"}, nil, nil, NotPlain},
		{"mind, no, don't", "en", "Would you mind if I submitted the appeal now?", "No, don't go ahead.", []string{"submit"}, []string{"appeal"}, nil, nil, Negated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := locale(t, tc.lang)
			tool := Tool{Action: l.CompileAction(tc.verbs, tc.objects)}
			v := Judge(Input{
				Answer:   Turn{Locale: l, Text: tc.answer, Tool: tool},
				Question: &Turn{Locale: l, Text: tc.question, Tool: tool},
				Args:     tc.args, Bind: tc.bind,
			})
			if v.Outcome != tc.want && (tc.want != 0 || v.Outcome.Allows()) {
				t.Errorf("%q / %q: %s (%s), want %s", tc.question, tc.answer, v.Outcome, v.Detail, tc.want)
			}
		})
	}
}

// TestAnInstructionNamesTheActionByItsVerb: with no question, a verb form
// that is the action's noun after a determiner names no action ("Sí,
// cancélame esa reserva" books nothing).
func TestAnInstructionNamesTheActionByItsVerb(t *testing.T) {
	l := locale(t, "es")
	tool := Tool{Action: l.CompileAction([]string{"reservar"}, []string{"reserva", "mesa"})}
	v := Judge(Input{
		Answer:   Turn{Locale: l, Text: "Sí, cancélame esa reserva, por favor.", Tool: tool},
		Question: &Turn{Locale: l, Text: "Veo que ya tiene una reserva para el domingo.", Tool: tool},
	})
	if v.Outcome.Allows() {
		t.Errorf("%s (%s), want a refusal", v.Outcome, v.Detail)
	}
}
