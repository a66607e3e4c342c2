package patterns

import (
	"strconv"
	"strings"
)

// This file holds what the judge asks of the values a turn states: that
// each bound argument's value is stated where the yes answers it, and that
// every amount, date, time or number stated there is the value of one of
// the call's arguments, bound or not.

// valueHit is one value a sentence states, as the judge reads it: the
// tokens [start, end) of the sentence, and whether it is the value of
// one of the call's arguments.
type valueHit struct {
	start, end int
	text       string
	// args are the names of the arguments it states.
	args []string
}

// readValues returns the values sentence s states, each with the
// arguments it is the value of.
func (l *Locale) readValues(s Sentence, args []Argument) []valueHit {
	var out []valueHit
	for i, tok := range s.Tokens {
		n, ok := l.ParseNumber(tok)
		if !ok {
			continue
		}
		h := valueHit{start: i, end: i + 1, text: tok}
		for _, a := range args {
			if argNumberIs(l, a.Value, n) || argHoldsToken(l, a.Value, tok) {
				h.args = append(h.args, a.Name)
			}
		}
		out = append(out, h)
	}
	return out
}

// argNumberIs reports whether an argument's value is the number n: a JSON
// number, or a string of digits with the locale's separators and a
// currency sign ("75.00", "$71.25").
func argNumberIs(l *Locale, v any, n float64) bool {
	f, ok := argNumber(l, v)
	return ok && f == n
}

func argNumber(l *Locale, v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		s := strings.TrimSpace(strings.Trim(strings.TrimSpace(x), "$€£¥"))
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r == ',') }) {
			return 0, false
		}
		return l.ParseNumber(s)
	}
	return 0, false
}

// argHoldsToken reports whether a string argument holds tok as one of its
// words ("4471" of "A-4471").
func argHoldsToken(l *Locale, v any, tok string) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	for _, sen := range l.Parse(s).Sentences {
		for _, t := range sen.Tokens {
			if t == tok {
				return true
			}
		}
	}
	return false
}

// boundStated checks that each bound argument's value is stated in one of
// the sentences: numbers as numbers ("$120.50" and "120.50 dollars" state
// 120.5), other values as their words.
func (l *Locale) boundStated(sentences []Sentence, args []Argument, bind []string) (string, bool) {
	for _, name := range bind {
		var arg *Argument
		for i := range args {
			if args[i].Name == name {
				arg = &args[i]
				break
			}
		}
		if arg == nil {
			return name + " (the call has no such argument)", false
		}
		if _, isNum := argNumber(l, arg.Value); isNum {
			found := false
			for _, s := range sentences {
				for _, h := range l.readValues(s, args) {
					for _, n := range h.args {
						if n == name {
							found = true
						}
					}
				}
			}
			if !found {
				f, _ := argNumber(l, arg.Value)
				return name + " = " + strconv.FormatFloat(f, 'f', -1, 64), false
			}
			continue
		}
		s, isStr := arg.Value.(string)
		if !isStr || !l.ContainsValue(Text{Sentences: sentences}, s) {
			return name + " = " + clip(argString(arg.Value), 80), false
		}
	}
	return "", true
}

// strayValue returns the first value the text states that is none of the
// call's arguments, with its sentence.
func (l *Locale) strayValue(t Text, args []Argument) (sentence, value string, ok bool) {
	for _, s := range t.Sentences {
		for _, h := range l.readValues(s, args) {
			if len(h.args) == 0 {
				return s.Raw, h.text, false
			}
		}
	}
	return "", "", true
}

// argString writes an argument's value for a message.
func argString(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return "?"
}

// StatesQuantity reports whether t states a quantity: a quantity word
// ("two more", "another one") not negated ("no more"), or a number other
// than one. "No, just the one" states none: one on its own restates the
// single item.
func (l *Locale) StatesQuantity(t Text) bool {
	for _, s := range t.Sentences {
		negAt := map[int]bool{}
		for _, n := range l.negations.find(s.Tokens) {
			negAt[n.end] = true
		}
		for _, q := range l.quantityWords.find(s.Tokens) {
			if !negAt[q.start] {
				return true
			}
		}
		for _, tok := range s.Tokens {
			if n, ok := l.ParseNumber(tok); ok && n != 1 {
				return true
			}
		}
	}
	return false
}

// ContainsValue reports whether t states value: its words, folded, stand
// together in one sentence of t.
func (l *Locale) ContainsValue(t Text, value string) bool {
	want := l.Parse(value).Tokens()
	if len(want) == 0 {
		return false
	}
	for _, s := range t.Sentences {
		if indexWords(s.Tokens, want) >= 0 {
			return true
		}
	}
	return false
}

// indexWords returns where want stands in toks, word for word, or -1.
func indexWords(toks, want []string) int {
	for i := 0; i+len(want) <= len(toks); i++ {
		ok := true
		for k, w := range want {
			if toks[i+k] != w {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

// TokenSet returns the set of t's tokens.
func TokenSet(t Text) map[string]bool {
	out := map[string]bool{}
	for _, s := range t.Sentences {
		for _, tok := range s.Tokens {
			out[tok] = true
		}
	}
	return out
}
