package patterns

import (
	"strings"
)

// maxGap is how many words a "*" in a phrase may stand for.
const maxGap = 3

// element is one word of a phrase.
type element struct {
	word   string          // exact folded word, or a prefix when prefix is set
	forms  map[string]bool // any of these words (inflected verbs); nil otherwise
	prefix bool            // "confirm~" matches confirm, confirms, confirmation
	gap    bool            // "*": up to maxGap words
	number bool            // "#": a number in figures ("ending in #")
	// ends, when set, must also hold of the matched word in its tokens
	// (a separated verb prefix ends its clause).
	ends func(toks []string, i int) bool
}

func (e element) matches(tok string) bool {
	switch {
	case e.number:
		return tok != "" && tok[0] >= '0' && tok[0] <= '9'
	case e.forms != nil:
		return e.forms[tok]
	case e.prefix:
		return strings.HasPrefix(tok, e.word)
	default:
		return tok == e.word
	}
}

// phrase is a compiled pattern: words, "*" gaps and "~" prefixes.
type phrase struct {
	src   string
	elems []element
}

// span is where a phrase matched: tokens [start, end).
type span struct {
	start, end int
	p          *phrase
}

// compilePhrase folds and compiles a phrase as written in a locale or policy.
func compilePhrase(l *Locale, src string) *phrase {
	p := &phrase{src: src}
	for _, w := range strings.Fields(l.fold(src)) {
		switch {
		case w == "*":
			p.elems = append(p.elems, element{gap: true})
		case w == "#":
			p.elems = append(p.elems, element{number: true})
		case strings.HasSuffix(w, "~") && len(w) > 1:
			p.elems = append(p.elems, element{word: strings.TrimSuffix(w, "~"), prefix: true})
		default:
			for _, part := range l.splitWord(strings.Trim(w, ".,!?;:¿¡\"")) {
				if part != "" {
					p.elems = append(p.elems, element{word: part})
				}
			}
		}
	}
	// A phrase may not start or end with a gap.
	for len(p.elems) > 0 && p.elems[0].gap {
		p.elems = p.elems[1:]
	}
	for len(p.elems) > 0 && p.elems[len(p.elems)-1].gap {
		p.elems = p.elems[:len(p.elems)-1]
	}
	return p
}

// matchAt reports the end of a match of elems starting at toks[i], or -1.
func matchAt(elems []element, toks []string, i int) int {
	if len(elems) == 0 {
		return i
	}
	e := elems[0]
	if e.gap {
		for g := 0; g <= maxGap && i+g <= len(toks); g++ {
			if end := matchAt(elems[1:], toks, i+g); end >= 0 {
				return end
			}
		}
		return -1
	}
	if i >= len(toks) || !e.matches(toks[i]) || (e.ends != nil && !e.ends(toks, i)) {
		return -1
	}
	return matchAt(elems[1:], toks, i+1)
}

// positions returns the tokens a match of elems starting at toks[i] takes
// by its words, leaving out what its gaps stand for; nil when it does not
// match there. It finds the same match as matchAt.
func positions(elems []element, toks []string, i int) []int {
	ps, ok := appendPositions(make([]int, 0, len(elems)), elems, toks, i)
	if !ok {
		return nil
	}
	return ps
}

// appendPositions appends to dst what positions returns and reports
// whether elems match at toks[i]; on false it returns dst as it was. A
// caller that reuses dst across matches allocates once, not per word.
func appendPositions(dst []int, elems []element, toks []string, i int) ([]int, bool) {
	if len(elems) == 0 {
		return dst, true
	}
	e := elems[0]
	if e.gap {
		for g := 0; g <= maxGap && i+g <= len(toks); g++ {
			if out, ok := appendPositions(dst, elems[1:], toks, i+g); ok {
				return out, true
			}
		}
		return dst, false
	}
	if i >= len(toks) || !e.matches(toks[i]) || (e.ends != nil && !e.ends(toks, i)) {
		return dst, false
	}
	out, ok := appendPositions(append(dst, i), elems[1:], toks, i+1)
	if !ok {
		return dst, false
	}
	return out, true
}

// phraseList is a compiled list, indexed by the first word.
//
// Matching is the language engine's hot loop (every list is tried at every
// token of both turns of a Check), so a token that no phrase starts with
// is turned away by a 128-bit filter before the map is read, and the
// phrases whose first element is an inflected form set are indexed under
// each of their forms rather than tried one by one at every token.
type phraseList struct {
	// byFirst holds, under each word a phrase can start with, those
	// phrases: an exact first word, or any form of a first form set.
	byFirst map[string][]ranked
	// prefixes are the phrases whose first element is a prefix
	// ("confirm~"), tried at every token that starts with the same byte.
	prefixes []ranked
	// n counts the phrases added; a phrase's rank keeps the order of the
	// list as written, which settles ties between equally long matches.
	n int
	// firstWords filters tokens before byFirst is read (see firstBit);
	// prefixBytes holds the first bytes of the prefixes.
	firstWords  [2]uint64
	prefixBytes [4]uint64
	// emptyFirst: some phrase can start with the empty word, which the
	// filter does not hold.
	emptyFirst bool
}

