package patterns

import (
	"strings"
	"unicode"
)

// --- Money --------------------------------------------------------------

// amount reads n at toks[i] as money: a currency before it ("$71.25",
// "EUR 71,25", "R$ 71,25") or after it ("71,25 €", "seventy dollars"),
// with hundredths after the currency word ("dollars fifty", "Euro
// fünfzig", "and 25 cents"); hundredths alone ("25 cents"); or a whole
// and its hundredths joined (es "ciento veinte con cincuenta").
func (sc *vscan) amount(i, lo int, n num) (Value, bool) {
	if !n.ok || n.ord {
		return Value{}, false
	}
	start, end := i, n.end
	cur, have, wordAfter := "", false, false
	if code, st, ok := sc.symbolBefore(i, lo); ok {
		cur, have, start = code, true, st
	} else if i-1 >= lo && isFigure(sc.toks[i]) {
		if e, _ := sc.r.lookup(sc.toks[i-1]); e.cur != "" {
			cur, have, start = currencyCode(e.cur), true, i-1
		}
	}
	if !have {
		if code, ok := sc.symbolAfter(end); ok {
			cur, have = code, true
		} else if end < len(sc.toks) {
			k := end
			if n.units >= 1000000 && n.units%1000000 == 0 && n.scale == 0 && k+1 < len(sc.toks) && sc.hasFlag(k, fMillionGlue) {
				k++ // "un millón de euros"
			}
			if e, _ := sc.r.lookup(sc.toks[k]); e.cur != "" {
				cur, have, wordAfter = currencyCode(e.cur), true, true
				end = k + 1
			}
		}
	}
	units, scale := n.units, n.scale
	v := Value{Kind: ValueAmount, Start: start, Words: n.words}
	switch {
	case have:
		if scale == 0 && units < maxWhole {
			if m, k, ok := sc.minor(end, wordAfter); ok {
				units, scale, end = units*100+m, 2, k
			}
		}
		v.Currency = cur
	case scale == 0 && end < len(sc.toks) && sc.isMinorUnit(end):
		// "25 cents"
		scale, end = 2, end+1
	case scale == 0 && units < maxWhole && end+1 < len(sc.toks) && sc.hasFlag(end, fMinorConn):
		m := sc.small(end + 1)
		if !m.ok {
			return Value{}, false
		}
		k := m.end
		minorWord := k < len(sc.toks) && sc.isMinorUnit(k)
		if minorWord {
			k++
		}
		if m.units < 10 && !minorWord {
			// "tres con cinco": 3.05 or 3.5?
			return sc.unclear(i, k), true
		}
		units, scale, end = units*100+m.units, 2, k
		v.Words = true
		if end < len(sc.toks) {
			if e, _ := sc.r.lookup(sc.toks[end]); e.cur != "" {
				v.Currency = currencyCode(e.cur)
				end++
				break
			}
		}
		if !minorWord {
			v.Kind = ValueNumber
		}
	default:
		return Value{}, false
	}
	v.End, v.Units, v.Scale = end, units, scale
	return v, true
}

// maxWhole bounds a whole amount that takes hundredths, so that adding
// them cannot overflow.
const maxWhole = 1e15

// minor reads the hundredths after a whole amount at toks[j]: "fifty",
// "and 25 cents", "con cincuenta", "e cinquenta". Without a word for
// hundredths they must follow a currency word and have two digits: "zwei
// Euro fünf" may be 2.05 or 2.50.
func (sc *vscan) minor(j int, wordAfter bool) (int64, int, bool) {
	k := j
	if k < len(sc.toks) && (sc.hasFlag(k, fConnector) || sc.hasFlag(k, fMinorConn)) {
		k++
	}
	if k >= len(sc.toks) || sc.breakAt(j) || sc.breakAt(k) {
		// "20 dollars, 50 with the fee" is no 20.50.
		return 0, 0, false
	}
	m := sc.small(k)
	if !m.ok {
		return 0, 0, false
	}
	end := m.end
	minorWord := end < len(sc.toks) && sc.isMinorUnit(end)
	if minorWord {
		end++
	} else if !wordAfter || m.units < 10 || sc.monthAt(m.end) {
		return 0, 0, false
	}
	return m.units, end, true
}

