package patterns

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

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
	own, _ := ownVerbs(mine, others, toks)
	if len(own) == 0 {
		return span{}, false
	}
	return own[0], true
}

// ownVerbs returns this action's verb matches that no longer match of
// another action's verb swallows, and the other action's verb matches.
func ownVerbs(mine []span, others *Action, toks []string) ([]span, []span) {
	var theirs []span
	if others != nil && len(mine) > 0 {
		theirs = others.verbs.find(toks)
	}
	out := mine[:0:0]
next:
	for _, m := range mine {
		for _, o := range theirs {
			if o.start <= m.start && o.end >= m.end && o.end-o.start > m.end-m.start {
				continue next
			}
		}
		out = append(out, m)
	}
	return out, theirs
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

// proposed is what rule 5 found the question proposes.
type proposed struct {
	// outcome is 0 when the question is a plain question about this
	// action; else why not.
	outcome     Outcome
	detail      string
	matches     []Match
	unexplained []string
	// stated are the question and the sentence it points back to: what
	// the proposal says (turnValues reads the rest of the turn).
	stated []Sentence
}

func (p proposed) fail(o Outcome, detail string) proposed {
	p.outcome, p.detail = o, detail
	return p
}

// proposal applies rule 5 to the question q of the agent's turn t: it is
// about this action (its verb, an object a proceed or confirm phrase
// governs, or a generic proceed phrase or back reference whose turn names
// the action), and it is plain. Plain means every word of the question,
// and of the sentence it points back to, is explained (see read): a frame
// asking leave, the action's verb with the agent as the one who acts, its
// objects with their determiners, the call's values, and the locale's
// harmless words. Another verb, a negation, an alternative, a time or
// purpose clause or another number is unexplained, and refuses.
func (l *Locale) proposal(t Text, q Question, tool Tool, args *callArgs, bind []string) proposed {
	var p proposed
	ref := l.Refers(q.Sentence, tool.Action, tool.Others)
	p.matches = ref.Matches
	quoted := func() string { return strconv.Quote(q.Sentence.Raw) }
	switch ref.Kind {
	case RefOther:
		return p.fail(ActionMismatch, "the question "+quoted()+" is about something else")
	case RefNone:
		return p.fail(ActionMismatch, "the question "+quoted()+" does not name this action")
	}
	qr := l.read(q.Sentence, tool, args, false)
	if fail, bad := l.notPlain(&qr, true); bad {
		p.unexplained = fail.unexplained
		return p.fail(fail.outcome, fail.detail)
	}
	p.stated = append(p.stated, q.Sentence)

	switch ref.Kind {
	case RefVerb, RefObject:
		if qr.sharedOnly && !qr.namesTarget() {
			// "Shall I cancel it?" with two tools that cancel: the turn
			// must name this one's object.
			if !l.turnNamesObject(t, q.Index, tool) && !l.turnStatesCall(t, q.Index, tool, args, bind) {
				return p.fail(ActionMismatch, "the question "+quoted()+" names a verb another action shares, and the turn never names what this action acts on")
			}
		}
	default:
		// A generic proceed phrase, a back reference or a shared object:
		// what the question proposes is the sentence it points back to.
		i, pr := l.pointedTo(t, q.Index, tool)
		switch {
		case pr == RefOther:
			return p.fail(ActionMismatch, "the turn around the question is about another action")
		case i < 0 && ref.Kind == RefShared:
			return p.fail(ActionMismatch, "the question "+quoted()+" names something another action also acts on, and the turn never says which action")
		case i < 0 && ref.Kind == RefBack:
			return p.fail(ActionMismatch, "the question "+quoted()+" points back to nothing that names this action")
		case i >= 0 && pr != RefVerb && pr != RefObject && ref.Kind != RefProceed:
			return p.fail(ActionMismatch, "the question "+quoted()+" points back to "+strconv.Quote(t.Sentences[i].Raw)+", which does not name this action")
		}
		if i >= 0 {
			s := t.Sentences[i]
			pr := l.read(s, tool, args, true)
			if fail, bad := l.notPlain(&pr, false); bad {
				p.unexplained = fail.unexplained
				return p.fail(fail.outcome, "the question "+quoted()+" points back to "+strconv.Quote(s.Raw)+": "+fail.detail)
			}
			if pr.sharedOnly && !pr.namesTarget() && !qr.namesTarget() && !l.turnStatesCall(t, q.Index, tool, args, bind) {
				return p.fail(ActionMismatch, "the turn names a verb another action shares, and never what this action acts on")
			}
			p.stated = append(p.stated, s)
		}
	}
	// A sentence before the question that names this action may make it
	// another one, which the question then asks about ("I can put you on
	// the waiting list for three. Shall I?"): an action changer there
	// refuses.
	for i := 0; i < q.Index; i++ {
		s := t.Sentences[i]
		if l.recap(s) {
			continue
		}
		if k := l.Refers(s, tool.Action, tool.Others).Kind; k != RefVerb && k != RefObject {
			continue
		}
		if before := l.read(s, tool, args, true); before.changed {
			p.unexplained = before.unexplainedWords()
			return p.fail(QuestionNotPlain, "the turn says "+strconv.Quote(s.Raw)+" before the question, which "+operatorPhrase("action_changer"))
		}
	}
	// What the turn says after its question may take it back or qualify
	// it ("Shall I cancel the order? Actually, hold on, let me first
	// check whether it has shipped."): an operator there refuses too.
	for i := q.Index + 1; i < len(t.Sentences); i++ {
		s := t.Sentences[i]
		if l.filler(s) {
			continue
		}
		// A statement after it may negate a fact ("There's no fee for
		// it."): a negation there takes nothing back; the other classes
		// do.
		if after := l.read(s, tool, args, true); after.operatorClass != "" && after.operatorClass != "negation" {
			p.unexplained = after.unexplainedWords()
			return p.fail(QuestionNotPlain, "after the question the turn says "+strconv.Quote(s.Raw)+", which "+operatorPhrase(after.operatorClass))
		}
	}
	return p
}

// notPlain judges a reading: its unexplained words, its stray values and,
// for the question itself (asking), that its verb is what the agent asks
// leave to do.
func (l *Locale) notPlain(r *reading, asking bool) (proposed, bool) {
	var p proposed
	if words := r.unexplainedWords(); len(words) > 0 {
		p.unexplained = words
		detail := quoteList(words) + " " + explainNot(len(words))
		if c, ok := r.unexplainedContainer(); ok {
			detail += " (" + strconv.Quote(c) + " names something made of or about what the action acts on, not the thing itself)"
		}
		return p.fail(QuestionNotPlain, detail), true
	}
	if len(r.strays) > 0 {
		return p.fail(ArgumentMismatch, "it states "+strconv.Quote(r.strays[0].text)+", which is none of the call's arguments"), true
	}
	var verbFirst func(string) bool
	if l.verbFirstAsks {
		verbFirst = l.firstPerson
	}
	if asking && !r.asksLeave(verbFirst) {
		return p.fail(QuestionNotPlain, "it names the action without asking leave to do it (as \"shall I\" or \"do you want me to\" asks)"), true
	}
	return p, false
}

func explainNot(n int) string {
	if n == 1 {
		return "is not part of asking leave for this action"
	}
	return "are not part of asking leave for this action"
}

func quoteList(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, ", ")
}