// ranked is a phrase with its place in a list: phrases starting with an
// exact word come before those starting with a prefix or a form set, each
// in the order added (the order the lists are matched in before they were
// indexed this way).
type ranked struct {
	p    *phrase
	rank int
}

// firstBit is tok's bit in phraseList.firstWords: its first and last bytes
// and its length, hashed to 0-127.
func firstBit(tok string) uint {
	return (uint(tok[0])*131 + uint(tok[len(tok)-1])*31 + uint(len(tok))) & 127
}

func compileList(l *Locale, srcs []string) phraseList {
	var pl phraseList
	for _, s := range srcs {
		pl.add(compilePhrase(l, s))
	}
	return pl
}

func (pl *phraseList) add(p *phrase) {
	if len(p.elems) == 0 {
		return
	}
	if pl.byFirst == nil {
		pl.byFirst = map[string][]ranked{}
	}
	pl.n++
	const later = 1 << 30 // ranks of prefix and form-set phrases
	first := p.elems[0]
	switch {
	case first.prefix:
		pl.prefixes = append(pl.prefixes, ranked{p, later + pl.n})
		if first.word != "" {
			b := first.word[0]
			pl.prefixBytes[b>>6] |= 1 << (b & 63)
		} else {
			pl.emptyFirst = true
		}
	case first.forms != nil:
		for f := range first.forms {
			pl.index(f, ranked{p, later + pl.n})
		}
	default:
		pl.index(first.word, ranked{p, pl.n})
	}
}

func (pl *phraseList) index(word string, r ranked) {
	pl.byFirst[word] = append(pl.byFirst[word], r)
	if word == "" {
		pl.emptyFirst = true
		return
	}
	bit := firstBit(word)
	pl.firstWords[bit>>6] |= 1 << (bit & 63)
}

func (pl *phraseList) empty() bool { return pl.n == 0 }

// find returns every match in toks, longest first at each position, in
// token order.
func (pl *phraseList) find(toks []string) []span {
	return pl.appendFind(nil, toks)
}

// appendFind appends what find returns to dst.
func (pl *phraseList) appendFind(dst []span, toks []string) []span {
	if pl.n == 0 {
		return dst
	}
	for i := range toks {
		if best := pl.bestAt(toks, i); best.start >= 0 {
			dst = append(dst, best)
		}
	}
	return dst
}

// spanArena hands out the matches of several lists in one sentence from
// one buffer: each find's result is a slice of it, capped, so later finds
// never write over it (a find that outgrows the buffer moves on to a new
// one, leaving earlier results where they are).
type spanArena struct {
	buf  []span
	toks []string
}

func newSpanArena(toks []string) *spanArena {
	return &spanArena{buf: make([]span, 0, 2*len(toks)+8), toks: toks}
}

func (a *spanArena) find(pl *phraseList) []span {
	n := len(a.buf)
	a.buf = pl.appendFind(a.buf, a.toks)
	return a.buf[n:len(a.buf):len(a.buf)]
}

// bestAt returns the longest match starting at toks[i] (the first listed
// of equally long ones), or a span with start -1.
func (pl *phraseList) bestAt(toks []string, i int) span {
	best := span{start: -1}
	bestRank := 0
	try := func(r ranked) {
		if end := matchAt(r.p.elems, toks, i); end > i && (best.start < 0 || end > best.end || (end == best.end && r.rank < bestRank)) {
			best, bestRank = span{start: i, end: end, p: r.p}, r.rank
		}
	}
	tok := toks[i]
	if pl.emptyFirst || tok == "" {
		for _, r := range pl.byFirst[tok] {
			try(r)
		}
		for _, r := range pl.prefixes {
			try(r)
		}
		return best
	}
	if bit := firstBit(tok); pl.firstWords[bit>>6]&(1<<(bit&63)) != 0 {
		for _, r := range pl.byFirst[tok] {
			try(r)
		}
	}
	if b := tok[0]; pl.prefixBytes[b>>6]&(1<<(b&63)) != 0 {
		for _, r := range pl.prefixes {
			try(r)
		}
	}
	return best
}

// first returns the first match in toks: find(toks)[0], without building
// the list.
func (pl *phraseList) first(toks []string) (span, bool) {
	for i := range toks {
		if best := pl.bestAt(toks, i); best.start >= 0 {
			return best, true
		}
	}
	return span{}, false
}

// startsWith returns the match that starts at toks[0], if any, within the
// first 8 tokens: find(toks[:8])[0] when it starts at 0, without building
// the list.
func (pl *phraseList) startsWith(toks []string) (span, bool) {
	if len(toks) == 0 {
		return span{}, false
	}
	if best := pl.bestAt(toks[:min(len(toks), 8)], 0); best.start == 0 {
		return best, true
	}
	return span{}, false
}

// Match is one thing a rule found in a text.
type Match struct {
	Rule    string // "affirmative", "negation", "verb", ...
	Pattern string // the phrase as written in the locale or policy
	Text    string // the words it matched
}

func spanMatch(rule string, toks []string, s span) Match {
	return Match{Rule: rule, Pattern: s.p.src, Text: strings.Join(toks[s.start:s.end], " ")}
}
