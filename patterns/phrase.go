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
	// ends, when set, must also hold of the matched word in its tokens
	// (a separated verb prefix ends its clause).
	ends func(toks []string, i int) bool
}

func (e element) matches(tok string) bool {
	switch {
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
	if len(elems) == 0 {
		return []int{}
	}
	e := elems[0]
	if e.gap {
		for g := 0; g <= maxGap && i+g <= len(toks); g++ {
			if ps := positions(elems[1:], toks, i+g); ps != nil {
				return ps
			}
		}
		return nil
	}
	if i >= len(toks) || !e.matches(toks[i]) || (e.ends != nil && !e.ends(toks, i)) {
		return nil
	}
	ps := positions(elems[1:], toks, i+1)
	if ps == nil {
		return nil
	}
	return append([]int{i}, ps...)
}

// phraseList is a compiled list, indexed by the exact first word.
type phraseList struct {
	byFirst map[string][]*phrase
	other   []*phrase // first element is a prefix or a form set
}

func compileList(l *Locale, srcs []string) phraseList {
	pl := phraseList{byFirst: map[string][]*phrase{}}
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
		pl.byFirst = map[string][]*phrase{}
	}
	first := p.elems[0]
	if first.prefix || first.forms != nil {
		pl.other = append(pl.other, p)
		return
	}
	pl.byFirst[first.word] = append(pl.byFirst[first.word], p)
}

func (pl *phraseList) empty() bool { return len(pl.byFirst) == 0 && len(pl.other) == 0 }

// find returns every match in toks, longest first at each position, in
// token order.
func (pl *phraseList) find(toks []string) []span {
	var out []span
	for i := range toks {
		if best := pl.bestAt(toks, i); best.start >= 0 {
			out = append(out, best)
		}
	}
	return out
}

// bestAt returns the longest match starting at toks[i] (the first listed
// of equally long ones), or a span with start -1.
func (pl *phraseList) bestAt(toks []string, i int) span {
	best := span{start: -1}
	for _, p := range pl.byFirst[toks[i]] {
		if end := matchAt(p.elems, toks, i); end > i && (best.start < 0 || end > best.end) {
			best = span{start: i, end: end, p: p}
		}
	}
	for _, p := range pl.other {
		if end := matchAt(p.elems, toks, i); end > i && (best.start < 0 || end > best.end) {
			best = span{start: i, end: end, p: p}
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
