package redact

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

var testKey = bytes.Repeat([]byte("k"), MinKeyBytes)

func mustNew(t *testing.T, cfg Config) *Redactor {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMaskDigits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		min  int
		want string
	}{
		{"card ending 4242", 4, "card ending ####"},
		{"card ending 424", 4, "card ending 424"},
		{"4242 4242 4242 4242", 4, "#### #### #### ####"},
		{"call 555-123-4567 now", 4, "call ###-###-#### now"},
		{"pay $120.50 today", 4, "pay $###.## today"},
		{"pay $120 today", 4, "pay $120 today"},
		{"at 3 pm for 2 people", 4, "at 3 pm for 2 people"},
		// Red team F3: separator runs as speech-to-text and people write
		// them join digits too.
		{"1, 2, 3, 4", 4, "#, #, #, #"},
		{"a:4, 2, 4, 2, 4, 2, 4, 2", 4, "a:#, #, #, #, #, #, #, #"},
		{"42 - 42 - 42 - 42", 4, "## - ## - ## - ##"},
		{"424–242–424", 4, "###–###–###"},
		{"42  42  42  42", 4, "##  ##  ##  ##"},
		{"42_42_42_42", 4, "##_##_##_##"},
		{"4\t2\u00a04\u20142", 4, "#\t#\u00a0#\u2014#"},
		{"(424) 242-4242", 4, "(###) ###-####"},
		{"at 3 pm, then 2 people", 4, "at 3 pm, then 2 people"},
		{"12 and 34", 4, "12 and 34"}, // a word between: two runs
		{"12    34", 4, "12    34"},   // four spaces: more than a separator
		{"on 12/05/2026", 4, "on ##/##/####"},
		{"１２３４", 4, "####"}, // full-width digits are digits
		{"room 12", 2, "room ##"},
		{"", 4, ""},
		{"4242.", 4, "####."},
	} {
		if got := maskDigits(tc.in, tc.min); got != tc.want {
			t.Errorf("maskDigits(%q, %d) = %q, want %q", tc.in, tc.min, got, tc.want)
		}
	}
}

// decision is a record with caller data in every place it can hold some.
func decision() *yesguardv1.Decision {
	turn := func(speaker, text string) *yesguardv1.Turn {
		return &yesguardv1.Turn{Speaker: speaker, Text: text, StartMs: 1200, Lang: "en"}
	}
	return &yesguardv1.Decision{
		DecisionId: "01KB4Z3Q8K0V6YH1ZB2R9M7T4E",
		CallId:     "c1",
		Tool:       "pay_bill",
		ArgsHash:   "9f2c0000",
		Args:       `{"amount":120.5,"card":{"number":"4111111111111111","holder":"Ada Lovelace"},"items":[{"sku":"AB-1","note":"for Ada Lovelace"}],"phone":"5551234567"}`,
		Result:     `{"confirmation":"X-99","card":{"number":"4111111111111111"}}`,
		Message:    `Your question did not state card.holder = Ada Lovelace.`,
		Evidence: &yesguardv1.Evidence{
			Question:         turn("agent", "Shall I pay $120.50 with the card 4111111111111111 for Ada Lovelace?"),
			QuestionSentence: "shall i pay $120.50 with the card 4111111111111111 for ada lovelace?",
			Answer:           turn("caller", "Yes, my number is 555 123 4567."),
			Matches:          []*yesguardv1.Match{{Rule: "bind", Pattern: "amount", Text: "120.50"}, {Rule: "affirmative", Pattern: "yes", Text: "yes"}},
			RecentTurns:      []*yesguardv1.Turn{turn("caller", "It's the card ending 1111."), turn("agent", "Thanks Ada Lovelace.")},
			Detail:           `plain yes "Yes, my number is 555 123 4567."`,
		},
	}
}

