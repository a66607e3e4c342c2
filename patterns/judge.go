package patterns

import (
	"maps"
	"slices"
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

// forms returns the inflected forms of one folded word; a verb's forms
// also take the locale's prefixes (participles: "gebucht").
func (l *Locale) forms(w string, verb bool) map[string]bool {
	return l.exclude(l.inflect(w, l.inflection.Suffixes, verb, true), w)
}

// exclude drops the locale's excluded forms from out, never the word w
// itself.
func (l *Locale) exclude(out map[string]bool, w string) map[string]bool {
	for _, x := range l.inflection.Exclude {
		if x = Fold(strings.TrimSpace(x)); x != w {
			delete(out, x)
		}
	}
	return out
}

// nounForms returns the nouns a verb makes with the locale's
// noun_suffixes ("buchen" → "Buchung", "Buchungen").
func (l *Locale) nounForms(w string) map[string]bool {
	if len(l.inflection.NounSuffixes) == 0 {
		return nil
	}
	return l.exclude(l.inflect(w, l.inflection.NounSuffixes, false, false), w)
}

func (l *Locale) inflect(w string, suffixes []string, verb, self bool) map[string]bool {
	out := map[string]bool{}
	if self {
		out[w] = true
	}
	inf := l.inflection
	stems := []string{w}
	for _, e := range inf.Strip {
		e = Fold(e)
		if strings.HasSuffix(w, e) && len(w)-len(e) >= 3 {
			stems = append(stems, w[:len(w)-len(e)])
		}
	}
	stems = l.stemVariants(stems)
	for _, st := range stems {
		for _, suf := range suffixes {
			out[st+Fold(suf)] = true
		}
	}
	if inf.DoubleFinal && len(w) >= 3 {
		last := w[len(w)-1]
		prev := w[len(w)-2]
		if !strings.ContainsRune("aeiouwxy", rune(last)) && strings.ContainsRune("aeiou", rune(prev)) {
			for _, suf := range suffixes {
				if suf != "" && strings.ContainsRune("aeiou", rune(suf[0])) {
					out[w+string(last)+Fold(suf)] = true
				}
			}
		}
	}
	for base, irr := range inf.Irregular {
		if self && Fold(base) == w {
			for _, f := range irr {
				out[Fold(f)] = true
			}
		}
	}
	if verb && len(inf.Prefixes) > 0 {
		for f := range maps.Clone(out) {
			for _, p := range inf.Prefixes {
				out[Fold(p)+f] = true
			}
		}
	}
	return out
}

// stemVariants adds to stems the variants stem_endings and double_vowel
// give ("betal" → "betaal", "zegg" → "zeg").
func (l *Locale) stemVariants(stems []string) []string {
	inf := l.inflection
	if len(inf.StemEndings) == 0 && !inf.DoubleVowel {
		return stems
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if len(s) >= 2 && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, st := range stems {
		add(st)
		for _, end := range slices.Sorted(maps.Keys(inf.StemEndings)) {
			if fe := Fold(end); strings.HasSuffix(st, fe) && len(st) > len(fe) {
				add(st[:len(st)-len(fe)] + Fold(inf.StemEndings[end]))
			}
		}
	}
	if inf.DoubleVowel {
		for _, st := range slices.Clone(out) {
			if v, ok := doubleVowel(st); ok {
				add(v)
			}
		}
	}
	return out
}

func isVowel(b byte) bool { return strings.IndexByte("aeiou", b) >= 0 }

// doubleVowel doubles the vowel of a stem ending consonant-vowel-consonant
// ("betal" → "betaal") and makes single the doubled vowel of one ending
// in a doubled vowel and a consonant ("afspraak" → "afsprak").
func doubleVowel(st string) (string, bool) {
	n := len(st)
	if n < 3 || isVowel(st[n-1]) {
		return "", false
	}
	v := st[n-2]
	if !isVowel(v) {
		return "", false
	}
	if st[n-3] == v && (n < 4 || !isVowel(st[n-4])) {
		return st[:n-2] + st[n-1:], true // afspraak → afsprak
	}
	if !isVowel(st[n-3]) {
		return st[:n-1] + string(v) + st[n-1:], true // betal → betaal
	}
	return "", false
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
	// shared, on an action built by MergeActions, holds the other
	// actions' objects: an object of this action that stands there too
	// ("appointment" for booking and cancelling) names neither.
	shared phraseList
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
		for _, p := range l.compileInflected(v, a.words, true) {
			a.verbs.add(p)
		}
		// The nouns a verb makes name what it acts on: "die Buchung
		// stornieren" is about cancelling, not booking.
		if nouns := l.verbNouns(v); len(nouns) > 0 {
			for f := range nouns {
				a.words[f] = true
			}
			a.objects.add(&phrase{src: v, elems: []element{{forms: nouns}}})
		}
	}
	for _, o := range objects {
		for _, p := range l.compileInflected(o, a.words, false) {
			a.objects.add(p)
		}
	}
	return a
}

func (l *Locale) compileInflected(src string, words map[string]bool, verb bool) []*phrase {
	// Policy words split as text does: "rendez-vous" is "rendez" "vous".
	var parts []string
	for _, w := range strings.Fields(l.fold(src)) {
		parts = append(parts, l.splitWord(w)...)
	}
	if len(parts) == 0 {
		return nil
	}
	head := parts[0]
	forms := l.forms(head, verb)
	var out []*phrase
	// Separable verbs: "einreichen" is also "reiche ... ein",
	// "eingereicht" and "einzureichen"; nl "indienen" is also "in te
	// dienen".
	for _, pre := range l.inflection.SeparablePrefixes {
		pre = Fold(pre)
		if !verb || len(parts) != 1 || !strings.HasPrefix(head, pre) || len(head)-len(pre) < 4 {
			continue
		}
		rest := l.forms(head[len(pre):], true)
		for f := range rest {
			forms[pre+f] = true
		}
		for _, in := range l.inflection.Infixes {
			if fi := Fold(in); strings.TrimSpace(fi) != fi && strings.TrimSpace(fi) != "" {
				w := strings.TrimSpace(fi)
				// A word of its own: "in te dienen".
				sep := &phrase{src: src, elems: []element{{word: pre}}}
				for _, iw := range strings.Fields(w) {
					sep.elems = append(sep.elems, element{word: iw})
				}
				sep.elems = append(sep.elems, element{forms: rest})
				out = append(out, sep)
				continue
			}
			for f := range rest {
				forms[pre+Fold(in)+f] = true
			}
		}
		sep := &phrase{src: src, elems: []element{{forms: rest}}}
		for i := 0; i < separableGap; i++ {
			sep.elems = append(sep.elems, element{gap: true})
		}
		sep.elems = append(sep.elems, element{word: pre, ends: l.endsClause})
		out = append(out, collapseGaps(sep))
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

// verbNouns returns the nouns of a one-word verb, a separable one's
// included ("einreichen" → "Einreichung").
func (l *Locale) verbNouns(src string) map[string]bool {
	parts := strings.Fields(Fold(src))
	if len(parts) != 1 || len(l.inflection.NounSuffixes) == 0 {
		return nil
	}
	head := parts[0]
	out := l.nounForms(head)
	for _, pre := range l.inflection.SeparablePrefixes {
		pre = Fold(pre)
		if strings.HasPrefix(head, pre) && len(head)-len(pre) >= 4 {
			for f := range l.nounForms(head[len(pre):]) {
				out[pre+f] = true
			}
		}
	}
	return out
}

// endsClause reports whether toks[i], a separated verb prefix, ends its
// clause: nothing follows it in the sentence but glue, politeness,
// fillers or a yes ("reichen Sie ihn ein, das wäre super"), or a
// conjunction opens the next clause ("reiche ihn ein, sobald Sie
// zustimmen"). A prefix followed by other words is a preposition ("sage
// Ihnen ab Montag", "reicht ein Termin").
func (l *Locale) endsClause(toks []string, i int) bool {
	rest := toks[i+1:]
	if len(rest) == 0 {
		return true
	}
	if _, ok := l.conjunctions.startsWith(rest); ok {
		return true
	}
	covered := make([]bool, len(rest))
	for _, pl := range []*phraseList{&l.glue, &l.politeness, &l.fillers, &l.affirmatives} {
		for _, s := range pl.find(rest) {
			for k := s.start; k < s.end; k++ {
				covered[k] = true
			}
		}
	}
	return !slices.Contains(covered, false)
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
	// What a yes says covers a question word it holds ("können Sie gerne
	// machen"): only a question word the yes takes whole.
	saidYes := slices.Clone(covered)
	var verbSpans []span
	if a != nil {
		verbSpans = a.verbs.find(toks)
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
		// A verb or object covers the words it takes, not what a gap in
		// it stands for: "reichen Sie ihn für meine Schwester ein" says
		// more than yes.
		for _, s := range verbSpans {
			for _, p := range positions(s.p.elems, toks, s.start) {
				covered[p] = true
			}
			j.Verb = true
			j.Matches = append(j.Matches, spanMatch("verb", toks, s))
		}
		for _, s := range a.objects.find(toks) {
			for _, p := range positions(s.p.elems, toks, s.start) {
				covered[p] = true
			}
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

// particleReach is how many words back from a particle its verb may stand.
const particleReach = 6

// followsVerb reports whether toks[i] follows one of the action's verbs
// with nothing but glue, the action's words and words of the question
// between ("boek de afspraak maar").
func (l *Locale) followsVerb(toks []string, i int, a *Action, verbSpans []span, echo map[string]bool) bool {
	verbAt := map[int]bool{}
	for _, s := range verbSpans {
		for _, p := range positions(s.p.elems, toks, s.start) {
			verbAt[p] = true
		}
	}
	glueAt := map[int]bool{}
	for _, s := range l.glue.find(toks) {
		for k := s.start; k < s.end; k++ {
			glueAt[k] = true
		}
	}
	for k := i - 1; k >= 0 && k >= i-particleReach; k-- {
		switch {
		case verbAt[k]:
			return true
		case glueAt[k] || a.words[toks[k]] || echo[toks[k]]:
			continue
		}
		return false
	}
	return false
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
// When that sentence is an open question (it holds one of the locale's
// open_questions: "when", "which", "or would you rather"), the turn asks
// nothing a yes answers: LastQuestion returns it with false.
func (l *Locale) LastQuestion(t Text) (Question, bool) {
	for i := len(t.Sentences) - 1; i >= 0; i-- {
		s := t.Sentences[i]
		q := Question{Index: i, Sentence: s}
		if s.Marked {
			q.Matches = append(q.Matches, Match{Rule: "question_mark", Pattern: "?", Text: s.Raw})
		}
		requests := l.confirmRequests.find(s.Tokens)
		if len(requests) > 0 {
			q.Matches = append(q.Matches, spanMatch("confirm_request", s.Tokens, requests[0]))
		}
		if sp, ok := l.questionStarts.startsWith(s.Tokens); ok {
			q.Matches = append(q.Matches, spanMatch("question_start", s.Tokens, sp))
		}
		if len(q.Matches) > 0 {
			// "Wann soll ich den Termin buchen?", "Dienstag oder lieber
			// Mittwoch?": a yes answers no such question.
			if m, ok := l.openQuestion(s.Tokens, requests); ok {
				q.Matches = append(q.Matches, m)
				return q, false
			}
			return q, true
		}
	}
	return Question{}, false
}

// openQuestion finds what makes toks a question a yes does not answer: an
// open_questions phrase not wholly inside the confirm request that asks
// ("lassen Sie mich wissen, ob ..." asks for a yes), or an alternatives word
// followed by more than a negation ("Dienstag oder Mittwoch", not "...,
// oder?" or "oder nicht").
//
// requests are the confirm requests in toks (confirmRequests.find).
func (l *Locale) openQuestion(toks []string, requests []span) (Match, bool) {
	asks := make([]bool, len(toks))
	for _, s := range requests {
		for k := s.start; k < s.end; k++ {
			asks[k] = true
		}
	}
	// A phrase wholly inside the confirm request belongs to it.
	inside := func(s span) bool { return !slices.Contains(asks[s.start:s.end], false) }
	for _, s := range l.openQuestions.find(toks) {
		if !inside(s) {
			return spanMatch("open_question", toks, s), true
		}
	}
	for _, s := range l.alternatives.find(toks) {
		if inside(s) {
			continue // "kunt u bevestigen of ..." asks whether
		}
		rest := toks[s.end:]
		if len(rest) == 0 {
			continue // a tag: "das passt so, oder?"
		}
		if n, ok := l.negations.startsWith(rest); ok && n.end == len(rest) {
			continue // "oder nicht?"
		}
		return spanMatch("alternative", toks, s), true
	}
	return Match{}, false
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
	// RefShared: a proceed or confirm phrase governs one of its objects
	// that another action acts on too ("confirm the appointment" with
	// booking and cancelling): only the rest of the turn can tell which.
	RefShared
)

var refNames = [...]string{"none", "verb", "object", "proceed", "back_reference", "other", "shared_object"}

func (k RefKind) String() string { return refNames[k] }

// Ref is the result of Refers.
type Ref struct {
	Kind    RefKind
	Matches []Match
}

// gov is a proceed or confirm phrase found in a sentence.
type gov struct {
	s       span
	proceed bool
}

// governWindow is how many words after a proceed or confirm phrase may
// hold the object it governs.
const governWindow = 6

// Refers tells how sentence s refers to action a. others (may be nil) holds
// the verbs of every other action the policy knows.
func (l *Locale) Refers(s Sentence, a, others *Action) Ref {
	// A side clause is not what is asked: "Möchten Sie noch etwas ändern,
	// bevor ich den Widerspruch einreiche?", "Before I submit it, would
	// you like me to read it back to you?".
	toks := l.mainClause(s)
	if sp, ok := ownVerb(a.verbs.find(toks), others, toks); ok {
		return Ref{Kind: RefVerb, Matches: []Match{spanMatch("verb", toks, sp)}}
	}
	var govs []gov
	for _, sp := range l.proceed.find(toks) {
		govs = append(govs, gov{sp, true})
	}
	for _, sp := range l.confirmVerbs.find(toks) {
		govs = append(govs, gov{sp, false})
	}
	sort.Slice(govs, func(i, j int) bool { return govs[i].s.start < govs[j].s.start })
	var shared *Ref
	for _, g := range govs {
		region := toks[g.s.end:min(len(toks), g.s.end+governWindow)]
		if sp := a.objects.find(region); len(sp) > 0 {
			// "proceed with the cancellation of your appointment": the
			// phrase governs the other action's noun, not our object.
			if r, ok := l.otherBetween(others, region[:sp[0].start], toks, g); ok {
				return r
			}
			ref := Ref{Kind: RefObject, Matches: []Match{
				spanMatch(ruleOf(g.proceed), toks, g.s),
				spanMatch("object", region, sp[0]),
			}}
			if others != nil && others.sharesObject(region, sp[0]) {
				if shared == nil {
					ref.Kind = RefShared
					shared = &ref
				}
				continue
			}
			return ref
		}
		if l.governBefore {
			region := l.beforeRegion(toks, g.s.start)
			if sp, ok := l.governedBefore(region, a); ok {
				ref := Ref{Kind: RefObject, Matches: []Match{
					spanMatch(ruleOf(g.proceed), toks, g.s),
					spanMatch("object", region, sp),
				}}
				if others != nil && others.sharesObject(region, sp) {
					if shared == nil {
						ref.Kind = RefShared
						shared = &ref
					}
					continue
				}
				return ref
			}
		}
	}
	if shared != nil {
		if others != nil {
			if sp := others.verbs.find(toks); len(sp) > 0 {
				return Ref{Kind: RefOther, Matches: []Match{spanMatch("other_action", toks, sp[0])}}
			}
		}
		return *shared
	}
	if others != nil {
		if sp := others.verbs.find(toks); len(sp) > 0 {
			return Ref{Kind: RefOther, Matches: []Match{spanMatch("other_action", toks, sp[0])}}
		}
	}
	if len(govs) > 0 {
		// Words that ask or govern name nothing: "Okay, möchten Sie
		// fortfahren?" holds no object.
		asks := make([]bool, len(toks))
		mark := func(s span) {
			for k := s.start; k < s.end; k++ {
				asks[k] = true
			}
		}
		for _, s := range l.confirmRequests.find(toks) {
			mark(s)
		}
		if s, ok := l.questionStarts.startsWith(toks); ok {
			mark(s)
		}
		for _, g := range govs {
			mark(g.s)
		}
		// Only a sentence that asks governs what stands before its
		// proceed or confirm phrase; elsewhere that is a clause of its
		// own ("Ich reiche ihn ein, sobald Sie zustimmen").
		asking := s.Marked || slices.Contains(asks, true)
		var first *gov
		for i, g := range govs {
			rest := l.contentWords(unasked(toks, asks, g.s.end, len(toks)))
			if l.governBefore && asking {
				// "Möchten Sie mit der Erstattung fortfahren?"
				lo := g.s.start - len(l.beforeRegion(toks, g.s.start))
				rest = append(l.contentWords(unasked(toks, asks, lo, g.s.start)), rest...)
			}
			if len(rest) > 0 {
				return Ref{Kind: RefOther, Matches: []Match{
					spanMatch(ruleOf(g.proceed), toks, g.s),
					{Rule: "other_object", Text: strings.Join(rest, " ")},
				}}
			}
			if first == nil || (g.proceed && !first.proceed) {
				first = &govs[i]
			}
		}
		if first.proceed {
			return Ref{Kind: RefProceed, Matches: []Match{spanMatch("proceed", toks, first.s)}}
		}
		return Ref{Kind: RefBack, Matches: []Match{spanMatch("confirm", toks, first.s)}}
	}
	if sp, ok := l.backReferences.first(toks); ok {
		return Ref{Kind: RefBack, Matches: []Match{spanMatch("back_reference", toks, sp)}}
	}
	// A question that is nothing but its asking words points back:
	// "Soll ich?", "Shall I?".
	asks := make([]bool, len(toks))
	var asking []span
	if sp, ok := l.questionStarts.startsWith(toks); ok {
		asking = append(asking, sp)
	}
	asking = append(asking, l.confirmRequests.find(toks)...)
	for _, sp := range asking {
		for k := sp.start; k < sp.end; k++ {
			asks[k] = true
		}
	}
	if len(asking) > 0 && len(l.contentWords(unasked(toks, asks, 0, len(toks)))) == 0 {
		return Ref{Kind: RefBack, Matches: []Match{spanMatch("back_reference", toks, asking[0])}}
	}
	return Ref{Kind: RefNone}
}

// ownVerb returns the first of this action's verb matches that no longer
// match of another action's verb swallows: "mande una copia" is sending
// a copy, though "mandar" alone would submit.
func ownVerb(mine []span, others *Action, toks []string) (span, bool) {
	var theirs []span
	if others != nil && len(mine) > 0 {
		theirs = others.verbs.find(toks)
	}
next:
	for _, m := range mine {
		for _, o := range theirs {
			if o.start <= m.start && o.end >= m.end && o.end-o.start > m.end-m.start {
				continue next
			}
		}
		return m, true
	}
	return span{}, false
}

// otherBetween reports another action's verb or verb noun standing
// between a proceed or confirm phrase and the object it seems to govern.
func (l *Locale) otherBetween(others *Action, between, toks []string, g gov) (Ref, bool) {
	if others == nil || len(between) == 0 {
		return Ref{}, false
	}
	for _, pl := range []*phraseList{&others.verbs, &others.objects} {
		if sp := pl.find(between); len(sp) > 0 {
			return Ref{Kind: RefOther, Matches: []Match{
				spanMatch(ruleOf(g.proceed), toks, g.s),
				spanMatch("other_action", between, sp[0]),
			}}, true
		}
	}
	return Ref{}, false
}

// sharesObject reports whether the object matched at s in toks is also
// one of the other actions' objects.
func (a *Action) sharesObject(toks []string, s span) bool {
	for _, o := range a.shared.find(toks) {
		if o.start < s.end && s.start < o.end {
			return true
		}
	}
	return false
}

// governBeforeWindow is how many words before a proceed or confirm phrase
// may hold the object it governs, with govern_before.
const governBeforeWindow = 10

// beforeRegion returns the words before toks[end] that a proceed or
// confirm phrase there may govern: at most governBeforeWindow of them,
// after the confirm request or question opening that asks ("Möchten Sie
// | mit dem Widerspruch | fortfahren").
func (l *Locale) beforeRegion(toks []string, end int) []string {
	lo := max(0, end-governBeforeWindow)
	spans := l.confirmRequests.find(toks[:end])
	if s, ok := l.questionStarts.startsWith(toks[:end]); ok {
		spans = append(spans, s)
	}
	for _, s := range spans {
		if s.end <= end && s.end > lo {
			lo = s.end
		}
	}
	return toks[lo:end]
}

// governedBefore finds an object governed from after it: region holds
// one of a's objects and, besides it, only glue, politeness, fillers,
// numbers, and the words a preposition or a number opens ("die Zahlung
// von 120,50 Euro", "den Termin am Dienstag um 10 Uhr"). A region with
// another verb or clause in it ("den Widerspruch jetzt prüfen und dann")
// governs nothing.
func (l *Locale) governedBefore(region []string, a *Action) (span, bool) {
	objs := a.objects.find(region)
	if len(objs) == 0 {
		return span{}, false
	}
	const (
		other = iota
		small // glue, politeness, fillers
		number
		prep
		object
	)
	kind := make([]int, len(region))
	for _, k := range []struct {
		pl   *phraseList
		kind int
	}{{&l.glue, small}, {&l.politeness, small}, {&l.fillers, small}, {&l.prepositions, prep}} {
		for _, s := range k.pl.find(region) {
			for i := s.start; i < s.end; i++ {
				kind[i] = k.kind
			}
		}
	}
	for i, tok := range region {
		if _, ok := l.ParseNumber(tok); ok {
			kind[i] = number
		}
	}
	for _, s := range objs {
		for _, p := range positions(s.p.elems, region, s.start) {
			kind[p] = object
		}
	}
	for i := range region {
		if kind[i] != other {
			continue
		}
		// A word a preposition opens, with a glue word between at most
		// ("am Dienstag", "für den Dienstag"), or one after a number
		// ("10 Uhr", "120,50 Euro").
		switch {
		case i > 0 && (kind[i-1] == prep || kind[i-1] == number):
			continue
		case i > 1 && kind[i-1] == small && kind[i-2] == prep:
			continue
		}
		return span{}, false
	}
	return objs[0], true
}

// mainClause returns the sentence's tokens less its side clauses: from a
// side_clauses word ("before", "bevor") to the next comma, colon or dash
// of the sentence, or to its end when none follows.
func (l *Locale) mainClause(s Sentence) []string {
	spans := l.sideClauses.find(s.Tokens)
	if len(spans) == 0 {
		return s.Tokens
	}
	drop := make([]bool, len(s.Tokens))
	for _, sp := range spans {
		end := len(s.Tokens)
		for _, b := range s.Breaks {
			if b > sp.start {
				end = b
				break
			}
		}
		for k := sp.start; k < end; k++ {
			drop[k] = true
		}
	}
	out := make([]string, 0, len(s.Tokens))
	for k, t := range s.Tokens {
		if !drop[k] {
			out = append(out, t)
		}
	}
	return out
}

func ruleOf(proceed bool) string {
	if proceed {
		return "proceed"
	}
	return "confirm"
}

// unasked returns toks[lo:hi] less the words asks marks.
func unasked(toks []string, asks []bool, lo, hi int) []string {
	var out []string
	for k := lo; k < hi; k++ {
		if !asks[k] {
			out = append(out, toks[k])
		}
	}
	return out
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
// A sentence that holds an open question ("ich sage Ihnen, ab wann wieder
// Termine frei sind") speaks about the object, not of doing the action,
// and does not count; nor does an object in a side clause ("bevor ich den
// Widerspruch einreiche, ...").
func (l *Locale) NamesObject(t Text, a *Action) bool {
	for _, s := range t.Sentences {
		if len(a.objects.find(l.mainClause(s))) > 0 {
			if _, open := l.openQuestion(s.Tokens, l.confirmRequests.find(s.Tokens)); !open {
				return true
			}
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

// MergeActions compiles what every other action of the policy says: their
// verbs (and the nouns the verbs make, "cancellation"), and their objects,
// so that a question naming one of them is known to be about another
// action, and an object they share with this one names neither.
func (l *Locale) MergeActions(verbs, objects []string) *Action {
	a := l.CompileAction(verbs, nil)
	for _, o := range objects {
		for _, p := range l.compileInflected(o, a.words, false) {
			a.shared.add(p)
		}
	}
	return a
}

// Words returns every single-word form of the action's verbs and objects
// (for an action built by MergeActions, of all the other actions' verbs
// and objects). The map must not be changed.
func (a *Action) Words() map[string]bool { return a.words }
