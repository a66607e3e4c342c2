package patterns

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

// This file holds what the judge asks of the values a turn states: that
// each bound argument's value is stated where the yes answers it, and that
// every amount, date, time or number stated there is the value of one of
// the call's arguments, bound or not.

// valueHit is one value a sentence states, as the judge reads it: the
// tokens [start, end) of the sentence, and whether it is the value of
// none of the call's arguments (stray).
type valueHit struct {
	start, end int
	text       string
	kind       ValueKind
	stray      bool
}

// callArgs are the call's arguments, read once per decision: each as a
// value (ParseArg), or, for a string that is none, as words.
type callArgs struct {
	list []Argument
	// vals are the arguments ParseArg reads, and at[i] the index in list
	// of vals[i].
	vals []Arg
	at   []int
	// timed: some argument is a date, a time or both.
	timed bool
	// words holds, per locale (one or two a decision), the folded words
	// of each string argument.
	words []localeWords
	// read holds the values each sentence states, read once a decision
	// (readValues): the question is read for them up to four times. A
	// decision reads a handful of sentences, so a list beats a map.
	read []readValuesResult
}

type localeWords struct {
	l  *Locale
	ws [][]string
}

func newCallArgs(args []Argument) *callArgs {
	ca := &callArgs{list: args}
	for i, a := range args {
		if v, ok := ParseArg(a.Value); ok {
			ca.vals = append(ca.vals, v)
			ca.at = append(ca.at, i)
			switch v.Kind {
			case ArgDate, ArgTime, ArgDateTime:
				ca.timed = true
			}
		}
	}
	return ca
}

// wordsIn returns the folded words of each string argument, as l reads
// them.
func (ca *callArgs) wordsIn(l *Locale) [][]string {
	for _, lw := range ca.words {
		if lw.l == l {
			return lw.ws
		}
	}
	ws := make([][]string, len(ca.list))
	for i, a := range ca.list {
		if s, ok := a.Value.(string); ok {
			ws[i] = l.Parse(s).Tokens()
		}
	}
	ca.words = append(ca.words, localeWords{l, ws})
	return ws
}

// inIDPhrase reports whether value h of s is the number of a plain
// phrase that labels an identifier ("the card ending in #", "order #"):
// it is compared only with a string argument of as many digits
// (comparesNumber), never with an amount.
func (l *Locale) inIDPhrase(s Sentence, h valueHit, ca *callArgs) bool {
	if h.kind != ValueNumber {
		return false
	}
	for _, sp := range l.plainWords.find(s.Tokens) {
		if sp.start <= h.start && h.end <= sp.end && slices.ContainsFunc(sp.p.elems, func(e element) bool { return e.number }) {
			return !ca.digitArg(l, s.Tokens[h.start])
		}
	}
	return false
}

// comparesNumber reports whether a number the turn states as tok is
// compared with the call's arguments: the call has a number argument, or
// tok is a figure and a string argument holds one ("17" against "71 Elm
// Street", "4321" against a card's "1234").
func (ca *callArgs) comparesNumber(l *Locale, tok string) bool {
	for _, a := range ca.vals {
		if a.Kind == ArgNumber {
			return true
		}
	}
	return ca.digitArg(l, tok)
}

// digitArg reports whether tok is written in figures and the call has a
// string argument that is no date or time ("A-17", "71 Elm Street", an
// address): a figure the turn states may then be that argument's, and is
// held to it. Only a call whose arguments are dates and times alone
// leaves a figure free ("a table for 4").
func (ca *callArgs) digitArg(l *Locale, tok string) bool {
	if !isDigits(tok) {
		return false
	}
	for i, a := range ca.list {
		str, isStr := a.Value.(string)
		if !isStr {
			continue
		}
		// A string of figures alone ("1234", the last digits of a card)
		// is one too, though the guard reads it as a number; an amount
		// ("75.00"), a date or a time is not.
		if j := slices.Index(ca.at, i); j < 0 || isDigits(strings.TrimSpace(str)) {
			return true
		}
	}
	return false
}

