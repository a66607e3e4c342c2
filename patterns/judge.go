package patterns

import (
	"sort"
	"strings"
)

// Match is one thing a rule found in a text.
type Match struct {
	Rule    string // "affirmative", "negation", "verb", ...
	Pattern string // the phrase as written in the locale or policy
	Text    string // the words it matched
}

func spanMatch(rule string, toks []string, s span) Match {
	return Match{Rule: rule, Pattern: s.p.src, Text: strings.Join(toks[s.start:s.end], " ")}
}

// separableGap is how far a separated prefix may stand from its verb.
const separableGap = 8

// forms returns the inflected forms of one folded word.
func (l *Locale) forms(w string) map[string]bool {
	out := map[string]bool{w: true}
	inf := l.inflection
	stems := []string{w}
	for _, e := range inf.Strip {
		e = Fold(e)
		if strings.HasSuffix(w, e) && len(w)-len(e) >= 3 {
			stems = append(stems, w[:len(w)-len(e)])
		}
	}
	for _, st := range stems {
		for _, suf := range inf.Suffixes {
			out[st+Fold(suf)] = true
		}
	}
	if inf.DoubleFinal && len(w) >= 3 {
		last := w[len(w)-1]
		prev := w[len(w)-2]
		if !strings.ContainsRune("aeiouwxy", rune(last)) && strings.ContainsRune("aeiou", rune(prev)) {
			for _, suf := range inf.Suffixes {
				if suf != "" && strings.ContainsRune("aeiou", rune(suf[0])) {
					out[w+string(last)+Fold(suf)] = true
				}
			}
		}
	}
	for base, irr := range inf.Irregular {
		if Fold(base) == w {
			for _, f := range irr {
				out[Fold(f)] = true
			}
		}
	}
	return out
}

// Action is what one tool does, in one language's words, compiled for
// matching. It is immutable.
type Action struct {
	verbs   phraseList
	objects phraseList
	// words holds every single-word form of the verbs and objects: they
	// may stand in a plain yes ("yes, book it").
	words map[string]bool
	// Verb and Object are the first of each, for messages.
	Verb, Object string
}

// CompileAction compiles a tool's verbs and objects. Each verb matches its
// inflected forms, the separated forms of a separable verb ("reiche ...
// ein"), and a multi-word verb with its particle moved ("send it in").
func (l *Locale) CompileAction(verbs, objects []string) *Action {
	a := &Action{words: map[string]bool{}}
	if len(verbs) > 0 {
		a.Verb = verbs[0]
	}
	if len(objects) > 0 {
		a.Object = objects[0]
	}
	for _, v := range verbs {
		for _, p := range l.compileInflected(v, a.words) {
			a.verbs.add(p)
		}
	}
	for _, o := range objects {
		for _, p := range l.compileInflected(o, a.words) {
			a.objects.add(p)
		}
	}
	return a
}

func (l *Locale) compileInflected(src string, words map[string]bool) []*phrase {
	parts := strings.Fields(Fold(src))
	if len(parts) == 0 {
		return nil
	}
	head := parts[0]
	forms := l.forms(head)
	var out []*phrase
	// Separable verbs: "einreichen" is also "reiche ... ein",
	// "eingereicht" and "einzureichen".
	for _, pre := range l.inflection.SeparablePrefixes {
		pre = Fold(pre)
		if len(parts) == 1 && strings.HasPrefix(head, pre) && len(head)-len(pre) >= 4 {
			rest := l.forms(head[len(pre):])
			for f := range rest {
				forms[pre+f] = true
				for _, in := range l.inflection.Infixes {
					forms[pre+Fold(in)+f] = true
				}
			}
			sep := &phrase{src: src, elems: []element{{forms: rest}}}
			for i := 0; i < separableGap; i++ {
				sep.elems = append(sep.elems, element{gap: true})
			}
			sep.elems = append(sep.elems, element{word: pre})
			out = append(out, collapseGaps(sep))
		}
	}
	for f := range forms {
		words[f] = true
	}
	p := &phrase{src: src, elems: []element{{forms: forms}}}
	for i, w := range parts[1:] {
		if i == 0 {
			p.elems = append(p.elems, element{gap: true}) // "send it in"
		}
		p.elems = append(p.elems, element{word: w})
		words[w] = true
	}
	return append(out, p)
}