// small reads a whole number below 100 at toks[k]: one or two digits, or
// words.
func (sc *vscan) small(k int) num {
	var m num
	if isFigure(sc.toks[k]) {
		m = sc.figure(k)
		if m.figures > 2 {
			return num{}
		}
	} else {
		m = sc.words(k)
	}
	if !m.whole() || m.ord || m.units >= 100 {
		return num{}
	}
	return m
}

// currencyCode is the code a lexicon word names, "" for one of unknown
// code.
func currencyCode(c string) string {
	if c == anyCurrency {
		return ""
	}
	return c
}

func (sc *vscan) hasFlag(k int, f vflag) bool {
	e, _ := sc.r.lookup(sc.toks[k])
	return e.flags&f != 0
}

func (sc *vscan) isMinorUnit(k int) bool { return sc.hasFlag(k, fMinorUnit) }

// symbolBefore finds a currency symbol right before toks[i] ("$", "€",
// "r$": a symbol joined to the word before it takes that word).
func (sc *vscan) symbolBefore(i, lo int) (string, int, bool) {
	g, ok := sc.gap(i)
	if !ok {
		return "", 0, false
	}
	g = strings.TrimRightFunc(g, unicode.IsSpace)
	k := strings.LastIndexFunc(g, unicode.IsSpace) + 1
	sym := g[k:]
	if sym == "" {
		return "", 0, false
	}
	if k == 0 && i-1 >= lo {
		if code, ok := sc.r.symbols[sc.toks[i-1]+sym]; ok {
			return code, i - 1, true
		}
	}
	code, ok := sc.r.symbols[sym]
	return code, i, ok
}

// symbolAfter finds a currency symbol right after the token before
// toks[end] ("71,25 €"); one joined to the next token is that token's
// ("5 $10").
func (sc *vscan) symbolAfter(end int) (string, bool) {
	g, ok := sc.gap(end)
	if !ok {
		return "", false
	}
	g = strings.TrimLeftFunc(g, unicode.IsSpace)
	k := strings.IndexFunc(g, unicode.IsSpace)
	if k < 0 {
		if end < len(sc.toks) {
			return "", false
		}
		k = len(g)
	}
	sym := strings.TrimRight(g[:k], ".,;:!?)\u2026")
	code, ok := sc.r.symbols[sym]
	return code, ok && sym != ""
}

// --- Time of day --------------------------------------------------------