// timeArg reports whether a reading of v's time is a time argument's.
func (ca *callArgs) timeArg(v Value) bool {
	t1, t2 := v.timeReadings()
	for _, a := range ca.vals {
		if a.Kind == ArgTime && (timeIs(t1, a) || timeIs(t2, a)) {
			return true
		}
	}
	return false
}

// wordsArg reports whether toks are a string argument's words, all of
// them and nothing else.
func (ca *callArgs) wordsArg(l *Locale, toks []string) bool {
	for i, ws := range ca.wordsIn(l) {
		if len(ws) > 0 && !slices.Contains(ca.at, i) && slices.Equal(ws, toks) {
			return true
		}
	}
	return false
}

// holdsWord reports whether a string argument holds tok as one of its
// words ("4471" of "A-4471").
func (ca *callArgs) holdsWord(l *Locale, tok string) bool {
	for _, ws := range ca.wordsIn(l) {
		for _, w := range ws {
			if w == tok {
				return true
			}
		}
	}
	return false
}

// readValues returns the values sentence s states (Locale.Values), each
// marked stray when it is the value of none of the call's arguments
// (MatchArgs): an amount or number no argument holds, a relative or
// unclear value, "at 3" when both 3:00 and 15:00 are arguments. A number
// that is a word of a string argument ("claim 4471" for "A-4471") is no
// stray. stated has bit i set when the values state the argument
// ca.list[i].
func (l *Locale) readValues(s Sentence, ca *callArgs) (hits []valueHit, stated uint64) {
	key := valuesKey{l, s.Raw, len(s.Tokens)}
	for _, c := range ca.read {
		if c.key == key {
			return c.hits, c.stated
		}
	}
	hits, stated = l.readValuesOnce(s, ca)
	ca.read = append(ca.read, readValuesResult{key, hits, stated})
	return hits, stated
}

// valuesKey names a sentence read for values within one decision.
type valuesKey struct {
	l    *Locale
	raw  string
	toks int
}

type readValuesResult struct {
	key    valuesKey
	hits   []valueHit
	stated uint64
}

func (l *Locale) readValuesOnce(s Sentence, ca *callArgs) (hits []valueHit, stated uint64) {
	vals := l.possessiveDates(s, l.Values(s))
	if len(vals) == 0 {
		return nil, 0
	}
	m := MatchArgs(vals, ca.vals)
	for i := range ca.vals {
		if i < 64 && m.Stated&(1<<i) != 0 && ca.at[i] < 64 {
			stated |= 1 << ca.at[i]
		}
	}
	hits = make([]valueHit, len(vals))
	for j, v := range vals {
		h := valueHit{start: v.Start, end: v.End, text: v.Text, kind: v.Kind, stray: j >= 64 || m.Stray&(1<<j) != 0}
		if h.stray && v.Kind == ValueNumber && v.End-v.Start == 1 && (ca.holdsWord(l, s.Tokens[v.Start]) || !ca.comparesNumber(l, s.Tokens[v.Start])) {
			// A number that is a word of a string argument ("claim
			// 4471" for "A-4471") states it; one that no argument of
			// the call could hold ("for four people", "2 photos" on a
			// call with an id) is free.
			h.stray = false
		}
		l.widenValue(s, &h, ca)
		// A value said in a string argument's own words ("Tuesday" for
		// {"day": "tuesday"}) states it.
		if h.stray && ca.wordsArg(l, s.Tokens[h.start:h.end]) {
			h.stray = false
		}
		// "Tuesday at 3pm" for {"day": "tuesday", "time": "15:00"}: the
		// day in the argument's words, the time the call's.
		if h.stray && v.Kind == ValueDateTime && ca.timeArg(v) {
			for k := h.start + 1; k < h.end; k++ {
				if ca.wordsArg(l, s.Tokens[h.start:k]) {
					h.stray = false
					break
				}
			}
		}
		hits[j] = h
	}
	return hits, stated
}