// collapseGaps turns n consecutive gap elements into a chain the matcher
// walks: each gap element takes up to maxGap words, so a run of them takes
// up to n*maxGap. Trimmed to about separableGap words.
func collapseGaps(p *phrase) *phrase {
	var out []element
	gaps := 0
	for _, e := range p.elems {
		if e.gap {
			gaps++
			if gaps > (separableGap+maxGap-1)/maxGap {
				continue
			}
		} else {
			gaps = 0
		}
		out = append(out, e)
	}
	p.elems = out
	return p
}

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

	for _, s := range l.negationIdioms.find(toks) {
		cover(s)
		j.Affirmative = true
		j.Matches = append(j.Matches, spanMatch("negation_idiom", toks, s))
	}
	for _, s := range l.negations.find(toks) {
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
	for _, s := range l.affirmatives.find(toks) {
		cover(s)
		j.Affirmative = true
		j.Matches = append(j.Matches, spanMatch("affirmative", toks, s))
	}
	for _, k := range []struct {
		rule string
		list *phraseList
	}{{"hedge", &l.hedges}, {"condition", &l.conditions}, {"addition", &l.additions}} {
		for _, s := range k.list.find(toks) {
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
	for _, sen := range t.Sentences {
		if sen.Marked {
			j.NotPlain = true
			j.Matches = append(j.Matches, Match{Rule: "question", Pattern: "?", Text: sen.Raw})
			if j.Detail == "" {
				j.Detail = "asks a question: \"" + sen.Raw + "\""
			}
		} else if s, ok := l.questionWords.startsWith(sen.Tokens); ok {
			j.NotPlain = true
			j.Matches = append(j.Matches, spanMatch("question", sen.Tokens, s))
			if j.Detail == "" {
				j.Detail = "asks a question: \"" + sen.Raw + "\""
			}
		}
	}

	fillers := make([]bool, len(toks))
	for _, s := range l.fillers.find(toks) {
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
		for _, s := range a.verbs.find(toks) {
			cover(s)
			j.Verb = true
			j.Matches = append(j.Matches, spanMatch("verb", toks, s))
		}
		for _, s := range a.objects.find(toks) {
			cover(s)
		}
	}
	for _, pl := range []*phraseList{&l.fillers, &l.politeness, &l.glue, &l.requests} {
		for _, s := range pl.find(toks) {
			cover(s)
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

// Question is the sentence of an agent turn that asks.
type Question struct {
	// Index of the sentence in the turn's Text.
	Index    int
	Sentence Sentence
	Matches  []Match
}

// LastQuestion finds the last sentence of an agent turn that asks: one
// ending in "?", one holding a confirm request ("please confirm",
// "shall I"), or one opening like a question ("do you", "would you").
func (l *Locale) LastQuestion(t Text) (Question, bool) {
	for i := len(t.Sentences) - 1; i >= 0; i-- {
		s := t.Sentences[i]
		q := Question{Index: i, Sentence: s}
		if s.Marked {
			q.Matches = append(q.Matches, Match{Rule: "question_mark", Pattern: "?", Text: s.Raw})
		}
		if sp, ok := l.confirmRequests.first(s.Tokens); ok {
			q.Matches = append(q.Matches, spanMatch("confirm_request", s.Tokens, sp))
		}
		if sp, ok := l.questionStarts.startsWith(s.Tokens); ok {
			q.Matches = append(q.Matches, spanMatch("question_start", s.Tokens, sp))
		}
		if len(q.Matches) > 0 {
			return q, true
		}
	}
	return Question{}, false
}

// RefKind is how a sentence refers to an action.
type RefKind int

// How a sentence refers to an action.
const (
	// RefNone: it names no action at all.
	RefNone RefKind = iota
	// RefVerb: it names the action by one of its verbs.
	RefVerb
	// RefObject: a proceed or confirm phrase governs one of its objects
	// ("proceed with this submission").
	RefObject
	// RefProceed: a generic proceed phrase on its own ("shall I go
	// ahead?").
	RefProceed
	// RefBack: it only points back ("do you want me to do that?").
	RefBack
	// RefOther: it names another action.
	RefOther
)

var refNames = [...]string{"none", "verb", "object", "proceed", "back_reference", "other"}

func (k RefKind) String() string { return refNames[k] }

// Ref is the result of Refers.
type Ref struct {
	Kind    RefKind
	Matches []Match
}

// governWindow is how many words after a proceed or confirm phrase may
// hold the object it governs.
const governWindow = 6

// Refers tells how sentence s refers to action a. others (may be nil) holds
// the verbs of every other action the policy knows.
func (l *Locale) Refers(s Sentence, a, others *Action) Ref {
	toks := s.Tokens
	if sp := a.verbs.find(toks); len(sp) > 0 {
		return Ref{Kind: RefVerb, Matches: []Match{spanMatch("verb", toks, sp[0])}}
	}
	type gov struct {
		s       span
		proceed bool
	}
	var govs []gov
	for _, sp := range l.proceed.find(toks) {
		govs = append(govs, gov{sp, true})
	}
	for _, sp := range l.confirmVerbs.find(toks) {
		govs = append(govs, gov{sp, false})
	}
	sort.Slice(govs, func(i, j int) bool { return govs[i].s.start < govs[j].s.start })
	for _, g := range govs {
		region := toks[g.s.end:min(len(toks), g.s.end+governWindow)]
		if sp := a.objects.find(region); len(sp) > 0 {
			return Ref{Kind: RefObject, Matches: []Match{
				spanMatch(ruleOf(g.proceed), toks, g.s),
				spanMatch("object", region, sp[0]),
			}}
		}
	}
	if others != nil {
		if sp := others.verbs.find(toks); len(sp) > 0 {
			return Ref{Kind: RefOther, Matches: []Match{spanMatch("other_action", toks, sp[0])}}
		}
	}
	for _, g := range govs {
		rest := l.contentWords(toks[g.s.end:])
		if len(rest) == 0 {
			if g.proceed {
				return Ref{Kind: RefProceed, Matches: []Match{spanMatch("proceed", toks, g.s)}}
			}
			return Ref{Kind: RefBack, Matches: []Match{spanMatch("confirm", toks, g.s)}}
		}
		return Ref{Kind: RefOther, Matches: []Match{
			spanMatch(ruleOf(g.proceed), toks, g.s),
			{Rule: "other_object", Text: strings.Join(rest, " ")},
		}}
	}
	if sp, ok := l.backReferences.first(toks); ok {
		return Ref{Kind: RefBack, Matches: []Match{spanMatch("back_reference", toks, sp)}}
	}
	return Ref{Kind: RefNone}
}

func ruleOf(proceed bool) string {
	if proceed {
		return "proceed"
	}
	return "confirm"
}

// contentWords returns toks less glue, politeness, fillers and back
// references: what is left names something.
func (l *Locale) contentWords(toks []string) []string {
	covered := make([]bool, len(toks))
	for _, pl := range []*phraseList{&l.glue, &l.politeness, &l.fillers, &l.backReferences} {
		for _, s := range pl.find(toks) {
			for i := s.start; i < s.end; i++ {
				covered[i] = true
			}
		}
	}
	var out []string
	for i, t := range toks {
		if !covered[i] {
			out = append(out, t)
		}
	}
	return out
}

// NamesObject reports whether any sentence of t names one of a's objects.
func (l *Locale) NamesObject(t Text, a *Action) bool {
	for _, s := range t.Sentences {
		if len(a.objects.find(s.Tokens)) > 0 {
			return true
		}
	}
	return false
}

// StatesQuantity reports whether t states a quantity: a number, a number
// word or a quantity word ("two more", "another one").
func (l *Locale) StatesQuantity(t Text) bool {
	for _, s := range t.Sentences {
		if len(l.quantityWords.find(s.Tokens)) > 0 {
			return true
		}
		for _, tok := range s.Tokens {
			if _, ok := l.ParseNumber(tok); ok {
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
		for i := 0; i+len(want) <= len(s.Tokens); i++ {
			ok := true
			for k, w := range want {
				if s.Tokens[i+k] != w {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
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

// MergeActions compiles one action from the verbs of many, for telling
// that a sentence names some other action.
func (l *Locale) MergeActions(verbs []string) *Action {
	return l.CompileAction(verbs, nil)
}
