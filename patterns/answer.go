package patterns

import (
	"slices"
	"strings"
)

// Judgement is what the rules found in a caller's turn.
type Judgement struct {
	// Negated: a negation or reversal stands in the turn.
	Negated bool
	// NotPlain: a hedge, a condition, a second request, a question, too
	// many words, or words that are not part of a yes.
	NotPlain bool
	// Affirmative: the turn says yes (an affirmative or a yes idiom).
	Affirmative bool
	// Verb: the turn names the action by one of its verbs.
	Verb bool
	// Words counted, fillers left out.
	Words int
	// Matches found, for the evidence.
	Matches []Match
	// Detail says, for people, why the turn is negated or not plain.
	Detail string
}

// JudgeAnswer judges a caller's turn. a (may be nil) names the action:
// its verbs and objects may stand in a plain yes. echo holds words of the
// question the turn answers, which a plain yes may repeat ("yes, Tuesday").
func (l *Locale) JudgeAnswer(t Text, a *Action, echo map[string]bool) Judgement {
	var j Judgement
	toks := t.Tokens()
	var pbuf []int // the positions of one match at a time
	covered := make([]bool, len(toks))
	cover := func(s span) {
		for i := s.start; i < s.end; i++ {
			covered[i] = true
		}
	}
	overlapsCovered := func(s span) bool {
		for i := s.start; i < s.end; i++ {
			if covered[i] {
				return true
			}
		}
		return false
	}

	for _, s := range l.findMixed(func(x *Locale) *phraseList { return &x.negationIdioms }, toks) {
		cover(s)
		j.Affirmative = true
		j.Matches = append(j.Matches, spanMatch("negation_idiom", toks, s))
	}
	for _, s := range l.findMixed(func(x *Locale) *phraseList { return &x.negations }, toks) {
		if overlapsCovered(s) {
			continue
		}
		j.Negated = true
		j.Matches = append(j.Matches, spanMatch("negation", toks, s))
		if j.Detail == "" {
			j.Detail = "negation \"" + strings.Join(toks[s.start:s.end], " ") + "\""
		}
	}
	if j.Negated {
		return j
	}
	// Affirmatives cover their words before hedges and conditions are
	// looked for ("mm hmm" is a yes, though "hmm" alone hedges); they never
	// cover a negation.
	for _, s := range l.findMixed(func(x *Locale) *phraseList { return &x.affirmatives }, toks) {
		cover(s)
		j.Affirmative = true
		j.Matches = append(j.Matches, spanMatch("affirmative", toks, s))
	}
	// A stutter before a word of the yes is no word: "ye- yes", fr "ou-
	// oui" (never a question's "où").
	for i := 0; i+1 < len(toks); i++ {
		if covered[i+1] && len(toks[i]) < len(toks[i+1]) && strings.HasPrefix(toks[i+1], toks[i]) {
			covered[i] = true
		}
	}
	// What a yes says covers a question word it holds ("können Sie gerne
	// machen"): only a question word the yes takes whole.
	saidYes := slices.Clone(covered)
	var verbSpans []span
	if a != nil {
		// Verbs are found sentence by sentence: a separated prefix ends
		// its clause where its sentence ends ("maak maar over. 89,90 euro
		// is juist.").
		base := 0
		for _, sen := range t.Sentences {
			objects := a.objects.find(sen.Tokens)
			for _, sp := range a.verbs.find(sen.Tokens) {
				// A verb form that is the action's noun after a
				// determiner is the noun: "cancélame esa *reserva*"
				// names no booking.
				if sp.end-sp.start == 1 && sp.start > 0 && l.determiners[sen.Tokens[sp.start-1]] &&
					slices.ContainsFunc(objects, func(o span) bool { return o.start == sp.start }) {
					continue
				}
				sp.start, sp.end = sp.start+base, sp.end+base
				verbSpans = append(verbSpans, sp)
			}
			base += len(sen.Tokens)
		}
		// A particle right after one of the action's verbs is no
		// condition ("boek het maar", "dien het bezwaar maar in").
		if !l.particles.empty() {
			for _, s := range l.particles.find(toks) {
				if !overlapsCovered(s) && l.followsVerb(toks, s.start, a, verbSpans, echo) {
					cover(s)
					j.Matches = append(j.Matches, spanMatch("particle", toks, s))
				}
			}
		}
	}
	for _, k := range []struct {
		rule string
		list func(*Locale) *phraseList
	}{
		{"hedge", func(x *Locale) *phraseList { return &x.hedges }},
		{"condition", func(x *Locale) *phraseList { return &x.conditions }},
		{"addition", func(x *Locale) *phraseList { return &x.additions }},
	} {
		for _, s := range k.list(l).find(toks) {
			if overlapsCovered(s) {
				continue
			}
			j.NotPlain = true
			j.Matches = append(j.Matches, spanMatch(k.rule, toks, s))
			if j.Detail == "" {
				j.Detail = k.rule + " \"" + strings.Join(toks[s.start:s.end], " ") + "\""
			}
		}
	}
	off := 0
	for _, sen := range t.Sentences {
		base := off
		off += len(sen.Tokens)
		if sen.Marked {
			j.NotPlain = true
			j.Matches = append(j.Matches, Match{Rule: "question", Pattern: "?", Text: sen.Raw})
			if j.Detail == "" {
				j.Detail = "asks a question: \"" + sen.Raw + "\""
			}
		} else if s, ok := l.questionWords.startsWith(sen.Tokens); ok && slices.Contains(saidYes[base+s.start:base+s.end], false) {
			j.NotPlain = true
			j.Matches = append(j.Matches, spanMatch("question", sen.Tokens, s))
			if j.Detail == "" {
				j.Detail = "asks a question: \"" + sen.Raw + "\""
			}
		}
	}

	fillers := make([]bool, len(toks))
	for _, s := range l.findMixed(func(x *Locale) *phraseList { return &x.fillers }, toks) {
		for i := s.start; i < s.end; i++ {
			fillers[i] = true
		}
	}
	for i := range toks {
		if !fillers[i] {
			j.Words++
		}
	}
	if j.Words > l.maxPlainWords {
		j.NotPlain = true
		j.Matches = append(j.Matches, Match{Rule: "length", Pattern: "max_plain_words", Text: strings.Join(toks, " ")})
		if j.Detail == "" {
			j.Detail = "too long for a plain yes"
		}
	}

	if a != nil {
		// A verb or object covers the words it takes, not what a gap in
		// it stands for: "reichen Sie ihn für meine Schwester ein" says
		// more than yes.
		for _, s := range verbSpans {
			pbuf, _ = appendPositions(pbuf[:0], s.p.elems, toks, s.start)
			for _, p := range pbuf {
				covered[p] = true
			}
			j.Verb = true
			j.Matches = append(j.Matches, spanMatch("verb", toks, s))
		}
		for _, s := range a.objects.find(toks) {
			pbuf, _ = appendPositions(pbuf[:0], s.p.elems, toks, s.start)
			for _, p := range pbuf {
				covered[p] = true
			}
		}
	}
	for _, pl := range []*phraseList{&l.fillers, &l.politeness, &l.glue, &l.requests} {
		for _, s := range pl.find(toks) {
			cover(s)
		}
	}
	if m := l.mixView; m != nil {
		for _, pl := range []*phraseList{&m.fillers, &m.politeness} {
			for _, s := range pl.find(toks) {
				cover(s)
			}
		}
	}
	var leftover []string
	for i, tok := range toks {
		if covered[i] || echo[tok] || (a != nil && a.words[tok]) {
			continue
		}
		leftover = append(leftover, tok)
	}
	if len(leftover) > 0 {
		j.NotPlain = true
		j.Matches = append(j.Matches, Match{Rule: "extra_words", Text: strings.Join(leftover, " ")})
		if j.Detail == "" {
			j.Detail = "says more than yes: \"" + strings.Join(leftover, " ") + "\""
		}
	}
	if !j.Affirmative && !j.Verb && j.Detail == "" {
		j.NotPlain = true
		j.Detail = "no yes in the answer"
	}
	return j
}