// possessiveDates adds to vals the dates a word with a possessive "'s"
// names ("Thursday's appointment"), which the reader, reading whole
// words, leaves out. It returns vals, in sentence order.
func (l *Locale) possessiveDates(s Sentence, vals []Value) []Value {
	for k, tok := range s.Tokens {
		if len(tok) < 5 || !strings.HasSuffix(tok, "'s") {
			continue
		}
		covered := false
		for _, v := range vals {
			covered = covered || (v.Start <= k && k < v.End)
		}
		if covered {
			continue
		}
		for _, v := range l.Values(Sentence{Raw: tok[:len(tok)-2], Tokens: []string{tok[:len(tok)-2]}}) {
			if v.Kind == ValueDate {
				v.Start, v.End, v.Text = k, k+1, tok
				at := sort.Search(len(vals), func(i int) bool { return vals[i].Start > k })
				vals = slices.Insert(vals, at, v)
			}
		}
	}
	return vals
}

// widenValue takes into a value the words after it that the reader leaves
// out but that belong to it: a currency word after an amount with its
// sign ("$1,250.50 pesos"), and a part of the day after a date ("samedi
// matin", "giovedì sera"). A part of the day must agree with a time
// argument when the call has one: "Saturday evening" books no 9:00.
func (l *Locale) widenValue(s Sentence, h *valueHit, ca *callArgs) {
	r := l.values
	if r == nil {
		return
	}
	// pt "segunda às 9h": a weekday the reader leaves out, alone, for
	// it is also an ordinal ("a segunda via"), is one right before a time.
	if (h.kind == ValueTime || h.kind == ValueDateTime) && h.start > 0 {
		if wd, ok := l.timeWeekdays[s.Tokens[h.start-1]]; ok {
			h.start--
			h.kind = ValueDateTime
			if !h.stray && ca.timed {
				agrees := false
				for _, a := range ca.vals {
					if (a.Kind == ArgDate || a.Kind == ArgDateTime) && a.weekday() == wd {
						agrees = true
					}
				}
				h.stray = !agrees
			}
		}
	}
	if h.end >= len(s.Tokens) {
		return
	}
	switch h.kind {
	case ValueAmount:
		if w, ok := r.lookup(s.Tokens[h.end]); ok && w.cur != "" {
			h.end++
		}
	case ValueDate, ValueRelative:
		var from, to int
		if sp, ok := r.periods.startsWith(s.Tokens[h.end:]); ok {
			rg := r.periods.val[sp.p]
			from, to = rg>>8*60, rg&0xff*60
			h.end += sp.end
		} else if sp, ok := l.dayPeriods.startsWith(s.Tokens[h.end:]); ok {
			rg := l.dayPeriodHours[sp.p]
			from, to = rg[0]*60, rg[1]*60
			h.end += sp.end
		} else {
			return
		}
		if !ca.timed || h.stray {
			return
		}
		// With a time argument the part of the day must agree with it;
		// with a date alone, it narrows the date and nothing contradicts.
		agrees, clocked := false, false
		for _, a := range ca.vals {
			if a.Kind != ArgTime && a.Kind != ArgDateTime {
				continue
			}
			clocked = true
			for _, m := range []int{a.Minutes, a.Minutes + 24*60} {
				if m >= from && m < to {
					agrees = true
				}
			}
		}
		h.stray = clocked && !agrees
	}
}

