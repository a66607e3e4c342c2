package guard

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/yesguard/yesguard/internal/ask"
)

// Prompt writes what to put in the model's instructions for the policy's
// tools (all of them, or only tool), with the guard's question in lang (in
// every language the tool has a template for when lang is empty): when to
// call each tool, how to ask, and what to do with each refusal. A model
// that asks the guard's way is rarely refused.
func Prompt(p *Policy, set *ask.Set, tool, lang string) (string, error) {
	names := slices.Sorted(maps.Keys(p.Tools))
	if tool != "" {
		names = []string{tool} // listed or not: an unlisted tool still needs a yes
	}
	if lang != "" && set.Get(lang) == nil {
		return "", fmt.Errorf("no ask locale for %q (loaded: %s)", lang, strings.Join(set.Langs(), ", "))
	}
	var b strings.Builder
	b.WriteString(promptIntro)
	for _, name := range names {
		t := p.Tools[name]
		if t == nil {
			t = &Tool{}
		}
		fmt.Fprintf(&b, "\n## %s\n", name)
		if !t.NeedsConfirm() {
			b.WriteString("Needs no confirmation: call it when the caller asks for it.\n")
			continue
		}
		b.WriteString("When to call it: in the same turn as the caller's yes to your question about it, right after they say it. " +
			"Never call it after announcing that you will (\"I'll do that now\"), never before the caller answers, and never on a yes to another question.\n")
		b.WriteString("How to ask: one short question, alone at the end of your turn, in the caller's language, stating ")
		if len(t.Bind) > 0 {
			fmt.Fprintf(&b, "the values of %s as you will pass them", strings.Join(t.Bind, ", "))
		} else {
			b.WriteString("the action")
		}
		b.WriteString(". Say it this way:\n")
		tr := askTool(&toolRules{name: name, entry: t})
		langs := []string{lang}
		if lang == "" {
			langs = slices.Sorted(maps.Keys(t.Ask))
			if len(langs) == 0 {
				langs = []string{p.Defaults.DefaultLang}
			}
		}
		wrote := false
		for _, l := range langs {
			q, err := set.Render(templateOnly(tr), l, placeholders(tr, t))
			if err != nil {
				continue
			}
			fmt.Fprintf(&b, "- (%s) %s\n", l, q)
			wrote = true
		}
		if !wrote {
			b.WriteString("- (no question is written for this language: ask plainly whether to do it, stating the values)\n")
		}
		for _, a := range slices.Sorted(maps.Keys(t.Args)) {
			if f := t.Args[a]; f != nil {
				fmt.Fprintf(&b, "  {%s} is %s\n", a, formatHelp(f))
			}
		}
	}
	b.WriteString(promptRefusals)
	return b.String(), nil
}

// templateOnly keeps the tool's words and templates, its formats out: the
// prompt shows the placeholders as written.
func templateOnly(t ask.Tool) ask.Tool {
	t.Formats = map[string]ask.Format{}
	return t
}

// placeholders gives each argument the question names its own {name}, so
// that the prompt shows the template as the policy writes it.
func placeholders(tr ask.Tool, t *Tool) map[string]any {
	out := map[string]any{}
	for _, b := range tr.Bind {
		out[b] = "{" + b + "}"
	}
	for a := range t.Args {
		out[a] = "{" + a + "}"
	}
	for _, tmpl := range t.Ask {
		for _, a := range ask.Placeholders(tmpl) {
			out[a] = "{" + a + "}"
		}
	}
	return out
}

func formatHelp(f *ArgFormat) string {
	switch f.Format {
	case ask.FormatCurrency:
		if f.CurrencyArg != "" {
			return "the amount, said as money in the currency of " + f.CurrencyArg
		}
		return "the amount, said as money in " + f.Currency
	case ask.FormatDate:
		return "the date, said with its weekday and month (Tuesday, December 8)"
	case ask.FormatTime:
		return "the time of day, on the caller's clock (3:00 PM, 15:00)"
	case ask.FormatNumber:
		return "the number"
	}
	return "the value as you pass it"
}

const promptIntro = `# Tools that need the caller's yes

A guard checks each call of these tools against what the caller said. It allows one only on the caller's plain yes, in their latest words, to your plain question about that action with its values.
`

const promptRefusals = `
## When the guard refuses

Every answer has an outcome, a reason and a message: follow the message. By reason:
- A REFUSE with an "ask" (NO_QUESTION, QUESTION_NOT_PLAIN, ACTION_MISMATCH, ARGUMENT_MISMATCH, NOT_PLAIN, AGENT_SPOKE_AFTER, EVIDENCE_USED): the guard's own question. When the pipeline speaks it for you, say nothing more; otherwise say exactly its text. Then wait for the caller's answer, and call the tool again with the same arguments.
- NEGATED: the caller said no. Do not call the tool again unless they ask for it anew.
- CALLER_SPEAKING: the caller is still talking. Listen, then go on from what they said.
- NO_ANSWER, STALE: the caller's answer is missing or too old. Ask again, wait for the answer.
- DUPLICATE: the action was already done (or still runs). Do not do it again; tell the caller its result.
- Anything else (the transcript missing, an internal fault): do not do the action now; tell the caller you cannot do it at the moment.
`

// Prompt is the package's Prompt for the policy in force.
func (g *Guard) Prompt(tool, lang string) (string, error) {
	return Prompt(g.rules.Load().policy, g.cfg.AskLocales, tool, lang)
}
