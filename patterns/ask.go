package patterns

import (
	"sort"
	"strings"
)

// AskFor writes the plain question that asks leave for a's action, from
// the locale's ask template ("Shall I {verb} the {object}?"), with the
// tool's first verb and object as the policy writes them. {art} takes the
// article ask_articles gives for the object's ending, so that the question
// is grammatical where articles agree with the noun ("den Termin", "die
// Rechnung"). It returns "" when the locale has no template or the action
// no verb.
//
// The action compiled by l holds its question already; AskFor writes it
// only for an action of another locale.
func (l *Locale) AskFor(a *Action) string {
	if a != nil && a.askedIn == l {
		return a.ask
	}
	return l.askFor(a)
}

func (l *Locale) askFor(a *Action) string {
	if l == nil || a == nil || l.ask == "" || a.askVerb == "" {
		return ""
	}
	tmpl := l.ask
	object := a.Object
	if object == "" || a.askVerbHoldsObject {
		// "Shall I send a copy?": the verb names its object already.
		tmpl = l.askVerbOnly
		object = ""
	}
	if tmpl == "" {
		return ""
	}
	r := strings.NewReplacer("{verb}", a.askVerb, "{object}", object, "{art}", l.article(object))
	out := r.Replace(tmpl)
	return strings.Join(strings.Fields(out), " ")
}

// article returns the article ask_articles gives for a noun: the one of
// the longest ending the noun has, else the default (key "").
func (l *Locale) article(noun string) string {
	n := Fold(strings.TrimSpace(noun))
	best, bestLen := l.askArticles[""], -1
	for _, end := range l.askArticleEnds {
		if end != "" && strings.HasSuffix(n, end) && len(end) > bestLen {
			best, bestLen = l.askArticles[end], len(end)
		}
	}
	return best
}

// sortedEnds returns the non-empty keys of m, longest first.
func sortedEnds(m map[string]string) []string {
	var out []string
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}