func TestDecisionRedaction(t *testing.T) {
	r := mustNew(t, Config{
		DropFields: []string{"card.number", "phone"},
		HashFields: []string{"card.holder", "items.note"},
		Key:        testKey,
		MaskDigits: true,
	})
	in := decision()
	before := proto.Clone(in)
	out, err := r.Decision(in)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, before) {
		t.Fatal("Decision changed its input; the service answers the pipeline from it")
	}
	if out.GetArgsHash() != in.GetArgsHash() {
		t.Fatal("args_hash changed")
	}
	holder := r.hashValue("Ada Lovelace")
	note := r.hashValue("for Ada Lovelace")
	wantArgs := `{"amount":120.5,"card":{"holder":"` + holder + `"},"items":[{"note":"` + note + `","sku":"AB-1"}]}`
	if out.GetArgs() != wantArgs {
		t.Errorf("args\n got %s\nwant %s", out.GetArgs(), wantArgs)
	}
	if want := `{"card":{},"confirmation":"X-99"}`; out.GetResult() != want {
		t.Errorf("result %s, want %s", out.GetResult(), want)
	}
	ev := out.GetEvidence()
	for field, want := range map[string]string{
		// "for Ada Lovelace" is the note's whole value: the longer value wins.
		"question":          "Shall I pay $###.## with the card " + Dropped + " " + note + "?",
		"question_sentence": "shall i pay $###.## with the card " + Dropped + " " + note + "?",
		// Spoken with spaces it is not the phone field's value: the digit
		// rule masks it.
		"answer":        "Yes, my number is ### ### ####.",
		"recent[0]":     "It's the card ending ####.",
		"recent[1]":     "Thanks " + holder + ".",
		"detail":        `plain yes "Yes, my number is ### ### ####."`,
		"message":       "Your question did not state card.holder = " + holder + ".",
		"match[0].text": "###.##",
	} {
		got := map[string]string{
			"question": ev.GetQuestion().GetText(), "question_sentence": ev.GetQuestionSentence(),
			"answer": ev.GetAnswer().GetText(), "recent[0]": ev.GetRecentTurns()[0].GetText(),
			"recent[1]": ev.GetRecentTurns()[1].GetText(), "detail": ev.GetDetail(), "message": out.GetMessage(),
			"match[0].text": ev.GetMatches()[0].GetText(),
		}[field]
		if got != want {
			t.Errorf("%s\n got %q\nwant %q", field, got, want)
		}
	}
	if strings.Contains(protojson.Format(out), "555") {
		t.Errorf("the phone number survives: %s", protojson.Format(out))
	}
}

func TestHashIsKeyedAndStable(t *testing.T) {
	a := mustNew(t, Config{HashFields: []string{"x"}, Key: testKey})
	b := mustNew(t, Config{HashFields: []string{"x"}, Key: bytes.Repeat([]byte("j"), MinKeyBytes)})
	h := a.hashValue("4111111111111111")
	if h != a.hashValue("4111111111111111") {
		t.Fatal("the same value hashes differently under one key")
	}
	if h == b.hashValue("4111111111111111") {
		t.Fatal("two keys give the same hash: it is not keyed")
	}
	if h == a.hashValue("4111111111111112") || a.hashValue("1") == a.hashValue(json.Number("1")) {
		t.Fatal("different values (or a string and a number) hash the same")
	}
	if !strings.HasPrefix(h, HashPrefix) || strings.IndexFunc(h, func(r rune) bool { return r >= '0' && r <= '9' }) >= 0 || len(h) != len(HashPrefix)+32 {
		t.Fatalf("hash %q: want %s and 32 letters a-p", h, HashPrefix)
	}
}

func TestUnparsableArgsAreDroppedWhole(t *testing.T) {
	r := mustNew(t, Config{DropFields: []string{"card"}})
	d := decision()
	d.Args = `{"card": "4111111111111111"` // cut short
	out, err := r.Decision(d)
	if err == nil || !strings.Contains(err.Error(), "args: not JSON") {
		t.Fatalf("error %v", err)
	}
	if out.GetArgs() != "" || out.GetArgsHash() != d.GetArgsHash() {
		t.Fatalf("args %q, hash %q: want args dropped and the hash kept", out.GetArgs(), out.GetArgsHash())
	}
	// The digit rule reads the args too (red team F4), so args it cannot
	// parse are dropped whole as well: they may hold a card number.
	digits := mustNew(t, Config{MaskDigits: true})
	out, err = digits.Decision(d)
	if err == nil || out.GetArgs() != "" {
		t.Fatalf("digits only: %v, %q; want the args dropped whole", err, out.GetArgs())
	}
	// Without any rule they are kept as they are: nothing to find.
	if out, err := mustNew(t, Config{}).Decision(d); err != nil || out.GetArgs() != d.GetArgs() {
		t.Fatalf("no rules: %v, %q", err, out.GetArgs())
	}
}