// boundStated checks that each bound argument's value is stated in one of
// the sentences: amounts, dates and times as values that state it
// exactly ("$120.50" and "ciento veinte con cincuenta" state 120.5), other
// values as their words.
func (l *Locale) boundStated(sentences []Sentence, ca *callArgs, bind []string) (string, bool) {
	var stated uint64
	for _, s := range sentences {
		_, st := l.readValues(s, ca)
		stated |= st
	}
	for _, name := range bind {
		i := slices.IndexFunc(ca.list, func(a Argument) bool { return a.Name == name })
		if i < 0 {
			return name + " (the call has no such argument)", false
		}
		if slices.Contains(ca.at, i) {
			if i >= 64 || stated&(1<<i) == 0 {
				return name + " = " + clip(argString(ca.list[i].Value), 80), false
			}
			continue
		}
		s, isStr := ca.list[i].Value.(string)
		if !isStr || !l.ContainsValue(Text{Sentences: sentences}, s) {
			return name + " = " + clip(argString(ca.list[i].Value), 80), false
		}
	}
	return "", true
}

// strayValue returns the first value the text states that is none of the
// call's arguments, with its sentence.
func (l *Locale) strayValue(t Text, ca *callArgs) (sentence, value string, ok bool) {
	for _, s := range t.Sentences {
		hits, _ := l.readValues(s, ca)
		for _, h := range hits {
			if h.stray {
				return unmark(s.Raw), h.text, false
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

// valueClass is what kind of argument a value may be the value of.
type valueClass uint8

const (
	classNumber valueClass = 1 << iota // amounts and numbers
	classDate
	classTime
)

// classOf returns the argument classes a value may state.
func classOf(k ValueKind) valueClass {
	switch k {
	case ValueNumber, ValueAmount:
		return classNumber
	case ValueDate, ValueRelative:
		return classDate
	case ValueTime:
		return classTime
	case ValueDateTime:
		return classDate | classTime
	}
	return 0
}

// classes returns the classes of the call's arguments that values are
// compared with.
func (ca *callArgs) classes() valueClass {
	var c valueClass
	for _, a := range ca.vals {
		switch a.Kind {
		case ArgNumber:
			c |= classNumber
		case ArgDate:
			c |= classDate
		case ArgTime:
			c |= classTime
		case ArgDateTime:
			c |= classDate | classTime
		}
	}
	return c
}

// turnValues applies the value rule to the agent's turn t, whose
// question is at index qi and whose proposal is in said (the question
// and the sentence it points back to): every bound argument is stated in
// said or in a sentence before the question, and every value a sentence
// before it states for an argument of the call is the call's, unless
// said states a value of that kind itself and so picks one ("Your last
// bill was $64 and this one is $71.25. Shall I pay the $71.25?"). A
// sentence that tells of something done ("Your last payment was $64.")
// states nothing the question proposes, and is passed over.
func (l *Locale) turnValues(t Text, qi int, said []Sentence, ca *callArgs, bind []string) (string, bool) {
	var picked valueClass
	for _, s := range said {
		hits, _ := l.readValues(s, ca)
		for _, h := range hits {
			if !h.stray {
				picked |= classOf(h.kind)
			}
		}
	}
	compared := ca.classes()
	all := append([]Sentence(nil), said...)
	for i := 0; i < qi && i < len(t.Sentences); i++ {
		s := t.Sentences[i]
		if slices.ContainsFunc(said, func(x Sentence) bool { return x.Raw == s.Raw && len(x.Tokens) == len(s.Tokens) }) || l.recap(s) {
			continue
		}
		hits, _ := l.readValues(s, ca)
		for _, h := range hits {
			// A relative date ("tomorrow morning") says nothing this
			// rule can hold to the call's dates; in the question itself
			// it stays stray (read).
			c := classOf(h.kind)
			cmp := compared
			if h.kind == ValueNumber && h.end-h.start == 1 && ca.digitArg(l, s.Tokens[h.start]) {
				cmp |= classNumber // a figure may be an id's, an address's
			}
			if h.stray && h.kind != ValueRelative && c&cmp != 0 && c&picked == 0 && !l.inIDPhrase(s, h, ca) {
				return "the turn states " + strconv.Quote(h.text) + " (" + strconv.Quote(unmark(s.Raw)) + "), which is none of the call's arguments, and the question does not say which value it proposes", false
			}
		}
		all = append(all, s)
	}
	for _, s := range all {
		if detail, ok := l.namesAgree(s, ca); !ok {
			return detail, false
		}
	}
	if detail, ok := l.oneOfTwo(all[len(said):], said, ca); !ok {
		return detail, false
	}
	return l.boundStated(all, ca, bind)
}

// oneOfTwo finds a string argument's word joined to another by a list
// conjunction in a sentence before the question ("the phone number and
// the email", "o celular e o e-mail"): two values for one argument, which
// the question must pick by naming the call's.
func (l *Locale) oneOfTwo(before, said []Sentence, ca *callArgs) (string, bool) {
	for i, ws := range ca.wordsIn(l) {
		if len(ws) != 1 || slices.Contains(ca.at, i) || !l.contentWord(ws[0], &Action{}) {
			continue
		}
		w := ws[0]
		picked := slices.ContainsFunc(said, func(s Sentence) bool { return slices.Contains(s.Tokens, w) })
		if picked {
			continue
		}
		for _, s := range before {
			toks := s.Tokens
			for k, tok := range toks {
				if tok != w {
					continue
				}
				for _, dir := range []int{1, -1} {
					j := k + dir
					if dir < 0 {
						for j >= 0 && l.determiners[toks[j]] {
							j--
						}
					}
					if j < 0 || j >= len(toks) || !l.listConjunctionAt(toks, j) {
						continue
					}
					j += dir
					// Past determiners and the first letter of a written
					// compound ("o *e*-mail").
					for j >= 0 && j < len(toks) && (l.determiners[toks[j]] || len(toks[j]) == 1) {
						j += dir
					}
					if j >= 0 && j < len(toks) && toks[j] != w && l.contentWord(toks[j], &Action{}) {
						return "the turn names " + strconv.Quote(w) + " and " + strconv.Quote(toks[j]) + " (" + strconv.Quote(unmark(s.Raw)) + "), and the question does not say which is the call's " + ca.list[i].Name, false
					}
				}
			}
		}
	}
	return "", true
}

// namesAgree holds the words said next to a string argument's to the
// argument: where the turn says the first word of an argument of two
// words or more, a content word after it must be its second ("Julia
// *Serna*" for "Julia Sierra", "Dr. *Marsh*" for "Dr. Haddad", "Milano
// *Porta* Garibaldi" for "Milano Centrale"), and where it says the last
// word, a content word before it must be the one before that.
func (l *Locale) namesAgree(s Sentence, ca *callArgs) (string, bool) {
	toks := s.Tokens
	content := func(k int) bool {
		return k >= 0 && k < len(toks) && !slices.Contains(s.Breaks, k) && !isDigits(toks[k]) && l.contentWord(toks[k], &Action{})
	}
	for i, ws := range ca.wordsIn(l) {
		if len(ws) < 2 || slices.Contains(ca.at, i) {
			continue
		}
		first, last := ws[0], ws[len(ws)-1]
		if !l.contentWord(first, &Action{}) && !l.titleWord(first) {
			continue
		}
		for k, tok := range toks {
			bad := ""
			if tok == first && content(k+1) && toks[k+1] != ws[1] {
				bad = toks[k+1]
			}
			if tok == last && l.contentWord(last, &Action{}) && content(k-1) && !slices.Contains(s.Breaks, k) && toks[k-1] != ws[len(ws)-2] {
				bad = toks[k-1]
			}
			if bad != "" {
				return "the turn says " + strconv.Quote(bad) + " next to " + strconv.Quote(tok) + " (" + strconv.Quote(unmark(s.Raw)) + "), but the call's " + ca.list[i].Name + " is " + argString(ca.list[i].Value), false
			}
		}
	}
	return "", true
}

// titleWord reports whether w is one of the locale's titles ("dr").
func (l *Locale) titleWord(w string) bool {
	sp, ok := l.titles.startsWith([]string{w})
	return ok && sp.end == 1
}
