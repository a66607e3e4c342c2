package patterns

import (
	"slices"
	"strings"
)

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

// role is what explains one word of the sentence a yes answers.
type role uint8

const (
	// unexplained: no rule explains the word; the question is not plain.
	unexplained role = iota
	roleFrame        // asks the caller's leave ("shall I", "do you want me to")
	roleTag          // a confirming tag after the proposal ("okay?", "is that right")
	roleVerb         // this action's verb
	roleObject       // this action's object, or a noun its verb makes
	roleProceed      // a generic proceed phrase ("go ahead", "proceed with")
	roleConfirm      // a confirm verb governing an object ("confirm the booking")
	roleBack         // points back ("do that", "sound good")
	roleValue        // a value that is one of the call's arguments
	roleArg          // the words of one of the call's string arguments
	roleName         // a name after a title ("Dr. Patel")
	rolePlain        // a harmless word ("now", "your", "please")
)

// reading is how a sentence reads as a proposal: what explains each of its
// words.
type reading struct {
	s     Sentence
	roles []role
	// firstVerb and lastVerb are the first and last tokens of this
	// action's verbs (-1 when it names none).
	firstVerb, lastVerb int
	// sharedOnly: every verb of this action it holds is one another tool
	// lists too.
	sharedOnly bool
	// strays are values that are none of the call's arguments.
	strays []valueHit
	values []valueHit
}

// read reads sentence s as a proposal of tool's action, with the call's
// arguments. Every word gets the first role that explains it, in this
// order: the action's verbs, its objects, the call's values, the words of
// its string arguments, then the locale's frames, tags, proceed and
// confirm phrases, back references and plain words, and names after
// titles. What is left is unexplained.
func (l *Locale) read(s Sentence, tool Tool, args []Argument) reading {
	toks := s.Tokens
	r := reading{s: s, roles: make([]role, len(toks)), firstVerb: -1, lastVerb: -1}
	mark := func(k int, ro role) {
		if r.roles[k] == unexplained {
			r.roles[k] = ro
		}
	}
	a := tool.Action
	mine, _ := ownVerbs(a.verbs.find(toks), tool.Others, toks)
	r.sharedOnly = len(mine) > 0
	for _, sp := range mine {
		if !a.sharedVerbs[sp.p.src] {
			r.sharedOnly = false
		}
		for _, p := range positions(sp.p.elems, toks, sp.start) {
			mark(p, roleVerb)
			if r.firstVerb < 0 || p < r.firstVerb {
				r.firstVerb = p
			}
			r.lastVerb = max(r.lastVerb, p)
		}
	}
	for _, sp := range a.objects.find(toks) {
		for _, p := range positions(sp.p.elems, toks, sp.start) {
			mark(p, roleObject)
		}
	}
	// A value wholly inside a plain phrase is a word of it ("that one").
	plain := l.plainWords.find(toks)
	for _, h := range l.readValues(s, args) {
		inPlain := false
		for _, sp := range plain {
			if sp.start <= h.start && h.end <= sp.end {
				inPlain = true
			}
		}
		if inPlain {
			continue
		}
		if len(h.args) == 0 {
			r.strays = append(r.strays, h)
			continue
		}
		r.values = append(r.values, h)
		for k := h.start; k < h.end; k++ {
			mark(k, roleValue)
		}
	}
	for _, arg := range args {
		sv, ok := arg.Value.(string)
		if !ok {
			continue
		}
		want := l.Parse(sv).Tokens()
		if len(want) == 0 {
			continue
		}
		for i := 0; i+len(want) <= len(toks); i++ {
			if indexWords(toks[i:i+len(want)], want) == 0 {
				for k := i; k < i+len(want); k++ {
					mark(k, roleArg)
				}
			}
		}
	}
	for _, k := range []struct {
		pl *phraseList
		ro role
	}{{&l.frames, roleFrame}, {&l.tags, roleTag}, {&l.proceed, roleProceed}, {&l.confirmVerbs, roleConfirm}, {&l.backReferences, roleBack}} {
		for _, sp := range k.pl.find(toks) {
			for p := sp.start; p < sp.end; p++ {
				mark(p, k.ro)
			}
		}
	}
	for _, sp := range plain {
		for p := sp.start; p < sp.end; p++ {
			mark(p, rolePlain)
		}
	}
	for _, sp := range l.titles.find(toks) {
		if sp.end < len(toks) && r.roles[sp.end] == unexplained {
			for p := sp.start; p < sp.end; p++ {
				mark(p, roleName)
			}
			r.roles[sp.end] = roleName
		}
	}
	// A stray value's words stay unexplained even where a plain word
	// would cover them.
	for _, h := range r.strays {
		for k := h.start; k < h.end; k++ {
			r.roles[k] = unexplained
		}
	}
	return r
}

// unexplainedWords returns the runs of words no rule explains, each run
// joined, leaving out the words of stray values (reported apart).
func (r *reading) unexplainedWords() []string {
	stray := make([]bool, len(r.roles))
	for _, h := range r.strays {
		for k := h.start; k < h.end; k++ {
			stray[k] = true
		}
	}
	var out []string
	var run []string
	flush := func() {
		if len(run) > 0 {
			out = append(out, strings.Join(run, " "))
			run = run[:0]
		}
	}
	for k, ro := range r.roles {
		if ro == unexplained && !stray[k] {
			run = append(run, r.s.Tokens[k])
			continue
		}
		flush()
	}
	flush()
	return out
}

// has reports whether some word of r has role ro.
func (r *reading) has(ro role) bool { return slices.Contains(r.roles, ro) }

// asksLeave reports whether the action's verb stands as what the agent
// asks leave to do: a frame before it ("shall I submit") or a tag after
// it ("I'll submit it now, okay?").
func (r *reading) asksLeave() bool {
	if r.firstVerb < 0 {
		return true
	}
	for k, ro := range r.roles {
		if (ro == roleFrame && k < r.firstVerb) || (ro == roleTag && k > r.lastVerb) {
			return true
		}
	}
	return false
}
