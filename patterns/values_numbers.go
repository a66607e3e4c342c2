package patterns

import "strings"

// part is one piece of a number in words: a value added, a multiplier,
// or a connector.
type part struct {
	val  int64
	slot int64 // what may follow it; 0: implied by val
	mult bool
	ord  bool
	conn bool
}

// maxParts bounds the pieces of one number word (a compound).
const maxParts = 12

// acc composes the parts of a number in words, place by place: each part
// added must be smaller than what the part before leaves open ("one
// hundred twenty": 100 leaves < 100, 20 leaves < 10), a multiplier
// applies to what stands before it, or to 1 at the start ("hundred"),
// and multipliers of a thousand and more fall ("two million three hundred
// thousand"). A part that breaks these rules ends the number before it.
type acc struct {
	total, group int64
	slot         int64 // the next part added must be smaller
	lastMult     int64 // the last multiplier of a thousand or more
	parts        int
	conn         bool // a connector stands before the next part
	lastUnit     bool // the last part was a unit (for unit_before_tens)
	lastBig      bool // the last part was a multiplier of a thousand or more
	done         bool // an ordinal or a zero ends the number
	ord          bool
}

func newAcc() acc { return acc{slot: 1000} }

func impliedSlot(v int64) int64 {
	switch {
	case v >= 100 && v%100 == 0:
		return 100
	case v >= 20 && v%10 == 0:
		return 10
	}
	return 1
}

// add adds p, or reports that it does not fit.
func (a *acc) add(p part, unitTens bool) bool {
	if a.done {
		return false
	}
	if p.conn {
		if a.parts == 0 || a.conn {
			return false
		}
		a.conn = true
		return true
	}
	switch {
	case p.mult && p.val >= 1000:
		g := a.group
		if g == 0 {
			if a.parts > 0 {
				return false
			}
			g = 1
		}
		if g > 999 || (a.lastMult != 0 && p.val >= a.lastMult) {
			return false
		}
		a.total += g * p.val
		a.group, a.slot, a.lastMult, a.lastBig = 0, 1000, p.val, true
	case p.mult:
		g := a.group
		if g == 0 {
			if a.parts > 0 && !a.lastBig {
				return false
			}
			g = 1
		}
		if g >= 100 || a.conn {
			return false
		}
		a.group, a.slot, a.lastBig = g*p.val, p.val, false
	default:
		v := p.val
		switch {
		case unitTens && a.conn && a.lastUnit && v >= 20 && v < 100 && v%10 == 0 && a.group%100 < 10:
			// "ein" "und" "zwanzig"
			a.group += v
			a.slot = 1
		case v == 0:
			if a.parts > 0 {
				return false
			}
			a.done = true
		case v >= a.slot:
			return false
		default:
			a.group += v
			a.slot = p.slot
			if a.slot == 0 {
				a.slot = impliedSlot(v)
			}
		}
		a.lastUnit = v > 0 && v < 10
		a.lastBig = false
	}
	if p.ord {
		a.done, a.ord = true, true
	}
	a.conn = false
	a.parts++
	return true
}

func (a *acc) value() int64 { return a.total + a.group }

// words reads a number in words that opens at toks[i]: composed across
// tokens ("one hundred and twenty", "quatre-vingt-dix") and within one
// ("einhundertzwanzig"), with a decimal part said ("seventy-one point
// two five"). An article counts as 1 only before a multiplier ("a
// hundred").
func (sc *vscan) words(i int) num {
	a := newAcc()
	j := i
	good := i // the token after the last part that fit
	var buf [maxParts]part
	for j < len(sc.toks) {
		if j > i && sc.breakAt(j) {
			break // "twenty, five" is no 25
		}
		tok := sc.toks[j]
		e, _ := sc.r.lookup(tok)
		if e.flags&fConnector != 0 && e.num == 0 {
			if !a.add(part{conn: true}, false) {
				break
			}
			j++
			continue
		}
		if end, p := sc.startingAt(&sc.r.numPhrases.phraseList, j); end > j {
			v := sc.r.numPhrases.val[p]
			if !a.add(part{val: int64(v & 0xffff), slot: int64(v >> 16)}, sc.r.unitTens) {
				break
			}
			j, good = end, end
			continue
		}
		if a.parts == 0 && e.flags&fArticle != 0 && j+1 < len(sc.toks) {
			if next, _ := sc.r.lookup(sc.toks[j+1]); next.mult != 0 {
				a.add(part{val: 1}, false)
				j++
				continue
			}
		}
		ps := sc.r.tokenParts(tok, buf[:0])
		if len(ps) == 0 && e.part > 0 && a.parts > 0 {
			// A part of a number that is no number alone ("vingt et
			// un", "cento e um").
			ps = append(buf[:0], part{val: int64(e.part - 1)})
		}
		if len(ps) == 0 {
			break
		}
		save := a
		fit := true
		for _, p := range ps {
			if !a.add(p, sc.r.unitTens) {
				fit = false
				break
			}
		}
		if !fit {
			a = save
			break
		}
		j++
		good = j
	}
	if a.parts == 0 || good == i {
		return num{}
	}
	n := num{ok: true, units: a.value(), end: good, words: true, ord: a.ord}
	n.digit = good == i+1 && n.units <= 9 && !n.ord
	if !n.ord {
		sc.decimals(&n)
	}
	return n
}