// particleReach is how many words back from a particle its verb may stand.
const particleReach = 6

// followsVerb reports whether toks[i] follows one of the action's verbs
// with nothing but glue, the action's words and words of the question
// between ("boek de afspraak maar").
func (l *Locale) followsVerb(toks []string, i int, a *Action, verbSpans []span, echo map[string]bool) bool {
	var pbuf []int
	verbAt := map[int]bool{}
	for _, s := range verbSpans {
		pbuf, _ = appendPositions(pbuf[:0], s.p.elems, toks, s.start)
		for _, p := range pbuf {
			verbAt[p] = true
		}
	}
	glueAt := map[int]bool{}
	for _, s := range l.glue.find(toks) {
		for k := s.start; k < s.end; k++ {
			glueAt[k] = true
		}
	}
	// An echoed word counts for none, so a value the caller restates
	// ("89,90 euro", several tokens) does not use up the reach; the walk
	// is bounded all the same, at twice the reach.
	for k, steps := i-1, 0; k >= 0 && k >= i-2*particleReach && steps < particleReach; k-- {
		switch {
		case verbAt[k]:
			return true
		case echo[toks[k]]:
			continue
		case glueAt[k] || a.words[toks[k]]:
			steps++
			continue
		}
		return false
	}
	return false
}

// findMixed finds a list's phrases in toks: the locale's, then those of
// the languages it mixes in (sel picks the list of a locale's own or
// mixed lists).
func (l *Locale) findMixed(sel func(*Locale) *phraseList, toks []string) []span {
	out := sel(l).find(toks)
	if m := l.mixView; m != nil {
		out = append(out, sel(m).find(toks)...)
	}
	return out
}