// clock reads n at toks[i] as a time: "at 3", "3 pm", "15:00", "15h30",
// "15 Uhr 30", "a las tres y veinte", "three in the afternoon", "half
// past three". An hour word (es "una") is a time only after a prefix.
func (sc *vscan) clock(i, lo int, n num, hourWord bool) (Value, bool) {
	// No hour, nor minutes of a clock phrase ("twenty past three"): no
	// need to look for a prefix.
	switch {
	case !n.ok, n.scale == 0 && n.units > 59, n.scale != 0 && n.scale != 2,
		n.scale == 2 && (n.words || n.units/100 > 24):
		return Value{}, false
	}
	r := sc.r
	strong := sc.endingAt(&r.timePrefixes, i, lo)
	if n.ord && !(n.dot && strong >= 0) {
		// "um 10." is at ten, its dot the end of the sentence that the
		// tokeniser took for an ordinal's: "am 10." is a day.
		return Value{}, false
	}
	n.ord = false
	weak := -1
	if strong < 0 {
		weak = sc.endingAt(&r.weakPrefixes, i, lo)
	}
	if hourWord && strong < 0 && weak < 0 {
		return Value{}, false
	}
	if v, ok := sc.clockPhrase(r.clockBySlot, i, lo, &n, strong, weak); ok {
		return v, true
	}
	var h, m int64
	hasMin, colon, dotted := false, false, false
	switch {
	case n.scale == 0:
		h = n.units
	case n.scale == 2 && !n.words && strings.ContainsAny(sc.toks[i], ".:"):
		h, m, hasMin, dotted = n.units/100, n.units%100, true, true
	default:
		return Value{}, false
	}
	if h > 24 {
		return Value{}, false
	}
	j := n.end
	if !n.words && !dotted && j < len(sc.toks) && len(sc.toks[j]) == 2 && isDigits(sc.toks[j]) {
		if g, ok := sc.gap(j); ok && g == ":" {
			m, hasMin, colon = atoi(sc.toks[j]), true, true
			j++
			// Seconds: "15:00:00".
			if j < len(sc.toks) && sc.toks[j] == "00" {
				if g, ok := sc.gap(j); ok && g == ":" {
					j++
				}
			}
		}
	}
	mark, weakMark := false, false
	if !hasMin && j < len(sc.toks) && !n.words && sc.joined(j) {
		// "15h30": the mark and the minutes in one word.
		t := sc.toks[j]
		for k := 1; k < len(t); k++ {
			if len(t)-k == 2 && isDigits(t[k:]) {
				if end, _ := sc.startingAt(&r.hourMarks, j); end < 0 {
					if sp := r.hourMarks.bestAt([]string{t[:k]}, 0); sp.start == 0 {
						m, hasMin, mark = atoi(t[k:]), true, true
						j++
					}
				}
				break
			}
		}
	}
	if !mark {
		if end, _ := sc.startingAt(&r.hourMarks, j); end > j {
			mark, j = true, end
		} else if end, _ := sc.startingAt(&r.weakMarks, j); end > j {
			weakMark, j = true, end
		}
	}
	if !hasMin {
		// Minutes after a cue ("at three thirty", "15 Uhr 30"), or before a
		// part of the day that cues them ("three thirty pm").
		if mm, end, ok := sc.minutes(j); ok {
			if strong >= 0 || weak >= 0 || mark || weakMark {
				m, hasMin, j = mm, true, end
			} else if pe, _ := sc.startingAt(&r.periods.phraseList, end); pe > end {
				m, hasMin, j = mm, true, end
			}
		}
	}
	from, to := -1, -1
	if end, p := sc.startingAt(&r.periods.phraseList, j); end > j {
		rg := r.periods.val[p]
		from, to, j = rg>>8, rg&0xff, end
	}
	isTime := colon || strong >= 0 || mark || from >= 0 || (weak >= 0 && (weakMark || hasMin))
	if !isTime || m > 59 {
		return Value{}, false
	}
	start := i
	if strong >= 0 {
		start = strong
	} else if weak >= 0 {
		start = weak
	}
	return sc.timeValue(start, j, int(h), int(h*60+m), from, to, n.lead0, n.words), true
}

// minutes reads the minutes said after an hour: "thirty", "oh five",
// "05", "y veinte".
func (sc *vscan) minutes(j int) (int64, int, bool) {
	if j < len(sc.toks) && sc.hasFlag(j, fMinuteConn) {
		j++
	}
	if j >= len(sc.toks) || sc.breakAt(j) {
		return 0, 0, false
	}
	if e, _ := sc.r.lookup(sc.toks[j]); e.digit > 0 && e.num == 0 && j+1 < len(sc.toks) {
		// "oh five"
		if u := sc.words(j + 1); u.whole() && u.units >= 1 && u.units <= 9 {
			return u.units, u.end, true
		}
		return 0, 0, false
	}
	m := sc.small(j)
	if !m.ok || m.units > 59 || sc.isMinorUnit(m.end-1) {
		return 0, 0, false
	}
	return m.units, m.end, true
}

// clockFrom reads a clock phrase that opens with a word at toks[i]
// ("half past three", "halb vier", "kwart over drie").
func (sc *vscan) clockFrom(i, lo int) (Value, bool) {
	ps := sc.r.clockByWord[sc.toks[i]]
	if len(ps) == 0 {
		return Value{}, false
	}
	strong := sc.endingAt(&sc.r.timePrefixes, i, lo)
	weak := -1
	if strong < 0 {
		weak = sc.endingAt(&sc.r.weakPrefixes, i, lo)
	}
	return sc.clockPhrase(ps, i, lo, nil, strong, weak)
}