// TestDigitsMaskedInArgsAndResult (red team F4): --redact-digits masks the
// digit runs of argument and result string values, not only of speech;
// numbers and keys are kept, and args_hash is unchanged.
func TestDigitsMaskedInArgsAndResult(t *testing.T) {
	r := mustNew(t, Config{MaskDigits: true})
	d := decision()
	d.Args = `{"amount":120.5,"invoice_id":"INV-12345678","note":"4111 1111 1111 1111","card":{"number":"4, 2, 4, 2"}}`
	d.Result = `{"receipt":"card 6011 1111 1111 1117 charged","id":"X-99"}`
	out, err := r.Decision(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"12345678", "4111", "6011", "1117", "4, 2"} {
		if strings.Contains(out.GetArgs()+out.GetResult(), leak) {
			t.Errorf("%q survives: args %s result %s", leak, out.GetArgs(), out.GetResult())
		}
	}
	for _, kept := range []string{`"amount":120.5`, `"invoice_id":"INV-########"`, `"id":"X-99"`} {
		if !strings.Contains(out.GetArgs()+out.GetResult(), kept) {
			t.Errorf("want %s: args %s result %s", kept, out.GetArgs(), out.GetResult())
		}
	}
	if out.GetArgsHash() != d.GetArgsHash() {
		t.Error("args_hash changed")
	}
}

func TestDisabledRedactorReturnsTheRecord(t *testing.T) {
	d := decision()
	for _, r := range []*Redactor{nil, mustNew(t, Config{})} {
		if r.Enabled() {
			t.Fatal("enabled with no rules")
		}
		out, err := r.Decision(d)
		if err != nil || out != d {
			t.Fatal("a disabled redactor changed the record")
		}
	}
}

func TestTurnsAndText(t *testing.T) {
	r := mustNew(t, Config{MaskDigits: true, MinDigits: 3})
	turns := []*yesguardv1.Turn{{Text: "card ending 424"}, {Text: "two people"}}
	out := r.Turns(turns)
	if out[0].GetText() != "card ending ###" || out[1].GetText() != "two people" || turns[0].GetText() != "card ending 424" {
		t.Fatalf("Turns: %v (input %v)", out, turns)
	}
	if got := r.Text("pin 1234"); got != "pin ####" {
		t.Fatalf("Text: %q", got)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := New(Config{
		DropFields: []string{"a..b", "ok", ""},
		HashFields: []string{"ok"},
		Key:        []byte("short"),
		MaskDigits: true, MinDigits: -1,
	})
	for _, want := range []string{
		`--redact-drop[0] "a..b": want a dotted path`,
		`--redact-drop[2] "": want a dotted path`,
		`--redact-hash[0] "ok": also given to --redact-drop`,
		"--redact-key-file: hashing fields needs a key of at least 32 bytes, got 5",
		"--redact-digits: the shortest run masked must be at least 1, got -1",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	good, short := filepath.Join(dir, "key"), filepath.Join(dir, "short")
	if err := os.WriteFile(good, append(bytes.Clone(testKey), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadKey(good); err != nil || !bytes.Equal(k, testKey) {
		t.Fatalf("LoadKey: %q, %v", k, err)
	}
	if _, err := LoadKey(short); err == nil || !strings.Contains(err.Error(), "want at least 32 bytes, got 3") {
		t.Fatalf("short key: %v", err)
	}
	if bytes.Equal(RandomKey(), RandomKey()) || len(RandomKey()) != MinKeyBytes {
		t.Fatal("RandomKey")
	}
}