// decimals reads a decimal part said after n: "point two five", "coma
// cincuenta" (the digits as said: "point twenty-five" is .25).
func (sc *vscan) decimals(n *num) {
	j := n.end
	if j+1 >= len(sc.toks) {
		return
	}
	if e, _ := sc.r.lookup(sc.toks[j]); e.flags&fDecimal == 0 {
		return
	}
	units, scale := n.units, n.scale
	k := j + 1
	for ; k < len(sc.toks) && scale < 9; k++ {
		d, ok := sc.digitWord(sc.toks[k])
		if !ok {
			break
		}
		units, scale = units*10+int64(d), scale+1
	}
	if k == j+2 {
		// One word: it may be a number of two digits ("point twenty-five").
		if m := sc.words(j + 1); m.ok && m.whole() && m.units >= 10 && m.units <= 99 && m.end > k-1 {
			units, scale, k = n.units*100+m.units, 2, m.end
		}
	}
	if k == j+1 {
		return
	}
	n.units, n.scale, n.end = units, scale, k
}

// tokenParts returns the parts one word makes: a number word, a
// multiplier, an ordinal, a compound of them ("einundzwanzig"), or a
// cardinal with an ordinal suffix ("fourth", "vierten"). None: not a
// number word.
func (r *valueRules) tokenParts(tok string, buf []part) []part {
	if e, ok := r.lookup(tok); ok {
		switch {
		case e.num > 0:
			return append(buf, part{val: int64(e.num - 1), slot: int64(e.slot)})
		case e.mult > 0:
			return append(buf, part{val: int64(e.mult), mult: true})
		case e.ord > 0:
			return append(buf, part{val: int64(e.ord), ord: true})
		}
	}
	if !r.morphable(tok) {
		return nil
	}
	if r.compounds {
		if ps := r.decompose(tok, buf); len(ps) > 0 {
			return ps
		}
	}
	// An ordinal: a cardinal, a suffix and an ending ("vier" "t" "en"),
	// or an ordinal stem and an ending ("acht" "en").
	for _, end := range r.ordEndings {
		if !strings.HasSuffix(tok, end) || len(tok)-len(end) < 2 {
			continue
		}
		stem := tok[:len(tok)-len(end)]
		if end != "" {
			if e, ok := r.lex[stem]; ok && e.ord > 0 {
				return append(buf, part{val: int64(e.ord), ord: true})
			}
		}
		for _, suf := range r.ordSuffixes {
			if !strings.HasSuffix(stem, suf) || len(stem)-len(suf) < 2 {
				continue
			}
			card := stem[:len(stem)-len(suf)]
			var ps []part
			if e, ok := r.lex[card]; ok && e.num > 1 {
				ps = append(buf, part{val: int64(e.num - 1), slot: int64(e.slot)})
			} else if r.compounds {
				ps = r.decompose(card, buf)
			}
			if len(ps) > 0 && !ps[len(ps)-1].mult && !ps[len(ps)-1].conn {
				ps[len(ps)-1].ord = true
				return ps
			}
		}
	}
	return nil
}

// decompose splits a compound number word into its parts, longest first,
// with backtracking ("zweihundertfünfundachtzig": zwei hundert fünf und
// achtzig). The parts must compose: "zwanzigzwanzig" is no number.
func (r *valueRules) decompose(tok string, buf []part) []part {
	ps, ok := r.split(tok, buf[:0])
	if !ok || len(ps) < 2 {
		return nil
	}
	a := newAcc()
	for _, p := range ps {
		if !a.add(p, r.unitTens) {
			return nil
		}
	}
	if a.conn {
		return nil
	}
	return ps
}

func (r *valueRules) split(rest string, ps []part) ([]part, bool) {
	if rest == "" {
		return ps, true
	}
	if len(ps) == cap(ps) {
		return ps, false
	}
	for n := min(r.maxMorph, len(rest)); n >= 2; n-- {
		e, ok := r.lex[rest[:n]]
		if !ok {
			continue
		}
		var p part
		switch {
		case e.num > 0:
			p = part{val: int64(e.num - 1), slot: int64(e.slot)}
		case e.part > 0:
			p = part{val: int64(e.part - 1)}
		case e.mult > 0:
			p = part{val: int64(e.mult), mult: true}
		case e.flags&fConnector != 0 && len(ps) > 0:
			p = part{conn: true}
		default:
			continue
		}
		if out, ok := r.split(rest[n:], append(ps, p)); ok {
			return out, true
		}
	}
	return ps, false
}

// wordNumber reads one word as a whole cardinal ("two", "zwanzig",
// "einundzwanzig"); an article alone is none. It allocates nothing.
func (l *Locale) wordNumber(tok string) (int64, bool) {
	if l == nil || l.values == nil || tok == "" {
		return 0, false
	}
	r := l.values
	var buf [maxParts]part
	ps := r.tokenParts(tok, buf[:0])
	if len(ps) == 0 {
		return 0, false
	}
	a := newAcc()
	for _, p := range ps {
		if !a.add(p, r.unitTens) {
			return 0, false
		}
	}
	if a.ord {
		return 0, false
	}
	return a.value(), true
}