// clockPhrase matches one of ps at toks[i]; first, when set, is the
// number already read there for the phrase's first slot.
func (sc *vscan) clockPhrase(ps []*clockPhrase, i, lo int, first *num, strong, weak int) (Value, bool) {
	for _, cp := range ps {
		j := i
		h, m := int64(-1), int64(0)
		words := false
		ok := true
		for k, el := range cp.elems {
			if el.slot == 0 {
				if j >= len(sc.toks) || sc.toks[j] != el.word {
					ok = false
					break
				}
				j++
				continue
			}
			var x num
			switch {
			case k == 0 && first != nil:
				x = *first
			case j >= len(sc.toks):
			case isFigure(sc.toks[j]):
				x = sc.figure(j)
			default:
				x = sc.words(j)
				if !x.ok {
					if e, _ := sc.r.lookup(sc.toks[j]); e.hour > 0 {
						x = num{ok: true, units: int64(e.hour - 1), end: j + 1, words: true}
					}
				}
			}
			if !x.whole() || x.ord {
				ok = false
				break
			}
			words = words || x.words
			switch el.slot {
			case 'h':
				h = x.units
			case 'm':
				m = x.units
			default:
				m = -x.units
			}
			j = x.end
		}
		if !ok || h < 0 || h > 24 || m > 59 || m < -59 {
			continue
		}
		from, to := -1, -1
		if end, p := sc.startingAt(&sc.r.periods.phraseList, j); end > j {
			rg := sc.r.periods.val[p]
			from, to, j = rg>>8, rg&0xff, end
		}
		if cp.cued && strong < 0 && from < 0 {
			continue
		}
		start := i
		if strong >= 0 {
			start = strong
		} else if weak >= 0 {
			start = weak
		}
		t := int(h*60 + int64(cp.add) + m)
		// The written hour decides am or pm: "halb vier" is 3:30 or
		// 15:30.
		return sc.timeValue(start, j, int(h), t, from, to, false, words), true
	}
	return Value{}, false
}

// timeValue builds a time from minutes t said with the hour h, and the
// part of the day [from, to) when one was said (from < 0: none).
func (sc *vscan) timeValue(start, end, h, t, from, to int, lead0, words bool) Value {
	t = ((t % 1440) + 1440) % 1440
	v := Value{Kind: ValueTime, Start: start, End: end, Words: words}
	if from < 0 {
		v.Minutes = int16(t)
		v.EitherHalf = h >= 1 && h <= 12 && !lead0
		return v
	}
	// The part of the day picks the reading: 3 "in the afternoon" is
	// 15:00; a part that fits neither reading is a contradiction.
	in := func(c int) bool {
		hh := c / 60
		return (from <= hh && hh < to) || (from <= hh+24 && hh+24 < to)
	}
	cands := [2]int{t, -1}
	if h <= 12 {
		cands = [2]int{t % 720, t%720 + 720}
	}
	found := -1
	for _, c := range cands {
		if c >= 0 && in(c) {
			if found >= 0 {
				v.Minutes, v.EitherHalf = int16(found), true
				return v
			}
			found = c
		}
	}
	if found < 0 {
		return sc.unclear(start, end)
	}
	v.Minutes = int16(found)
	return v
}

// --- Dates --------------------------------------------------------------

// dateParts is a date as it is read.
type dateParts struct {
	y, m, d, wd int
	start       int
	prefixed    bool
	words       bool
}

// dayFrom reads n at toks[i] as a day of the month: a figure ordinal
// ("8th", "1er", de "8."), an ordinal after an ordinal prefix ("the
// eighth", "am achten"), a cardinal after a day prefix ("el 8", "le
// huit"), or a number before a month ("8 December", "8 de diciembre").
func (sc *vscan) dayFrom(i, lo int, n num) (Value, bool) {
	if !n.whole() || n.units < 1 || n.units > 31 {
		return Value{}, false
	}
	r := sc.r
	dp := dateParts{d: int(n.units), start: i, words: n.words}
	if st := sc.endingAt(&r.dayPrefixes, i, lo); st >= 0 {
		dp.start, dp.prefixed = st, true
	} else if n.ord {
		if st := sc.endingAt(&r.ordPrefixes, i, lo); st >= 0 {
			dp.start, dp.prefixed = st, true
		}
	}
	switch {
	case sc.monthAt(sc.skipGlue(n.end)):
	case n.ord && !n.words:
	case dp.prefixed && (!n.words || sc.endsDate(n.end)):
	default:
		return Value{}, false
	}
	return sc.date(n.end, lo, dp)
}

