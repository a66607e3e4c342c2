package patterns

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValueKind is what a Value states.
type ValueKind uint8

const (
	// ValueNumber is a number with no currency: "two", "71.25", "the 100th".
	ValueNumber ValueKind = iota + 1
	// ValueAmount is a sum of money: "$71.25", "ciento veinte pesos con
	// cincuenta", "25 cents".
	ValueAmount
	// ValueDate is a date, or the parts of one the sentence states:
	// "Tuesday the 8th", "8 de diciembre", "in December".
	ValueDate
	// ValueTime is a time of day: "3 pm", "15:00", "halb vier".
	ValueTime
	// ValueDateTime is a date and a time stated together: "Tuesday at 3 pm".
	ValueDateTime
	// ValueRelative is a date that only the call's own date and time zone
	// could check ("today", "mañana", "morgen"). It matches no argument.
	ValueRelative
	// ValueUnclear is a value the reader saw and will not guess: two
	// numbers in words side by side ("seventy-one twenty-five"), "tres
	// con cinco" (3.05 or 3.5), a time whose part of the day does not fit
	// its hour. It matches no argument.
	ValueUnclear
)

var valueKindNames = [...]string{"", "number", "amount", "date", "time", "datetime", "relative", "unclear"}

func (k ValueKind) String() string {
	if int(k) < len(valueKindNames) {
		return valueKindNames[k]
	}
	return "?"
}

// A Value is an amount, number, date or time that one sentence states.
type Value struct {
	Kind ValueKind
	// Start and End: the value is Sentence.Tokens[Start:End], with the
	// words that make it one ("at", "a las", "the", "el").
	Start, End int
	// Text is the value's words as the sentence has them (folded), for
	// evidence.
	Text string
	// Words: some of it is said in words, not figures.
	Words bool

	// Number and Amount: the exact decimal Units × 10^-Scale (71.25 is
	// {7125, 2}). Currency is the ISO code the words or symbol name
	// ("USD"), "" when none is stated or the symbol names several.
	Units    int64
	Scale    uint8
	Currency string

	// Date and DateTime: each part 0 when not stated. Weekday is 1
	// (Monday) to 7 (Sunday). DayMonthUnsure: a numeric date the locale
	// reads both ways (en "12/08"), whose readings differ: it matches no
	// argument.
	Year           int16
	Month, Day     int8
	Weekday        int8
	DayMonthUnsure bool

	// Time and DateTime: minutes since midnight. EitherHalf: no am or pm
	// was said ("at 3"), so the time 12 hours on is as likely.
	Minutes    int16
	EitherHalf bool
}

// HasDate and HasTime tell which parts v states.
func (v Value) HasDate() bool { return v.Kind == ValueDate || v.Kind == ValueDateTime }
func (v Value) HasTime() bool { return v.Kind == ValueTime || v.Kind == ValueDateTime }

// maxLocated bounds the tokens whose place in Sentence.Raw the reader
// tracks; past it a value is read from its tokens alone (no symbols, no
// separators), which can only make it less, never more, than it is.
const maxLocated = 64

// vscan reads one sentence. It lives on the stack of AppendValues.
type vscan struct {
	l      *Locale
	r      *valueRules
	breaks []int
	toks   []string
	raw    string
	// Where tokens [0, nloc) stand in raw: off[k] = start, end (-1 when
	// the token is not raw's text, like a clitic's word); pos is where
	// the next token is looked for.
	nloc int
	pos  int
	off  [maxLocated][2]int32
}

// Values returns every value sentence s states, in order, without
// overlap. A sentence with no value costs no allocation.
func (l *Locale) Values(s Sentence) []Value { return l.AppendValues(nil, s) }

