package patterns

import "testing"

// TestPlacesAndWaits holds the place slot and the turned-down wait to
// their grammar on both sides: the harmless words confirm, and the same
// slot holding a verb, a conjunction, a comma, an alternative, a time or
// a date that says when to act does not.
func TestPlacesAndWaits(t *testing.T) {
	yes := map[string]string{"en": "Yes.", "de": "Ja.", "fr": "Oui.", "it": "Sì.", "pt": "Sim."}
	cases := []struct {
		lang, question string
		verbs, objects []string
		args           []Argument
		want           bool
	}{
		{"en", "Would you like me to cancel the booking at the Harbor Inn?", []string{"cancel"}, []string{"booking"}, nil, true},
		{"en", "Shall I cancel the booking at the Harbor Inn later?", []string{"cancel"}, []string{"booking"}, nil, false},
		{"en", "Shall I cancel the booking at the Harbor Inn, then print it?", []string{"cancel"}, []string{"booking"}, nil, false},
		{"en", "Shall I cancel the booking at the Harbor Inn or at Luigi's?", []string{"cancel"}, []string{"booking"}, nil, false},
		{"en", "Shall I pay the bill in installments?", []string{"pay"}, []string{"bill"}, nil, false},
		{"en", "Shall I move $1,200 into your savings now?", []string{"move"}, []string{"money"}, []Argument{{Name: "amount", Value: 1200.0}}, true},
		{"de", "Soll ich die Buchung im Hotel Post stornieren?", []string{"stornieren"}, []string{"Buchung"}, nil, true},
		{"de", "Soll ich den Widerspruch im Hotel Post abholen und einreichen?", []string{"einreichen"}, []string{"Widerspruch"}, nil, false},
		{"de", "Soll ich den Widerspruch bei der Behörde abholen und einreichen?", []string{"einreichen"}, []string{"Widerspruch"}, nil, false},
		{"fr", "Voulez-vous que j'annule la réservation de ce soir à la Brasserie du Port ?", []string{"annuler"}, []string{"réservation"}, nil, true},
		{"it", "Le giro 300 euro sul conto deposito adesso?", []string{"girare"}, []string{"giroconto"}, []Argument{{Name: "amount", Value: 300.0}, {Name: "to", Value: "deposito"}}, true},
		{"pt", "Posso cancelar a reserva no Fogo de Chão?", []string{"cancelar"}, []string{"reserva"}, nil, true},
		{"en", "Shall I submit the claim now rather than waiting for Monday?", []string{"submit"}, []string{"claim"}, nil, true},
		{"en", "Shall I wait for Monday rather than submitting the claim now?", []string{"submit"}, []string{"claim"}, nil, false},
		{"en", "Shall I submit the claim now rather than waiting for Monday, or would you rather wait?", []string{"submit"}, []string{"claim"}, nil, false},
		{"en", "Shall I submit the claim now rather than waiting for $50?", []string{"submit"}, []string{"claim"}, nil, false},
		{"de", "Soll ich die Schadensmeldung gleich jetzt einreichen, statt bis Montag zu warten?", []string{"einreichen"}, []string{"Schadensmeldung"}, nil, true},
		{"de", "Soll ich den Termin nächste Woche stornieren, statt bis Montag zu warten?", []string{"stornieren"}, []string{"Termin"}, nil, false},
		{"en", "Shall I book the appointment now rather than waiting for Monday?", []string{"book"}, []string{"appointment"}, []Argument{{Name: "date", Value: "2026-12-14"}}, false},
	}
	for _, tc := range cases {
		l := locale(t, tc.lang)
		tool := Tool{Action: l.CompileAction(tc.verbs, tc.objects)}
		var bind []string
		for _, a := range tc.args {
			if a.Name == "amount" || a.Name == "date" {
				bind = append(bind, a.Name)
			}
		}
		v := Judge(Input{
			Answer:   Turn{Locale: l, Text: yes[tc.lang], Tool: tool},
			Question: &Turn{Locale: l, Text: tc.question, Tool: tool},
			Args:     tc.args,
			Bind:     bind,
		})
		if got := v.Outcome == Confirmed; got != tc.want {
			t.Errorf("%s %q: confirmed %v, want %v (%v: %s)", tc.lang, tc.question, got, tc.want, v.Outcome, v.Detail)
		}
	}
}