// date reads the parts of a date from toks[i] on, after those in dp: a
// weekday, a month, a day, a year, in any of the locale's orders, with
// date glue between ("Tuesday, the 8th of December 2026", "el martes 8
// de diciembre", "am Dienstag, den 8. Dezember").
func (sc *vscan) date(i, lo int, dp dateParts) (Value, bool) {
	r := sc.r
	if dp.d == 0 {
		dp.start = i
		for _, pl := range []*endList{&r.dayPrefixes, &r.ordPrefixes, &r.dateGlue} {
			if st := sc.endingAt(pl, i, lo); st >= 0 {
				dp.start = st
				break
			}
		}
	}
	j := i
	var unsure bool
	for j < len(sc.toks) {
		k := j
		if dp.d != 0 || dp.m != 0 || dp.wd != 0 {
			k = sc.skipGlue(j)
		}
		if k >= len(sc.toks) {
			break
		}
		tok := sc.toks[k]
		e, _ := sc.r.lookup(tok)
		if end, p := sc.startingAt(&r.weekdayPhrases.phraseList, k); end > k && dp.wd == 0 {
			dp.wd, dp.words, j = r.weekdayPhrases.val[p], true, end
			continue
		}
		if e.weekday != 0 && dp.wd == 0 {
			dp.wd, dp.words, j = int(e.weekday), true, k+1
			continue
		}
		if e.month != 0 && dp.m == 0 {
			dp.m, dp.words, j = int(e.month), true, k+1
			continue
		}
		if isFigure(tok) {
			if dp.d == 0 && dp.m == 0 && dp.y == 0 {
				if v, ok := sc.numericDate(k, lo); ok {
					// "Tuesday, 12/08"
					dp.y, dp.m, dp.d, unsure = int(v.Year), int(v.Month), int(v.Day), v.DayMonthUnsure
					j = v.End
					break
				}
			}
			f := sc.figure(k)
			if f.whole() && !f.ord && f.figures == 4 && f.units >= 1900 && f.units <= 2199 && dp.y == 0 && (dp.m != 0 || dp.d != 0) {
				dp.y, j = int(f.units), f.end
				continue
			}
			if f.whole() && f.units >= 1 && f.units <= 31 && dp.d == 0 && (dp.m != 0 || dp.wd != 0) && !sc.timeAfter(k, f.end) {
				dp.d, j = int(f.units), f.end
				continue
			}
			break
		}
		w := sc.words(k)
		if w.whole() && w.units >= 1 && w.units <= 31 && dp.d == 0 && (dp.m != 0 || dp.wd != 0) && !sc.timeAfter(k, w.end) {
			dp.d, dp.words, j = int(w.units), true, w.end
			continue
		}
		if w.whole() && !w.ord && w.units >= 1900 && w.units <= 2199 && dp.y == 0 && (dp.m != 0 || dp.d != 0) {
			dp.y, dp.words, j = int(w.units), true, w.end
			continue
		}
		break
	}
	// A month alone is a date only after a month prefix ("in December",
	// "im Mai"): "May I", "march on" name no month.
	if dp.d == 0 && dp.wd == 0 && dp.y == 0 {
		st := sc.endingAt(&r.monthPrefixes, i, lo)
		if st < 0 {
			return Value{}, false
		}
		dp.start = st
	}
	return Value{Kind: ValueDate, Start: dp.start, End: j, Words: dp.words, Year: int16(dp.y), Month: int8(dp.m),
		Day: int8(dp.d), Weekday: int8(dp.wd), DayMonthUnsure: unsure}, true
}

// skipGlue returns the first token from j on that is not date glue or a
// day or ordinal prefix, past two of them at most.
func (sc *vscan) skipGlue(j int) int {
	for n := 0; n < 2 && j < len(sc.toks); n++ {
		end, _ := sc.startingAt(&sc.r.dateJoin, j)
		if end <= j {
			break
		}
		j = end
	}
	return j
}

// breakAt: a comma, colon or dash stands before toks[k].
func (sc *vscan) breakAt(k int) bool {
	for _, b := range sc.breaks {
		if b == k {
			return true
		}
	}
	return false
}

func (sc *vscan) monthAt(k int) bool {
	if k >= len(sc.toks) {
		return false
	}
	e, _ := sc.r.lookup(sc.toks[k])
	return e.month != 0
}

// endsDate: a day in words ends its date at toks[k]: the sentence or a
// clause ends, or a month, weekday, glue or time follows.
func (sc *vscan) endsDate(k int) bool {
	if k >= len(sc.toks) {
		return true
	}
	if sc.breakAt(k) {
		return true
	}
	e, _ := sc.r.lookup(sc.toks[k])
	if e.month != 0 || e.weekday != 0 {
		return true
	}
	for _, pl := range []*phraseList{&sc.r.dateGlue.phraseList, &sc.r.timePrefixes.phraseList, &sc.r.weakPrefixes.phraseList} {
		if end, _ := sc.startingAt(pl, k); end > k {
			return true
		}
	}
	return false
}