// AppendValues appends the values s states to dst and returns it.
//
// Only tokens that can open a value are read: a figure, or a word of the
// locale's values lexicon (number, month, weekday, time, currency words);
// everything else costs one bit test. A value the reader cannot read
// exactly is ValueUnclear, never a guess.
func (l *Locale) AppendValues(dst []Value, s Sentence) []Value {
	if l == nil || l.values == nil || len(s.Tokens) == 0 {
		return dst
	}
	sc := vscan{l: l, r: l.values, breaks: s.Breaks, toks: s.Tokens, raw: s.Raw}
	first := len(dst)
	lo := 0
	for i := 0; i < len(sc.toks); {
		if !sc.candidate(i) {
			i++
			continue
		}
		v, next := sc.read(i, lo)
		if v.Kind == 0 {
			i = max(next, i+1)
			continue
		}
		if v.Kind == ValueAmount {
			v.Text = sc.withSymbols(v.Start, v.End)
		} else {
			v.Text = sc.text(v.Start, v.End)
		}
		if dst == nil {
			dst = make([]Value, 0, 4) // one allocation for most sentences
		}
		dst = append(dst, v)
		lo, i = v.End, v.End
	}
	dst = mergeDateTimes(dst, first, &sc)
	for k := first; k < len(dst); k++ {
		dst[k].Text = unmark(dst[k].Text) // "martedì", kept apart as "martediʹ", reads as written
	}
	return dst
}

// mergeDateTimes joins a date and a time that stand side by side into one
// DateTime ("Tuesday" "at 3 pm").
func mergeDateTimes(vs []Value, first int, sc *vscan) []Value {
	out := vs[:first]
	for k := first; k < len(vs); k++ {
		v := vs[k]
		if n := len(out); n > first {
			p := &out[n-1]
			if p.End == v.Start && (p.Kind == ValueDate && v.Kind == ValueTime || p.Kind == ValueTime && v.Kind == ValueDate) {
				d, t := *p, v
				if p.Kind == ValueTime {
					d, t = v, *p
				}
				d.Kind, d.Minutes, d.EitherHalf = ValueDateTime, t.Minutes, t.EitherHalf
				d.Start, d.End = p.Start, v.End
				d.Words = d.Words || t.Words
				d.Text = sc.text(d.Start, d.End)
				*p = d
				continue
			}
		}
		out = append(out, v)
	}
	return out
}

// candidate reports whether toks[i] can open a value: a figure; a word
// that is a number, month, weekday or the first of a values phrase; a
// currency before a figure; an article before a multiplier or a
// currency; an hour word after a time prefix; a word a compound or an
// ordinal suffix makes. Most words cost one bit test.
func (sc *vscan) candidate(i int) bool {
	tok := sc.toks[i]
	if tok == "" {
		return false
	}
	if c := tok[0]; c >= '0' && c <= '9' {
		return true
	}
	r := sc.r
	if r.inFilter(tok) {
		return sc.lexCandidate(i, tok)
	}
	return r.morphable(tok) && r.makesNumber(tok)
}

// inFilter: tok may be in the lexicon (one bit test, no map read).
func (r *valueRules) inFilter(tok string) bool {
	bit := lexBit(tok)
	return r.filter[bit>>6]&(1<<(bit&63)) != 0
}

func (sc *vscan) lexCandidate(i int, tok string) bool {
	r := sc.r
	e, ok := r.lex[tok]
	if !ok {
		return r.morphable(tok) && r.makesNumber(tok)
	}
	switch {
	case e.num != 0 || e.mult != 0 || e.ord != 0 || e.month != 0 || e.weekday != 0 || e.flags&fStarts != 0:
		return true
	case e.cur != "" && i+1 < len(sc.toks) && isFigure(sc.toks[i+1]):
		return true
	case e.flags&fArticle != 0 && i+1 < len(sc.toks):
		if next, _ := r.lookup(sc.toks[i+1]); next.mult != 0 || next.cur != "" || next.flags&fMinorUnit != 0 {
			return true
		}
	}
	if e.hour != 0 && i > 0 {
		if prev, _ := r.lookup(sc.toks[i-1]); prev.flags&fPrefixEnd != 0 {
			return true
		}
	}
	return false
}

// makesNumber: tok is a compound number or an ordinal made with a suffix.
//
//go:noinline
func (r *valueRules) makesNumber(tok string) bool {
	var buf [maxParts]part
	return len(r.tokenParts(tok, buf[:0])) > 0
}

