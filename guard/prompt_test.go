package guard

import (
	"strings"
	"testing"

	"github.com/yesguard/yesguard/internal/ask"
)

func TestPrompt(t *testing.T) {
	p, err := LoadPolicy("../policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := ask.Load()
	if err != nil {
		t.Fatal(err)
	}
	out, err := Prompt(p, set, "pay_bill", "es")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## pay_bill", "(es) ¿Quiere que pague su factura de {amount} ahora?", "{amount} is the amount, said as money in USD", "NEGATED"} {
		if !strings.Contains(out, want) {
			t.Errorf("the prompt does not hold %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "## submit_appeal") {
		t.Error("--tool pay_bill printed another tool")
	}
	// The refusals that carry an ask are named as the guard has them.
	for _, r := range AskReasons() {
		if !strings.Contains(out, strings.TrimPrefix(r.String(), "REASON_")) {
			t.Errorf("the prompt does not name %s", r)
		}
	}
	all, err := Prompt(p, set, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all, "## add_item\nNeeds no confirmation") || strings.Count(all, "(nl) ") != 5 {
		t.Errorf("the whole policy's prompt:\n%s", all)
	}
	if _, err := Prompt(p, set, "", "xx"); err == nil {
		t.Error("an unknown language printed")
	}
}