// timeAfter: the number toks[k:end] is an hour, not a day: a part of the
// day, an hour mark or ":" follows ("Tuesday 3 pm").
func (sc *vscan) timeAfter(k, end int) bool {
	if end >= len(sc.toks) {
		return false
	}
	if g, ok := sc.gap(end); ok && g == ":" {
		return true
	}
	for _, pl := range []*phraseList{&sc.r.periods.phraseList, &sc.r.hourMarks, &sc.r.weakMarks} {
		if e, _ := sc.startingAt(pl, end); e > end {
			return true
		}
	}
	return false
}

// numericDate reads a date in figures at toks[i]: ISO ("2026-12-08"),
// with slashes ("12/08", "08/12/2026"), dashes with a year ("8-12-2026"),
// dots ("08.12.2026"; de "8.12." with its final dot). The locale's
// date_order reads day and month; a locale that reads both ways marks a
// date whose readings differ unsure.
func (sc *vscan) numericDate(i, lo int) (Value, bool) {
	tok := sc.toks[i]
	var p [3]int64
	var lens [3]int
	n, end := 0, i+1
	switch dots := strings.Count(tok, "."); {
	case strings.IndexByte(tok, ',') >= 0:
		return Value{}, false
	case dots == 2 || dots == 1 && sc.l.ordinalDot && sc.finalDot(i):
		for f := range strings.SplitSeq(tok, ".") {
			if f == "" || !isDigits(f) || n == 3 {
				break
			}
			p[n], lens[n] = atoi(f), len(f)
			n++
		}
		if n != dots+1 || lens[0] > 2 || lens[1] > 2 || (n == 3 && lens[2] != 2 && lens[2] != 4) {
			return Value{}, false
		}
	case dots == 0 && isDigits(tok):
		p[0], lens[0], n = atoi(tok), len(tok), 1
		var sep string
		for n < 3 && end < len(sc.toks) && isDigits(sc.toks[end]) {
			g, ok := sc.gap(end)
			if !ok || (g != "/" && g != "-") || (sep != "" && g != sep) {
				break
			}
			sep = g
			p[n], lens[n] = atoi(sc.toks[end]), len(sc.toks[end])
			n++
			end++
		}
		if n < 2 || (sep == "-" && n < 3) {
			return Value{}, false
		}
	default:
		return Value{}, false
	}
	v := Value{Kind: ValueDate, Start: i, End: end}
	if lens[0] == 4 {
		if n != 3 || lens[1] > 2 || lens[2] > 2 {
			return Value{}, false
		}
		v.Year, v.Month, v.Day = int16(p[0]), int8(p[1]), int8(p[2])
		return v, validDate(p[1], p[2])
	}
	if lens[0] > 2 || lens[1] > 2 {
		return Value{}, false
	}
	if n == 3 {
		y := p[2]
		switch lens[2] {
		case 2:
			y += 2000
		case 4:
		default:
			return Value{}, false
		}
		v.Year = int16(y)
	}
	dmy := validDate(p[1], p[0]) && sc.r.dmy
	mdy := validDate(p[0], p[1]) && sc.r.mdy
	switch {
	case dmy && mdy:
		v.Month, v.Day = int8(p[1]), int8(p[0])
		v.DayMonthUnsure = p[0] != p[1]
	case dmy:
		v.Month, v.Day = int8(p[1]), int8(p[0])
	case mdy:
		v.Month, v.Day = int8(p[0]), int8(p[1])
	default:
		return Value{}, false
	}
	return v, true
}

// finalDot: the dot right after toks[i] is its own, not the end of the
// sentence ("am 8.12. um ...").
func (sc *vscan) finalDot(i int) bool {
	_, e := sc.span(i)
	return e >= 0 && e < len(sc.raw) && sc.raw[e] == '.'
}

func validDate(m, d int64) bool { return m >= 1 && m <= 12 && d >= 1 && d <= 31 }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func atoi(s string) int64 {
	var n int64
	for i := 0; i < len(s) && i < 18; i++ {
		n = n*10 + int64(s[i]-'0')
	}
	return n
}