// lookup reads tok's lexicon entry, past the bit filter.
func (r *valueRules) lookup(tok string) (lexWord, bool) {
	if tok == "" {
		return lexWord{}, false
	}
	bit := lexBit(tok)
	if r.filter[bit>>6]&(1<<(bit&63)) == 0 {
		return lexWord{}, false
	}
	e, ok := r.lex[tok]
	return e, ok
}

// morphable: tok starts like a number word, so it may be a compound
// ("einhundertzwanzig") or an ordinal made with a suffix ("fourth").
func (r *valueRules) morphable(tok string) bool {
	if !r.compounds && len(r.ordSuffixes) == 0 {
		return false
	}
	b := morphBit(tok)
	return b >= 0 && len(tok) >= 4 && r.morph[b>>6]&(1<<(b&63)) != 0
}

// --- Where tokens stand in Raw -----------------------------------------

// span returns where toks[k] stands in raw, or -1, -1.
func (sc *vscan) span(k int) (int, int) {
	if k < 0 || k >= len(sc.toks) || k >= maxLocated {
		return -1, -1
	}
	for sc.nloc <= k {
		sc.locateNext()
	}
	return int(sc.off[k][0]), int(sc.off[k][1])
}

// locateNext finds the next token in raw. Tokens are raw's text in order
// (Parse cuts them from it), but for the words a clitic stands for and
// numbers whose group spaces were dropped: such a token is marked
// unknown, and what the tokeniser read for it is skipped.
func (sc *vscan) locateNext() {
	t := sc.toks[sc.nloc]
	p := sc.pos
	for p < len(sc.raw) {
		r, sz := utf8.DecodeRuneInString(sc.raw[p:])
		if isWordRune(r) {
			break
		}
		p += sz
	}
	if t != "" && strings.HasPrefix(sc.raw[p:], t) {
		sc.off[sc.nloc] = [2]int32{int32(p), int32(p + len(t))}
		sc.pos = p + len(t)
		sc.nloc++
		return
	}
	q := p
	for q < len(sc.raw) {
		r, sz := utf8.DecodeRuneInString(sc.raw[q:])
		if isWordRune(r) {
			q += sz
			continue
		}
		if (r == '.' || r == ',' || isGroupSpace(r)) && q+sz < len(sc.raw) {
			if r2, _ := utf8.DecodeRuneInString(sc.raw[q+sz:]); unicode.IsDigit(r2) {
				q += sz
				continue
			}
		}
		break
	}
	// What the tokeniser read for it stands for it: "1 200,50" for
	// "1200,50".
	sc.off[sc.nloc] = [2]int32{-1, -1}
	if q > p {
		sc.off[sc.nloc] = [2]int32{int32(p), int32(q)}
	}
	sc.pos = q
	sc.nloc++
}

// gap returns the raw text between toks[k-1] and toks[k] (k may be
// len(toks): the text after the last token; 0: before the first), and
// whether it is known.
func (sc *vscan) gap(k int) (string, bool) {
	start, end := 0, len(sc.raw)
	if k > 0 {
		_, e := sc.span(k - 1)
		if e < 0 {
			return "", false
		}
		start = e
	}
	if k < len(sc.toks) {
		s, _ := sc.span(k)
		if s < 0 {
			return "", false
		}
		end = s
	}
	if start > end {
		return "", false
	}
	return sc.raw[start:end], true
}

// joined reports whether toks[k-1] and toks[k] stand with nothing
// between them ("8th", "15h").
func (sc *vscan) joined(k int) bool {
	g, ok := sc.gap(k)
	return ok && g == ""
}

// text returns the words of toks[start:end] as raw has them, or joined by
// spaces when raw does not hold them.
func (sc *vscan) text(start, end int) string {
	s, _ := sc.span(start)
	_, e := sc.span(end - 1)
	if s >= 0 && e >= s {
		return sc.raw[s:e]
	}
	return strings.Join(sc.toks[start:end], " ")
}

