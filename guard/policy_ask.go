package guard

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/yesguard/yesguard/internal/ask"
)

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// validateAsk checks a tool's ask templates and argument formats: every
// placeholder names an argument the tool binds or formats, every format is
// known, and a currency amount says its currency.
func validateAsk(field string, t *Tool) []error {
	var errs []error
	bad := func(f, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", f, fmt.Sprintf(format, args...)))
	}
	for _, name := range slices.Sorted(maps.Keys(t.Args)) {
		f, af := field+".args."+name, t.Args[name]
		if af == nil {
			bad(f, "empty entry; write {format: string} or another format")
			continue
		}
		if !slices.Contains(ask.Formats, af.Format) {
			bad(f+".format", "%q is not one of %s", af.Format, strings.Join(ask.Formats, ", "))
		}
		if af.Format == ask.FormatCurrency && !currencyRE.MatchString(af.Currency) && af.CurrencyArg == "" {
			bad(f+".currency", "a currency amount names its ISO 4217 code (EUR) or currency_arg")
		}
		if af.Format != ask.FormatCurrency && (af.Currency != "" || af.CurrencyArg != "") {
			bad(f+".currency", "only a currency amount names a currency")
		}
		if af.Currency != "" && !currencyRE.MatchString(af.Currency) {
			bad(f+".currency", "%q is not an ISO 4217 code such as EUR", af.Currency)
		}
	}
	for _, lang := range slices.Sorted(maps.Keys(t.Ask)) {
		f := field + ".ask." + lang
		if !langRE.MatchString(lang) {
			bad(f, "not a language tag")
		}
		tmpl := t.Ask[lang]
		if strings.TrimSpace(tmpl) == "" {
			bad(f, "empty question")
		}
		for _, p := range ask.Placeholders(tmpl) {
			if _, ok := t.Args[p]; !ok && !slices.Contains(t.Bind, p) {
				bad(f, "{%s} is neither bound (bind) nor formatted (args) by this tool", p)
			}
		}
		// Every bound value is stated: a question that leaves out the
		// amount is no question for it.
		for _, b := range t.Bind {
			if !slices.Contains(ask.Placeholders(tmpl), b) {
				bad(f, "the question must state the bound argument {%s}", b)
			}
		}
	}
	return errs
}

// askTool is what package ask needs of a tool to write its question.
func askTool(t *toolRules) ask.Tool {
	e := t.entry
	out := ask.Tool{Templates: e.Ask, Bind: e.Bind, Verb: map[string]string{}, Object: map[string]string{}, Formats: map[string]ask.Format{}}
	for lang, vs := range e.Verbs {
		if len(vs) > 0 {
			out.Verb[lang] = vs[0]
		}
	}
	for lang, os := range e.Objects {
		if len(os) > 0 {
			out.Object[lang] = os[0]
		}
	}
	if len(e.Verbs) == 0 && !t.compound {
		// A tool the policy does not describe: its verb and object are
		// its name's English words (refund_order: refund the order).
		if w := nameWords(t.name); len(w) > 0 {
			out.Verb["en"] = w[0]
			if len(w) > 1 {
				out.Object["en"] = strings.Join(w[1:], " ")
			}
		}
	}
	for name, f := range e.Args {
		if f != nil {
			out.Formats[name] = ask.Format{Kind: f.Format, Currency: f.Currency, CurrencyArg: f.CurrencyArg}
		}
	}
	return out
}
