package ask

import (
	"strings"
	"testing"
	"testing/fstest"
)

func load(t *testing.T) *Set {
	t.Helper()
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSevenLocalesLoad(t *testing.T) {
	got := strings.Join(load(t).Langs(), " ")
	if got != "de en es fr it nl pt" {
		t.Fatalf("langs %q", got)
	}
}

func TestFormats(t *testing.T) {
	s := load(t)
	args := map[string]any{"amount": 1234.5, "date": "2026-12-08", "time": "15:05", "at": "2026-12-08T09:30:00Z", "who": "Ana", "n": 2.5, "cur": "eur"}
	f := map[string]Format{
		"amount": {Kind: FormatCurrency, Currency: "EUR"},
		"date":   {Kind: FormatDate}, "time": {Kind: FormatTime},
		"atd": {Kind: FormatDate}, "at": {Kind: FormatTime},
		"who": {Kind: FormatString}, "n": {Kind: FormatNumber},
		"camt": {Kind: FormatCurrency, CurrencyArg: "cur"},
	}
	args["atd"], args["camt"] = args["at"], 71.3
	for _, tc := range []struct{ lang, arg, want string }{
		{"en", "amount", "€1,234.50"},
		{"de", "amount", "1.234,50 €"},
		{"fr", "amount", "1234,50 €"},
		{"nl", "amount", "€ 1.234,50"},
		{"pt", "camt", "€ 71,30"},
		{"en", "camt", "€71.30"},
		{"en", "date", "Tuesday, December 8"},
		{"es", "date", "martes 8 de diciembre"},
		{"de", "date", "Dienstag, 8. Dezember"},
		{"fr", "atd", "mardi 8 décembre"},
		{"it", "date", "martedì 8 dicembre"},
		{"nl", "date", "dinsdag 8 december"},
		{"pt", "date", "terça-feira, 8 de dezembro"},
		{"en", "time", "3:05 PM"},
		{"en", "at", "9:30 AM"},
		{"es", "time", "15:05"},
		{"de", "n", "2,5"},
		{"en", "n", "2.5"},
		{"it", "who", "Ana"},
	} {
		got, err := s.Get(tc.lang).Value(tc.arg, args, f)
		if err != nil || got != tc.want {
			t.Errorf("%s %s: %q, %v; want %q", tc.lang, tc.arg, got, err, tc.want)
		}
	}
}

func TestRender(t *testing.T) {
	s := load(t)
	tool := Tool{
		Templates: map[string]string{"es": "¿Le reservo la cita del {date} a las {time}?"},
		Verb:      map[string]string{"en": "pay", "de": "bezahlen"},
		Object:    map[string]string{"en": "bill", "de": "die Rechnung"},
		Bind:      []string{"amount"},
		Formats:   map[string]Format{"amount": {Kind: FormatCurrency, Currency: "EUR"}},
	}
	args := map[string]any{"amount": 71.35, "date": "2026-12-08", "time": "15:00"}
	for _, tc := range []struct{ lang, want string }{
		{"es-MX", "¿Le reservo la cita del martes 8 de diciembre a las 15:00?"},
		{"en", "Shall I pay the bill of €71.35 now?"},
		{"de", "Soll ich die Rechnung über 71,35 € jetzt bezahlen?"},
	} {
		got, err := s.Render(tool, tc.lang, args)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.lang, got, err, tc.want)
		}
	}
	if _, err := s.Render(tool, "fr", args); err != ErrNoQuestion {
		t.Errorf("fr without a verb: %v, want ErrNoQuestion", err)
	}
	if _, err := s.Render(tool, "en", map[string]any{}); err == nil {
		t.Error("a missing bound argument rendered")
	}
	if _, err := s.Render(tool, "en", map[string]any{"amount": "lots"}); err == nil {
		t.Error("a bad amount rendered")
	}
	if _, err := s.Render(tool, "xx", args); err == nil {
		t.Error("an unknown language rendered")
	}
}

func TestNormalise(t *testing.T) {
	if got := Normalise("¿Le reservo la cita del MARTES, 8 de diciembre a las 15:00?"); got != "le reservo la cita del martes 8 de diciembre a las 15 00" {
		t.Errorf("%q", got)
	}
	if Normalise("Soll ich Ihre Rechnung über 71,35 € bezahlen?") != Normalise("soll ich ihre rechnung uber 71.35 bezahlen") {
		t.Error("accents and marks are not folded")
	}
}

func TestValidation(t *testing.T) {
	bad := `lang: xx
frame: "Shall I {verb} now?"
frame_verb_only: "Shall I {verb}{values}?"
values: " of {list}"
list_and: and
decimal_comma: true
thousands: ","
hour_cycle: 13
am: ""
pm: ""
date: "{weekday} {dia}"
weekdays: [a, b]
months: [a]
currency: "{symbol}"
symbols: {euro: "€"}
`
	_, err := LoadFS(fstest.MapFS{"ask/xx.yaml": {Data: []byte(bad)}})
	if err == nil {
		t.Fatal("a bad locale loaded")
	}
	for _, want := range []string{"frame: needs {object}", "hour_cycle", "thousands", "date: {dia}", "date: needs {day}", "weekdays", "months", "currency: needs {amount}", "symbols.euro"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := LoadFS(fstest.MapFS{"ask/en.yaml": {Data: []byte("lang: en\nextra: 1\n")}}); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("an unknown field: %v", err)
	}
	good, _ := Load()
	en := *good.Get("en")
	en.Lang = "de"
	if err := en.Validate(); err != nil {
		t.Fatal(err)
	}
}