// withSymbols is the text of toks[start:end] widened over a currency
// sign right before or after it ("$71.25", "71,25 €").
func (sc *vscan) withSymbols(start, end int) string {
	s, _ := sc.span(start)
	_, e := sc.span(end - 1)
	if s < 0 || e < s {
		return sc.text(start, end)
	}
	if t := strings.TrimRight(sc.raw[:s], " \u00a0"); t != "" {
		if r, sz := utf8.DecodeLastRuneInString(t); unicode.Is(unicode.Sc, r) {
			s = len(t) - sz
		}
	}
	rest := strings.TrimLeft(sc.raw[e:], " \u00a0")
	if r, sz := utf8.DecodeRuneInString(rest); unicode.Is(unicode.Sc, r) {
		e = len(sc.raw) - len(rest) + sz
	}
	return sc.raw[s:e]
}

// --- Phrases around a token ---------------------------------------------

// endingAt returns where a phrase of pl that ends right before toks[i]
// starts, not before lo; -1 when none does. The longest wins.
func (sc *vscan) endingAt(pl *endList, i, lo int) int {
	if pl.empty() || i == 0 || i <= lo {
		return -1
	}
	if bit := lexBit(sc.toks[i-1]); sc.toks[i-1] == "" || pl.last[bit>>6]&(1<<(bit&63)) == 0 {
		return -1
	}
	for st := max(lo, i-pl.maxLen); st < i; st++ {
		if sp := pl.bestAt(sc.toks[:i], st); sp.start == st && sp.end == i {
			return st
		}
	}
	return -1
}

// startingAt returns the end of a phrase of pl that starts at toks[i],
// or -1.
func (sc *vscan) startingAt(pl *phraseList, i int) (int, *phrase) {
	if i >= len(sc.toks) || pl.empty() {
		return -1, nil
	}
	if sp := pl.bestAt(sc.toks, i); sp.start == i {
		return sp.end, sp.p
	}
	return -1, nil
}

// covered returns the end of a phrase of pl that holds toks[i], starting
// at lo or later, or -1.
func (sc *vscan) covered(pl *phraseList, i, lo int) int {
	if bit := lexBit(sc.toks[i]); pl.empty() || sc.toks[i] == "" || sc.r.phraseWords[bit>>6]&(1<<(bit&63)) == 0 {
		return -1
	}
	for st := max(lo, i-3); st <= i; st++ {
		if sp := pl.bestAt(sc.toks, st); sp.start == st && sp.end > i {
			return sp.end
		}
	}
	return -1
}

// --- Reading ------------------------------------------------------------

// read reads the value that toks[i] opens, not reaching back before lo.
// A zero Kind means none; next is where to go on. A value that a phrase
// of not_values holds ("one second", "guten Morgen") is none.
func (sc *vscan) read(i, lo int) (Value, int) {
	v, next := sc.readAt(i, lo)
	if v.Kind != 0 {
		if end := sc.covered(&sc.r.notValues, i, lo); end >= 0 {
			return Value{}, end
		}
	}
	return v, next
}

func (sc *vscan) readAt(i, lo int) (Value, int) {
	tok := sc.toks[i]
	if c := tok[0]; c >= '0' && c <= '9' {
		if v, ok := sc.numericDate(i, lo); ok {
			return v, v.End
		}
		n := sc.figure(i)
		if !n.ok {
			return sc.unclear(i, i+1), i + 1
		}
		return sc.afterNumber(i, lo, n), i + 1
	}
	e, _ := sc.r.lookup(tok)
	if e.weekday != 0 || e.month != 0 || e.flags&fWeekday != 0 && sc.weekdayAt(i) {
		if v, ok := sc.date(i, lo, dateParts{}); ok {
			return v, v.End
		}
	}
	if e.flags&(fRelative|fNamed) != 0 {
		if v, ok := sc.phraseValue(i, lo); ok {
			return v, v.End
		}
	}
	if e.flags&fClock != 0 {
		if v, ok := sc.clockFrom(i, lo); ok {
			return v, v.End
		}
	}
	if e.cur != "" && i+1 < len(sc.toks) && isFigure(sc.toks[i+1]) {
		if n := sc.figure(i + 1); n.ok {
			if v, ok := sc.amount(i+1, lo, n); ok {
				return v, v.End
			}
		}
	}
	if e.hour != 0 {
		n := num{ok: true, units: int64(e.hour - 1), end: i + 1, words: true}
		if v, ok := sc.clock(i, lo, n, true); ok {
			return v, v.End
		}
	}
	if e.flags&fArticle != 0 && i+1 < len(sc.toks) {
		if next, _ := sc.r.lookup(sc.toks[i+1]); next.cur != "" || next.flags&fMinorUnit != 0 {
			n := num{ok: true, units: 1, end: i + 1, words: true}
			if v, ok := sc.amount(i, lo, n); ok {
				return v, v.End
			}
		}
	}
	n := sc.words(i)
	if !n.ok {
		return Value{}, i + 1
	}
	return sc.afterNumber(i, lo, n), i + 1
}