// pointedTo finds the sentence a question at index qi points back to:
// the nearest sentence before it that is neither filler ("Thanks for
// waiting.") nor a recap of another action done ("I've cancelled the old
// one."). It returns -1 when there is none, and how that sentence refers
// to the action.
//
// With none before it, a sentence after it may say what it means:
// "Möchten Sie, dass ich das in die Wege leite? Ich würde den Widerspruch
// dann einreichen."
func (l *Locale) pointedTo(t Text, qi int, tool Tool) (int, RefKind) {
	try := func(i int) (RefKind, bool) {
		s := t.Sentences[i]
		if l.filler(s) {
			return RefNone, false
		}
		ref := l.Refers(s, tool.Action, tool.Others)
		if ref.Kind == RefOther && l.recap(s) {
			// "I've cancelled your old appointment. Shall I go ahead?":
			// what is done is not what the question proposes.
			return RefNone, false
		}
		return ref.Kind, true
	}
	for i := qi - 1; i >= 0; i-- {
		if k, ok := try(i); ok {
			return i, k
		}
	}
	for i := qi + 1; i < len(t.Sentences); i++ {
		if k, ok := try(i); ok {
			return i, k
		}
	}
	return -1, RefNone
}

// turnNamesObject reports whether a sentence of t before index qi names
// what the action acts on, outside a side clause: one of its objects, or
// another tool's that no tool sharing its verb acts on.
func (l *Locale) turnNamesObject(t Text, qi int, tool Tool) bool {
	for i := qi - 1; i >= 0; i-- {
		toks := l.mainClause(t.Sentences[i])
		if len(tool.Action.objects.find(toks)) > 0 {
			return true
		}
		if tool.Others != nil && len(tool.Action.rivals.find(toks)) == 0 &&
			(len(tool.Others.shared.find(toks)) > 0 || len(tool.Others.objects.find(toks)) > 0) {
			return true
		}
	}
	return false
}

// turnStatesCall reports whether the turn up to its question at qi says
// which thing a verb several tools share acts on by the call's own
// values: the call binds arguments and the turn states each ("Tuesday
// the 8th at two with Dr. Haddad. Shall I book it?"), and no sentence
// names what a tool sharing the verb acts on.
func (l *Locale) turnStatesCall(t Text, qi int, tool Tool, args *callArgs, bind []string) bool {
	if len(bind) == 0 || qi >= len(t.Sentences) {
		return false
	}
	said := t.Sentences[:qi+1]
	for _, s := range said {
		if len(tool.Action.rivals.find(s.Tokens)) > 0 {
			return false
		}
	}
	_, ok := l.boundStated(said, args, bind)
	return ok
}

// filler reports whether every word of s is a filler, a plain word or a
// tag: "Alright.", "Thanks for waiting.", "Got it.".
func (l *Locale) filler(s Sentence) bool {
	covered := make([]bool, len(s.Tokens))
	for _, pl := range []*phraseList{&l.fillerSentences, &l.plainWords, &l.fillers, &l.tags} {
		for _, sp := range pl.find(s.Tokens) {
			for k := sp.start; k < sp.end; k++ {
				covered[k] = true
			}
		}
	}
	return !slices.Contains(covered, false)
}

// recap reports whether s tells of something done ("I've cancelled your
// old appointment", "already"), not of what the question proposes.
func (l *Locale) recap(s Sentence) bool {
	_, ok := l.recaps.first(s.Tokens)
	return ok
}
