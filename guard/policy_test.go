package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/yesguard/yesguard/patterns"
)

func TestExamplePolicyLoads(t *testing.T) {
	p, err := LoadPolicy("../policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newRuleset(p, locs); err != nil {
		t.Fatalf("example policy does not compile against the shipped locales: %v", err)
	}
	if p.Defaults.Wait.D() != 900*time.Millisecond || !p.Tools["submit_appeal"].NeedsConfirm() || p.Tools["add_item"].NeedsConfirm() {
		t.Fatalf("example policy read wrong: %+v", p.Defaults)
	}
}

func TestDefaultPolicy(t *testing.T) {
	p, err := LoadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	d := p.Defaults
	if d.Wait.D() != DefaultWait || d.DuplicateWindow.D() != DefaultDuplicateWindow || d.QuantityWindow.D() != DefaultQuantityWindow ||
		d.MaxAnswerAge.D() != DefaultMaxAnswerAge || d.DefaultLang != "en" || d.ApprovalTTL.D() != DefaultApprovalTTL {
		t.Fatalf("defaults = %+v", d)
	}
	if got := p.ApprovalTTLFor("anything"); got != time.Minute {
		t.Errorf("approval TTL of an unlisted tool = %s, want 60s", got)
	}
}

func TestApprovalTTLPerTool(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader("defaults:\n  approval_ttl: 2m\ntools:\n  pay_bill:\n    approval_ttl: 20s\n  submit_appeal: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]time.Duration{"pay_bill": 20 * time.Second, "submit_appeal": 2 * time.Minute, "unlisted": 2 * time.Minute} {
		if got := p.ApprovalTTLFor(tool); got != want {
			t.Errorf("ApprovalTTLFor(%s) = %s, want %s", tool, got, want)
		}
	}
	if _, err := ParsePolicy(strings.NewReader("defaults:\n  approval_ttl: 10m\n")); err != nil {
		t.Errorf("the longest approval the keys sign is refused: %v", err)
	}
}

func TestBadPolicyNamesTheField(t *testing.T) {
	for _, tc := range []struct{ name, yaml, field string }{
		{"unknown field", "defaults:\n  wiat: 1s\n", "wiat"},
		{"bad duration", "defaults:\n  wait: soon\n", "soon"},
		{"negative window", "defaults:\n  duplicate_window: -1s\n", "defaults.duplicate_window"},
		{"bad lang", "defaults:\n  default_lang: English\n", "defaults.default_lang"},
		{"bad tool name", "tools:\n  \"bad tool\": {}\n", "tools.bad tool"},
		{"record without item", "tools:\n  add:\n    record: {quantity: qty}\n", "tools.add.record.item"},
		{"empty verb", "tools:\n  pay:\n    verbs: {en: [\"\"]}\n", "tools.pay.verbs.en[0]"},
		{"approval ttl too long", "defaults:\n  approval_ttl: 11m\n", "defaults.approval_ttl"},
		{"tool approval ttl zero", "tools:\n  pay:\n    approval_ttl: 0s\n", "tools.pay.approval_ttl"},
		{"tool approval ttl past the keys' bound", "tools:\n  pay:\n    approval_ttl: 1h\n", "tools.pay.approval_ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy(strings.NewReader(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want it to name %q", err, tc.field)
			}
		})
	}
	// Every problem at once.
	_, err := ParsePolicy(strings.NewReader("defaults:\n  wait: -5ms\n  max_answer_age: -1s\n"))
	if err == nil || !strings.Contains(err.Error(), "defaults.wait") || !strings.Contains(err.Error(), "defaults.max_answer_age") {
		t.Fatalf("err = %v, want both fields", err)
	}
}

func TestPolicyLanguageWithoutLocale(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader("tools:\n  pay:\n    verbs: {xx: [pagar]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	locs, _ := patterns.LoadEmbedded()
	if _, err := newRuleset(p, locs); err == nil || !strings.Contains(err.Error(), "tools.pay.verbs.xx") {
		t.Fatalf("err = %v", err)
	}
}

func TestNameWords(t *testing.T) {
	for in, want := range map[string]string{
		"refund_order": "refund order", "refundOrder": "refund order", "book-appointment": "book appointment",
		"cancel": "cancel", "FileDisputeNow": "file dispute now",
	} {
		if got := strings.Join(nameWords(in), " "); got != want {
			t.Errorf("nameWords(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSharedObjects(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader(`tools:
  book: {objects: {en: [Appointment, slot]}}
  cancel: {objects: {en: [appointment]}}
  note: {confirm: false, objects: {en: [slot]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := p.SharedObjects()
	if len(got) != 1 || !strings.Contains(got[0], "book, cancel") || !strings.Contains(got[0], `"appointment"`) {
		t.Fatalf("SharedObjects = %q", got)
	}
	ex, err := LoadPolicy("../policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := ex.SharedObjects(); len(got) != 0 {
		t.Fatalf("the example policy shares objects: %q", got)
	}
}

func TestSharedVerbs(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader(`tools:
  cancel_appointment: {verbs: {en: [Cancel], es: [cancelar]}}
  cancel_subscription: {verbs: {en: [cancel, end]}}
  end_call: {confirm: false, verbs: {en: [end]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := p.SharedVerbs()
	if len(got) != 1 || !strings.Contains(got[0], "cancel_appointment, cancel_subscription") || !strings.Contains(got[0], `"cancel" (en)`) {
		t.Fatalf("SharedVerbs = %q", got)
	}
	if w := p.Warnings(); len(w) != 1 || w[0] != got[0] {
		t.Fatalf("Warnings = %q", w)
	}
	ex, err := LoadPolicy("../policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The example shares no verb: a newcomer's first start logs none.
	if got := ex.Warnings(); len(got) != 0 {
		t.Fatalf("the example policy's warnings: %q", got)
	}
}

func TestPolicyAskValidation(t *testing.T) {
	_, err := ParsePolicy(strings.NewReader(`
defaults: {ask_ttl: 1h}
tools:
  pay:
    bind: [amount]
    args:
      amount: {format: currency}
      when: {format: weekday}
      who: {format: string, currency: EUR}
    ask:
      en: "Shall I pay {amount} to {payee}?"
      es: "¿Pago ahora?"
      "EN_us": "Pay {amount}?"
`))
	if err == nil {
		t.Fatal("a bad ask policy parsed")
	}
	for _, want := range []string{
		"defaults.ask_ttl", "tools.pay.args.amount.currency", "tools.pay.args.when.format", "tools.pay.args.who.currency",
		"tools.pay.ask.en: {payee}", "tools.pay.ask.es: the question must state the bound argument {amount}", "tools.pay.ask.EN_us: not a language tag",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	ex, err := LoadPolicy("../policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"submit_appeal", "book_appointment", "cancel_appointment", "pay_bill", "file_dispute"} {
		if len(ex.Tools[name].Ask) != 7 {
			t.Errorf("policy.example.yaml: %s has %d ask templates, want one per language (7)", name, len(ex.Tools[name].Ask))
		}
	}
}