func (sc *vscan) weekdayAt(i int) bool {
	end, _ := sc.startingAt(&sc.r.weekdayPhrases.phraseList, i)
	return end > i
}

// phraseValue reads a relative date or a named time that opens at
// toks[i]. A word of a part of the day is not one of its own ("la
// mañana", "l'après-midi").
func (sc *vscan) phraseValue(i, lo int) (Value, bool) {
	r := sc.r
	relEnd, _ := sc.startingAt(&r.relative, i)
	namedEnd, p := sc.startingAt(&r.named.phraseList, i)
	if relEnd < 0 && namedEnd < 0 {
		return Value{}, false
	}
	if end := sc.covered(&r.periods.phraseList, i, max(lo, i-3)); end >= 0 {
		if sp := r.periods.bestAt(sc.toks, i); sp.start != i {
			return Value{}, false
		}
	}
	if relEnd > i {
		return Value{Kind: ValueRelative, Start: i, End: relEnd, Words: true}, true
	}
	start := i
	if st := sc.endingAt(&r.timePrefixes, i, lo); st >= 0 {
		start = st
	} else if st := sc.endingAt(&r.weakPrefixes, i, lo); st >= 0 {
		start = st
	}
	return Value{Kind: ValueTime, Start: start, End: namedEnd, Words: true, Minutes: int16(r.named.val[p])}, true
}

// num is a number as read, before it is known what it counts.
type num struct {
	ok      bool
	units   int64
	scale   uint8
	end     int  // the token after it
	words   bool // said in words
	ord     bool // an ordinal
	dot     bool // an ordinal only by the dot after it (de "10."), which may end a sentence
	digit   bool // one digit word, 0-9, alone
	lead0   bool // a figure with a leading zero ("09")
	figures int  // its count of digits, for a figure
}

func (n num) whole() bool { return n.ok && n.scale == 0 }

func isFigure(tok string) bool { return tok != "" && tok[0] >= '0' && tok[0] <= '9' }

// figure reads the figure toks[i] with the locale's separators, and the
// ordinal suffix or dot after it ("8th", "1er", "8.").
func (sc *vscan) figure(i int) num {
	tok := sc.toks[i]
	units, scale, digits, ok := parseDecimal(tok, decimalMark(tok, sc.l.decimalComma))
	if !ok {
		return num{}
	}
	n := num{ok: true, units: units, scale: scale, end: i + 1, figures: digits, lead0: len(tok) > 1 && tok[0] == '0'}
	if scale == 0 && digits <= 3 {
		if i+1 < len(sc.toks) && sc.r.figSuffixes[sc.toks[i+1]] && sc.joined(i+1) {
			n.ord, n.end = true, i+2
		} else if sc.l.ordinalDot && digits <= 2 {
			if _, e := sc.span(i); e >= 0 && e+1 < len(sc.raw) && sc.raw[e] == '.' && sc.raw[e+1] == ' ' {
				n.ord, n.dot = true, true
			}
		}
	}
	return n
}

// decimalMark returns the byte that is tok's decimal mark ('.' or ','), or
// 0 when it has none: with both, the last; with one, the locale's mark, or
// a separator followed by other than three digits; a mark that repeats
// groups thousands.
func decimalMark(tok string, decimalComma bool) byte {
	lastDot := strings.LastIndexByte(tok, '.')
	lastComma := strings.LastIndexByte(tok, ',')
	switch {
	case lastDot >= 0 && lastComma >= 0:
		if lastDot > lastComma {
			return '.'
		}
		return ','
	case lastDot < 0 && lastComma < 0:
		return 0
	}
	sep, idx := byte('.'), lastDot
	if lastComma >= 0 {
		sep, idx = ',', lastComma
	}
	localeDec := byte('.')
	if decimalComma {
		localeDec = ','
	}
	switch {
	case strings.Count(tok, string(sep)) > 1:
		return 0 // 1,200,000: thousands only
	case sep == localeDec:
		return sep
	case len(tok)-idx-1 == 3:
		return 0
	}
	return sep
}

// parseDecimal reads the digits of tok as an exact decimal, dec being its
// decimal mark (0: none) and any other separator grouping thousands. It
// fails on more than 18 digits.
func parseDecimal(tok string, dec byte) (units int64, scale uint8, digits int, ok bool) {
	seenDec := false
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
			if digits > 18 {
				return 0, 0, 0, false
			}
			units = units*10 + int64(c-'0')
			if seenDec {
				scale++
			}
		case c == dec && !seenDec:
			seenDec = true
		case c == '.' || c == ',':
		default:
			return 0, 0, 0, false
		}
	}
	return units, scale, digits, digits > 0
}

// unclear is a value the reader will not guess.
func (sc *vscan) unclear(start, end int) Value {
	return Value{Kind: ValueUnclear, Start: start, End: end}
}

// afterNumber decides what the number n at toks[i] counts: money, a time,
// a day, or nothing more than a number.
func (sc *vscan) afterNumber(i, lo int, n num) Value {
	if v, ok := sc.amount(i, lo, n); ok {
		return v
	}
	if v, ok := sc.clock(i, lo, n, false); ok {
		return v
	}
	if v, ok := sc.dayFrom(i, lo, n); ok {
		return v
	}
	end := n.end
	if n.words && n.ord {
		// "the first", "second": an ordinal in words is a value only as
		// a day of the month.
		return Value{}
	}
	if n.words && end < len(sc.toks) && !sc.breakAt(end) {
		// Two numbers in words side by side: a digit by digit reading
		// ("four five two"), or a guess ("seventy-one twenty-five":
		// 71.25? 7125? 71 and 25?) the reader does not make.
		if n.digit {
			if v, ok := sc.digitRun(i); ok {
				return v
			}
		}
		if m := sc.words(end); m.ok && !m.ord {
			for m.end < len(sc.toks) && !sc.breakAt(m.end) {
				next := sc.words(m.end)
				if !next.ok {
					break
				}
				m = next
			}
			return sc.unclear(i, m.end)
		}
	}
	v := Value{Kind: ValueNumber, Start: i, End: end, Words: n.words, Units: n.units, Scale: n.scale}
	return v
}

// digitRun reads digit words said one by one ("four five two" is 452).
func (sc *vscan) digitRun(i int) (Value, bool) {
	var units int64
	j := i
	for ; j < len(sc.toks) && j-i < 18; j++ {
		d, ok := sc.digitWord(sc.toks[j])
		if !ok {
			break
		}
		units = units*10 + int64(d)
	}
	if j-i < 2 {
		return Value{}, false
	}
	return Value{Kind: ValueNumber, Start: i, End: j, Words: true, Units: units}, true
}

// digitWord reads a word that is one digit: a cardinal 0-9 or a digit
// word ("oh").
func (sc *vscan) digitWord(tok string) (int, bool) {
	e, ok := sc.r.lookup(tok)
	switch {
	case !ok:
		return 0, false
	case e.num > 0 && e.num <= 10:
		return int(e.num - 1), true
	case e.digit > 0:
		return int(e.digit - 1), true
	}
	return 0, false
}
