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

// Asks reports whether an agent's text asks something a yes answers, read
// as the judge reads a question turn: run-on sentences split at their
// question openers first ("got it could i submit the appeal for you now").
func (l *Locale) Asks(text string) bool {
	_, asks := l.LastQuestion(l.splitRunOn(l.Parse(text)))
	return asks
}

// splitRunOn splits each sentence of an agent's turn that has no question
// mark at every question opener after its start (question_starts and
// confirm_requests, taken left to right without overlap): a recogniser
// writes "i've got everything for the appeal shall i submit it now" as one
// sentence, and the question starts at "shall i". A sentence with a mark
// is left as written.
func (l *Locale) splitRunOn(t Text) Text {
	var out *Text
	for i, s := range t.Sentences {
		cuts := l.openerCuts(s)
		if len(cuts) == 0 {
			if out != nil {
				out.Sentences = append(out.Sentences, s)
			}
			continue
		}
		if out == nil {
			out = &Text{Sentences: append(make([]Sentence, 0, len(t.Sentences)+len(cuts)), t.Sentences[:i]...)}
		}
		from := 0
		// Each part's Raw is its stretch of the sentence's, so that values
		// keep their signs and colons ("11:30", "$71.25").
		at := tokenOffsets(s)
		for _, c := range append(cuts, len(s.Tokens)) {
			raw := strings.Join(s.Tokens[from:c], " ")
			if at != nil {
				end := len(s.Raw)
				if c < len(s.Tokens) {
					end = at[c]
				}
				raw = strings.TrimSpace(s.Raw[at[from]:end])
			}
			part := Sentence{Tokens: s.Tokens[from:c:c], Raw: raw}
			for _, b := range s.Breaks {
				if b > from && b < c {
					part.Breaks = append(part.Breaks, b-from)
				}
			}
			out.Sentences = append(out.Sentences, part)
			from = c
		}
	}
	if out == nil {
		return t
	}
	return *out
}

// tokenOffsets returns where each token of s starts in s.Raw, or nil when
// one is not found there as written (a clitic's word).
func tokenOffsets(s Sentence) []int {
	at := make([]int, len(s.Tokens))
	pos := 0
	for k, tok := range s.Tokens {
		i := strings.Index(s.Raw[pos:], tok)
		if i < 0 {
			return nil
		}
		at[k] = pos + i
		pos += i + len(tok)
	}
	return at
}

// openerCuts returns where, after its first word, question openers start
// in an unmarked sentence.
func (l *Locale) openerCuts(s Sentence) []int {
	if s.Marked || len(s.Tokens) < 3 {
		return nil
	}
	var cuts []int
	end := 0
	harmless := l.harmless.find(s.Tokens)
	for k := 0; k < len(s.Tokens); k++ {
		if k < end {
			continue
		}
		// An opener inside a harmless phrase opens nothing: "I can file
		// it right away if *you'd like*."
		if slices.ContainsFunc(harmless, func(h span) bool { return h.start < k && k < h.end }) {
			continue
		}
		best := l.questionStarts.bestAt(s.Tokens, k)
		if cr := l.confirmRequests.bestAt(s.Tokens, k); cr.start >= 0 && (best.start < 0 || cr.end > best.end) {
			best = cr
		}
		if best.start < 0 {
			// A tag that opens no question is part of the proposal before
			// it ("je peux l'annuler si vous voulez").
			if tg := l.tags.bestAt(s.Tokens, k); tg.start >= 0 && tg.end-tg.start > 1 {
				end = tg.end
			}
			continue
		}
		if k > 0 && (!l.verbSecond || l.clauseBefore(s.Tokens[cuts0(cuts):k])) {
			cuts = append(cuts, k)
		}
		end = best.end
	}
	return cuts
}

func cuts0(cuts []int) int {
	if len(cuts) == 0 {
		return 0
	}
	return cuts[len(cuts)-1]
}

// clauseBefore reports whether toks hold a clause of their own: a word of
// a statement, of a recap, or a frame ("ik kan het bezwaar indienen"). Where the finite verb comes
// second (de, nl), "Dat zal ik nu indienen" is one statement whose
// object leads, not a clause and then a question.
func (l *Locale) clauseBefore(toks []string) bool {
	for _, pl := range []*phraseList{&l.statementWords, &l.recaps, &l.frames} {
		if _, ok := pl.first(toks); ok {
			return true
		}
	}
	return false
}

// openQuestion finds what makes toks a question a yes does not answer: an
// open_questions phrase not wholly inside the confirm request that asks
// ("lassen Sie mich wissen, ob ..." asks for a yes) or inside a plain
// phrase (nl "nu al"), or an alternatives word
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
	// One wholly inside a plain phrase is a word of it, as a negation
	// inside a negation idiom is: nl "nu *al*" (right now) asks nothing
	// of what the caller has done ("Heeft u *al* betaald?").
	var plain []span // found only when an open question is: rare
	inPlain := func(s span) bool {
		if plain == nil {
			plain = l.plainWords.find(toks)
		}
		return slices.ContainsFunc(plain, func(p span) bool { return p.start <= s.start && s.end <= p.end })
	}
	for _, s := range l.openQuestions.find(toks) {
		if !inside(s) && !inPlain(s) {
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
	unexplained   role = iota
	roleFrame          // asks the caller's leave ("shall I", "do you want me to")
	roleTag            // a confirming tag after the proposal ("okay?", "is that right")
	roleVerb           // this action's verb
	roleObject         // this action's object, or a noun its verb makes
	roleProceed        // a generic proceed phrase ("go ahead", "proceed with")
	roleConfirm        // a confirm verb governing an object ("confirm the booking")
	roleBack           // points back ("do that", "sound good")
	roleValue          // a value that is one of the call's arguments
	roleArg            // the words of one of the call's string arguments
	roleName           // a name after a title ("Dr. Patel")
	rolePlain          // a harmless word ("now", "your", "please")
	roleStatement      // a small word of a statement ("is", "ready")
	roleOther          // another tool's object, as what this verb acts on
	roleModifier       // a word before an object ("your physio appointment")
	roleParty          // who the action involves ("with the hygienist")
	rolePlace          // where its thing is, or its money goes ("at the Harbor Inn")
	roleWait           // the waiting a "now" question turns down ("rather than waiting for Monday")
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
	// lists too; rival: it names an object of such a tool.
	sharedOnly, rival bool
	// strays are values that are none of the call's arguments.
	strays []valueHit
	values []valueHit
	// governFrom is the first token of this action's verb or of a proceed
	// or confirm phrase: what stands after it is what the action acts on
	// (len(tokens) when there is none).
	governFrom int
	// container marks the words of containers (locales containers) that
	// are none of the action's objects: none fills a slot.
	container []bool
	// free marks the words outside the action's slot that are no
	// operator (structure): they need no explaining.
	free []bool
	// operatorClass names the class of the first operator found ("" for
	// none); changed: one of them makes the action another
	// (action_changer).
	operatorClass string
	changed       bool
}

// read reads sentence s as a proposal of tool's action, with the call's
// arguments. Every word gets the first role that explains it, in this
// order: the action's verbs, its objects, the call's values, the words of
// its string arguments, then the locale's frames, tags, proceed and
// confirm phrases, back references and plain words, and names after
// titles. What is left is unexplained.
//
// statement: s is the sentence a question points back to, where the small
// words of a statement ("your balance is $120.50", "the appeal is ready")
// are explained too.
func (l *Locale) read(s Sentence, tool Tool, args *callArgs, statement bool) reading {
	toks := s.Tokens
	r := reading{s: s, roles: make([]role, len(toks)), firstVerb: -1, lastVerb: -1}
	pbuf := make([]int, 0, 8) // the positions of one match at a time
	spans := newSpanArena(toks)
	// A container (locales containers) is never another tool's object
	// or a confirm phrase ("a copy of", "a confirmation of"), and fills
	// no slot: only this tool's own objects explain it.
	mark := func(k int, ro role) {
		if r.roles[k] != unexplained {
			return
		}
		if (ro == roleOther || ro == roleConfirm) && r.container != nil && r.container[k] {
			return
		}
		r.roles[k] = ro
	}
	a := tool.Action
	mine, _ := ownVerbs(spans.find(&a.verbs), tool.Others, toks)
	// A word that is both a verb form and an object ("pago": I pay, the
	// payment) is the object after a proceed or confirm phrase ("¿Procedo
	// con el pago?").
	proceeds, confirms, objects := spans.find(&l.proceed), spans.find(&l.confirmVerbs), spans.find(&a.objects)
	var objectAt []bool
	govFrom := len(toks)
	if len(proceeds) > 0 {
		govFrom = proceeds[0].start
	}
	if len(confirms) > 0 {
		govFrom = min(govFrom, confirms[0].start)
	}
	if govFrom < len(toks) && len(objects) > 0 {
		objectAt = make([]bool, len(toks))
		for _, sp := range objects {
			pbuf, _ = appendPositions(pbuf[:0], sp.p.elems, toks, sp.start)
			for _, p := range pbuf {
				objectAt[p] = p > govFrom
			}
		}
	}
	r.governFrom = govFrom
	r.sharedOnly = len(mine) > 0
	r.rival = len(spans.find(&a.rivals)) > 0
	for _, sp := range mine {
		if !a.sharedVerbs[sp.p.src] {
			r.sharedOnly = false
		}
		pbuf, _ = appendPositions(pbuf[:0], sp.p.elems, toks, sp.start)
		for _, p := range pbuf {
			if objectAt != nil && objectAt[p] {
				continue
			}
			mark(p, roleVerb)
			if r.firstVerb < 0 || p < r.firstVerb {
				r.firstVerb = p
			}
			r.lastVerb = max(r.lastVerb, p)
		}
	}
	for _, sp := range objects {
		pbuf, _ = appendPositions(pbuf[:0], sp.p.elems, toks, sp.start)
		for _, p := range pbuf {
			mark(p, roleObject)
		}
	}
	if cs := spans.find(&l.containers); len(cs) > 0 {
		r.container = make([]bool, len(toks))
		for _, sp := range cs {
			pbuf, _ = appendPositions(pbuf[:0], sp.p.elems, toks, sp.start)
			for _, p := range pbuf {
				r.container[p] = r.roles[p] == unexplained
			}
		}
	}
	if l.compoundObjects {
		// "Zahnarzttermin": a compound ending in an object names it.
		for k, tok := range toks {
			switch {
			case r.roles[k] != unexplained:
			case a.endsInObject(tok):
				r.roles[k] = roleObject
			case tool.Others != nil && tool.Others.endsInObject(tok) && (r.container == nil || !r.container[k]):
				r.roles[k] = roleOther
			}
		}
	}
	// A value wholly inside a plain phrase is a word of it ("that one").
	plain := spans.find(&l.plainWords)
	hits, _ := l.readValues(s, args)
	for _, h := range hits {
		inPlain := false
		for _, sp := range plain {
			if sp.start <= h.start && h.end <= sp.end {
				inPlain = true
			}
		}
		// The number of an identifier phrase ("ending in #") is held to
		// a string argument of as many digits, when the call has one.
		if inPlain && !(h.stray && h.kind == ValueNumber && args.digitArg(l, toks[h.start])) {
			continue
		}
		if h.stray {
			r.strays = append(r.strays, h)
			continue
		}
		r.values = append(r.values, h)
		for k := h.start; k < h.end; k++ {
			mark(k, roleValue)
		}
	}
	for _, want := range args.wordsIn(l) {
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
	if tool.Others != nil {
		for _, pl := range []*phraseList{&tool.Others.objects, &tool.Others.shared} {
			for _, sp := range spans.find(pl) {
				pbuf, _ = appendPositions(pbuf[:0], sp.p.elems, toks, sp.start)
				for _, p := range pbuf {
					mark(p, roleOther)
				}
			}
		}
	}
	// A phrase explains the words it takes, not what a gap in it stands
	// for ("do you * want me to").
	markSpans := func(spans []span, ro role) {
		for _, sp := range spans {
			pbuf, _ = appendPositions(pbuf[:0], sp.p.elems, toks, sp.start)
			for _, p := range pbuf {
				mark(p, ro)
			}
		}
	}
	markSpans(spans.find(&l.mindFrames), roleFrame)
	markSpans(spans.find(&l.frames), roleFrame)
	markSpans(spans.find(&l.harmless), rolePlain)
	markSpans(proceeds, roleProceed)
	markSpans(confirms, roleConfirm)
	markSpans(spans.find(&l.backReferences), roleBack)
	markSpans(plain, rolePlain)
	if statement {
		markSpans(spans.find(&l.statementWords), roleStatement)
		markSpans(spans.find(&l.recaps), roleStatement)
	}
	// A tag confirms what stands before it: it explains its words only
	// at the end of the sentence, with nothing after it but plain words
	// and other tags ("La presento ahora, ¿no?", never "¿No quiere ...?").
	tags := spans.find(&l.tags)
	for k := len(tags) - 1; k >= 0; k-- {
		sp := tags[k]
		end := true
		for p := sp.end; p < len(toks); p++ {
			if ro := r.roles[p]; ro != roleTag && ro != rolePlain {
				end = false
				break
			}
		}
		if end {
			for p := sp.start; p < sp.end; p++ {
				mark(p, roleTag)
			}
		}
	}
	for _, sp := range spans.find(&l.titles) {
		if sp.end < len(toks) && r.roles[sp.end] == unexplained {
			for p := sp.start; p < sp.end; p++ {
				mark(p, roleName)
			}
			r.roles[sp.end] = roleName
			// A name goes on for up to maxName words no list explains,
			// with the particles of names between them ("Maria de
			// Vries", "Tomás dos Santos"); an operator among them is
			// found later and refuses all the same.
			for k, words := sp.end+1, 1; k < len(toks) && words < maxName && (r.roles[k] == unexplained && l.contentWord(toks[k], tool.Action) || l.nameParticles[toks[k]] && (r.roles[k] == unexplained || r.roles[k] == rolePlain)); k++ {
				if l.nameParticles[toks[k]] {
					if k+1 >= len(toks) || r.roles[k+1] != unexplained {
						break
					}
				} else {
					words++
				}
				r.roles[k] = roleName
			}
		}
	}
	if r.firstVerb >= 0 {
		r.governFrom = min(r.governFrom, r.firstVerb)
	}
	l.slots(&r, tool)
	if !args.timed {
		l.identifyingDates(&r, tool.Action)
	}
	l.places(&r, tool, spans)
	l.waits(&r, spans)
	l.structure(&r, tool, spans, statement)
	// A stray value's words stay unexplained even where a plain word
	// would cover them.
	for _, h := range r.strays {
		for k := h.start; k < h.end; k++ {
			r.roles[k] = unexplained
		}
	}
	return r
}

// maxName is how many words a name after a title takes.
const maxName = 3

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
			out = append(out, unmark(strings.Join(run, " ")))
			run = run[:0]
		}
	}
	for k, ro := range r.roles {
		if ro == unexplained && !stray[k] && !r.free[k] {
			run = append(run, r.s.Tokens[k])
			continue
		}
		flush()
	}
	flush()
	return out
}

// namesTarget reports whether r names what the action acts on well enough
// for a verb another tool shares: one of its objects, or another tool's
// that no tool sharing the verb acts on ("cancel your appointment").
func (r *reading) namesTarget() bool {
	return r.has(roleObject) || (r.has(roleOther) && !r.rival)
}

// has reports whether some word of r has role ro.
// unexplainedContainer returns the first container word no rule explains.
func (r *reading) unexplainedContainer() (string, bool) {
	for k, c := range r.container {
		if c && r.roles[k] == unexplained {
			return r.s.Tokens[k], true
		}
	}
	return "", false
}

func (r *reading) has(ro role) bool { return slices.Contains(r.roles, ro) }

// asksLeave reports whether the action's verb stands as what the agent
// asks leave to do: a frame before it ("shall I submit") or a tag after
// it ("I'll submit it now, okay?").
//
// verbFirst, when not nil, tells the first-person verb forms of a locale
// that asks leave with the verb first ("¿Le envío la apelación?"): in a
// question, such a verb with only explained words before it asks leave.
func (r *reading) asksLeave(verbFirst func(string) bool) bool {
	if r.firstVerb < 0 {
		return true
	}
	for k, ro := range r.roles {
		// A frame before the verb, or the subject right after it where
		// the verb comes first ("Reiche ich den Widerspruch ein?", "Dien
		// ik het bezwaar in?"), or a tag after it.
		if (ro == roleFrame && k <= r.firstVerb+1) || ((ro == roleTag || ro == roleBack) && k > r.lastVerb) {
			return true
		}
	}
	if verbFirst != nil && r.s.Marked && verbFirst(r.s.Tokens[r.firstVerb]) {
		for k, ro := range r.roles[:r.firstVerb] {
			if ro == unexplained && (r.free == nil || !r.free[k]) {
				return false
			}
		}
		return true
	}
	return false
}

// firstPerson reports whether a verb form ends as the locale's first
// person forms do (verb_first_endings), so that, first in a question, it
// asks leave.
func (l *Locale) firstPerson(tok string) bool {
	if l.verbFirstWords[tok] {
		return true
	}
	for _, e := range l.verbFirstEndings {
		if strings.HasSuffix(tok, e) {
			return true
		}
	}
	return false
}

// identifyingDates explains the dates and times that say which thing the
// action acts on, when the call has no date or time argument to hold them
// to (a tool that cancels by id): a value joined to an object by a
// modifier link ("la cita *de mañana*", "uw afspraak *van morgen*", "den
// Widerspruch *vom 3. Februar*"), right before one ("the *Friday*
// appointment"), or after one that another tool lists ("cancel your
// appointment *on March 3rd*": the booking tool made it, and the date
// says which). After the tool's own object, or the verb, a value says
// when to act ("Shall I pay the bill *on Friday*?", "¿Presento la
// apelación *mañana*?") and stays stray.
//
// When the policy names no thing the action acts on (a.thingless), a date
// after a determiner the verb governs identifies the word after it as
// that thing: "cancel the Friday visit".
func (l *Locale) identifyingDates(r *reading, a *Action) {
	kept := r.strays[:0]
	for _, h := range r.strays {
		switch h.kind {
		case ValueDate, ValueTime, ValueDateTime, ValueRelative:
		default:
			kept = append(kept, h)
			continue
		}
		if !l.identifies(r, h) && !(a.thingless && l.datedThing(r, h, a)) {
			kept = append(kept, h)
			continue
		}
		r.values = append(r.values, h)
		for k := h.start; k < h.end; k++ {
			r.roles[k] = roleValue
		}
	}
	r.strays = kept
	// A possessive date before a time so explained goes with it
	// ("Thursday's 2:15").
	kept = r.strays[:0]
	for _, h := range r.strays {
		if h.kind == ValueDate && h.end < len(r.roles) && r.roles[h.end] == roleValue && strings.HasSuffix(r.s.Tokens[h.start], "'s") {
			r.values = append(r.values, h)
			r.roles[h.start] = roleValue
			continue
		}
		kept = append(kept, h)
	}
	r.strays = kept
}

// strayOrValueAt reports whether a value, explained or stray, takes
// toks[k].
func (r *reading) strayOrValueAt(k int) bool {
	for _, hs := range [][]valueHit{r.values, r.strays} {
		for _, h := range hs {
			if h.start <= k && k < h.end {
				return true
			}
		}
	}
	return false
}

// datedThing reports whether value h, after the verb and a determiner,
// dates the content word (or two) after it, which the verb acts on: "cancel
// the *Friday* visit". The words are explained with it.
func (l *Locale) datedThing(r *reading, h valueHit, a *Action) bool {
	toks := r.s.Tokens
	if h.kind == ValueRelative || h.start < 1 {
		return false
	}
	// The determiner before the value, or the first word of its own
	// ("the friday").
	k := h.start - 1
	if r.roles[k] == rolePlain && l.determiners[toks[k]] {
		k--
	} else if !l.determiners[toks[h.start]] {
		return false
	}
	if k < 0 || r.roles[k] != roleVerb {
		return false
	}
	j := h.end
	for j < len(toks) && j-h.end < maxSlot && r.roles[j] == unexplained && l.contentWord(toks[j], a) && !l.notModifiers[toks[j]] {
		j++
	}
	if j == h.end || (j < len(toks) && r.roles[j] == unexplained) {
		return false
	}
	mark(r, h.end, j, roleModifier)
	return true
}

// identifies reports whether value h stands where it names which object
// the action acts on (see identifyingDates).
func (l *Locale) identifies(r *reading, h valueHit) bool {
	toks := r.s.Tokens
	possessive := h.end-h.start == 1 && strings.HasSuffix(toks[h.start], "'s")
	det := func(k int) bool { return k >= 0 && r.roles[k] == rolePlain && l.determiners[toks[k]] }
	// Right before an object, after a determiner or as a possessive ("the
	// Friday appointment", "Thursday's appointment", "tonight's
	// reservation"); a relative date only as a possessive ("the tomorrow
	// appeal" is none).
	if h.end < len(toks) && ((h.kind != ValueRelative && det(h.start-1)) || possessive) {
		if ro := r.roles[h.end]; ro == roleObject || ro == roleOther {
			return true
		}
	}
	// A time the verb acts on, after a determiner or a possessive date:
	// "cancel the 3 o'clock", "cancel Thursday's 2:15" (the slot is the
	// object); "submit it at 3" says when.
	if h.kind == ValueTime || h.kind == ValueDateTime {
		k := h.start - 1
		if k >= 0 && (r.roles[k] == roleValue || r.roles[k] == unexplained) && strings.HasSuffix(toks[k], "'s") && r.strayOrValueAt(k) {
			k--
		} else if det(k) {
			k--
		}
		if k < h.start-1 && k >= 0 && r.roles[k] == roleVerb {
			return true
		}
	}
	// After an object: joined by a link ("la cita *del* lunes", "uw
	// afspraak *van* morgen", "de la"), past the words that describe the
	// object, or right after another tool's object.
	linkAt := func(k int) bool {
		sp, ok := l.modifierLinks.startsWith(toks[k:])
		return ok && k+sp.end <= h.start
	}
	linked := false
	if sp, ok := l.modifierLinks.startsWith(toks[h.start:h.end]); ok && sp.end < h.end-h.start {
		if l.whenLinks[toks[h.start]] {
			return false // "for the 3rd": when, as well as which
		}
		linked = true
	}
	k := h.start - 1
	switch {
	case k >= 0 && r.roles[k] == rolePlain && linkAt(k):
		if l.whenLinks[toks[k]] {
			return false
		}
		linked, k = true, k-1
	case k >= 1 && r.roles[k] == rolePlain && r.roles[k-1] == rolePlain && linkAt(k-1):
		if l.whenLinks[toks[k-1]] {
			return false
		}
		linked, k = true, k-2
	case k >= 1 && r.roles[k] == rolePlain && r.roles[k-1] == roleOther:
		// "uw afspraak op 3 juni": another tool's thing, and its date;
		// "the appointment for Monday" may say when as well.
		return h.kind != ValueRelative && !l.whenLinks[toks[k]]
	}
	for ; k >= 0; k-- {
		switch ro := r.roles[k]; {
		case ro == roleOther:
			// A relative date right after it, with no link, says when to
			// act: "cancel your appointment *next week*", "annuler le
			// rendez-vous *plus tard*"; "la cita *de mañana*" names it.
			return linked || h.kind != ValueRelative
		case ro == roleObject:
			return linked
		case ro == roleModifier || ro == roleValue:
		case ro == rolePlain && k+1 < len(toks) && (r.roles[k+1] == roleModifier || r.roles[k+1] == roleValue):
			// the determiner or link of a describing word or date
		default:
			return false
		}
	}
	return false
}

// maxSlot is how many words a modifier or party slot takes.
const maxSlot = 2

// slots explains the few words that describe what the action acts on or
// who it involves, where no list can hold them: up to maxSlot content
// words right before an object, after a determiner ("your physio
// appointment", "the Friday visit"), and up to maxSlot after a party
// preposition and a determiner at the end of the sentence ("with the
// hygienist"). A content word is none of the locale's function words
// (negations, conditions, hedges, additions, question words, side
// clauses, alternatives, open questions, conjunctions, recaps), no number
// and no tool's verb: those keep the question from being plain wherever
// they stand.
func (l *Locale) slots(r *reading, tool Tool) {
	toks := r.s.Tokens
	n := len(toks)
	// This tool's own words never fill a slot.
	content := func(k int) bool {
		return r.roles[k] == unexplained && l.contentWord(toks[k], tool.Action) && (r.container == nil || !r.container[k])
	}
	// Words of time, order, addition and agency fill no slot: "the
	// tomorrow appeal" or "¿Presento la apelación mañana?" changes what
	// is proposed.
	timeless := func(i, j int) bool {
		for k := i; k < j; k++ {
			if l.notModifiers[toks[k]] {
				return false
			}
		}
		return true
	}
	for i := 0; i < n; {
		if !content(i) {
			i++
			continue
		}
		j := i
		for j < n && content(j) {
			j++
		}
		run := j - i
		// Another tool's verb may stand in a slot only as the head of a
		// compound after a word that is none ("the ambulance charge"),
		// never alone ("the cancel appeal") and never in a party slot.
		nominal := true
		for k := i; k < j; k++ {
			if tool.Others != nil && tool.Others.words[toks[k]] {
				nominal = false
				if k == i {
					run = maxSlot + 1 // no slot
				}
			}
		}
		switch {
		case run > maxSlot || !timeless(i, j) || l.conjunctionAt(toks, j):
			// "den Widerspruch bei der Behörde *abholen und* einreichen": a
			// slot before a conjunction may hold a verb of its own.
		case j < n && (r.roles[j] == roleObject || r.roles[j] == roleOther) &&
			i > 0 && (r.roles[i-1] == rolePlain || r.roles[i-1] == roleValue || r.roles[i-1] == roleName):
			// "your physio appointment", "the Friday visit".
			mark(r, i, j, roleModifier)
		case l.postnominal && i > 0 && (r.roles[i-1] == roleObject || r.roles[i-1] == roleOther):
			// "il primo appuntamento libero".
			mark(r, i, j, roleModifier)
		case (i < r.governFrom && l.linkedTo(r, j, +1)) || l.linkedTo(r, i-1, -1):
			// "la factura de la luz", "den Widerspruch gegen den
			// Bescheid"; a slot before a link to an object only where
			// no verb or proceed phrase governs it ("alle Angaben für
			// Ihren Widerspruch" in a statement): what the action's verb
			// governs must be one of its objects, so "send the receipt
			// for the claim" is not plain.
			mark(r, i, j, roleModifier)
		case nominal && l.partyBefore(r, i) && l.endsProposal(r, j):
			// "with the hygienist", "an die Behörde".
			mark(r, i, j, roleParty)
		}
		i = j
	}
	// A link between an object and what describes it: "votre
	// réclamation *concernant* la facture de janvier".
	for k := 0; k < n; k++ {
		if r.roles[k] != unexplained {
			continue
		}
		sp, ok := l.modifierLinks.startsWith(toks[k:])
		if !ok {
			continue
		}
		end := k + sp.end
		if r.describedBefore(k) && r.describesAfter(end) {
			mark(r, k, end, roleModifier)
		}
	}
}

// maxPlace is how many content words a place slot takes ("Brasserie du
// Port", "ristorante Da Gino").
const maxPlace = 3

// places explains where the thing the action acts on is, or where its
// money goes: a place_prepositions word right after what the action acts
// on (an object, a word describing one, a value or another place, past
// plain words), then determiners, then up to maxPlace content words (a
// name may hold a link or an article between two of them: "Fogo de
// Chão", "Hotel De Wereld") or the action's own objects and argument
// words, at the end of the proposal ("cancel the booking *at the Harbor
// Inn*", "500 Euro *vom Girokonto auf Ihr Sparkonto* überweisen", "pay
// $120.50 *toward your bill*").
//
// The slot is bounded and fails closed as the other slots do: a function
// word (negation, alternative, condition, conjunction, time, order), a
// number, a tool's verb or another tool's word ends it, and a slot that
// anything unexplained follows explains nothing ("at Luigi's later",
// "into savings or checking").
func (l *Locale) places(r *reading, tool Tool, spans *spanArena) {
	if l.placePrepositions.empty() {
		return
	}
	toks := r.s.Tokens
	n := len(toks)
	name := func(k int) bool {
		if k >= n {
			return false
		}
		switch r.roles[k] {
		case unexplained:
			return l.contentWord(toks[k], tool.Action) && !l.notModifiers[toks[k]] &&
				(tool.Others == nil || !tool.Others.words[toks[k]])
		case roleObject, roleArg, roleParty:
			// A party slot's words ("à la Brasserie") are a place's here.
			return true
		}
		return false
	}
	// A plain word may stand in a name ("sul conto deposito", "sulla carta
	// che termina con 4421"); it keeps its role.
	word := func(k int) bool { return name(k) || (k < n && r.roles[k] == rolePlain && !l.determiners[toks[k]]) }
	for _, sp := range spans.find(&l.placePrepositions) {
		free := true
		for k := sp.start; k < sp.end; k++ {
			if ro := r.roles[k]; ro != unexplained && ro != rolePlain && ro != roleParty {
				free = false
			}
		}
		if !free || !r.placedBefore(sp.start) {
			continue
		}
		k := sp.end
		for k < n && r.roles[k] == rolePlain && l.determiners[toks[k]] {
			k++
		}
		words, end, plainSeen := 0, -1, false
		for j := k; j < n && words <= maxPlace; {
			if (j > k && slices.Contains(r.s.Breaks, j)) || l.conjunctionAt(toks, j) {
				break // a comma or a conjunction ends the place: ", then print it"
			}
			// A link or an article inside a name, between two of its words
			// ("Brasserie du Port", "Hotel De Wereld", "ristorante Da Gino").
			if words > 0 && (r.roles[j] == unexplained || r.roles[j] == rolePlain || r.roles[j] == roleParty) {
				if lk, ok := l.modifierLinks.startsWith(toks[j:]); ok && name(j+lk.end) {
					j += lk.end
					continue
				}
				if lk, ok := l.placePrepositions.startsWith(toks[j:]); ok && name(j+lk.end) {
					j += lk.end
					continue
				}
				if l.determiners[toks[j]] && name(j+1) {
					j++
					continue
				}
			}
			// After a plain word, only plain words and the action's own
			// words: "at the Harbor Inn then *print* it" ends at "Inn".
			if !word(j) || (plainSeen && r.roles[j] == unexplained) {
				break
			}
			if name(j) {
				words++ // plain words are harmless and not counted
			} else {
				plainSeen = true
			}
			j++
			end = j
		}
		if end < 0 || words > maxPlace || (end < n && r.roles[end] == unexplained) || l.conjunctionAt(toks, end) {
			continue
		}
		for p := sp.start; p < end; p++ {
			if ro := r.roles[p]; ro == unexplained || ro == roleParty {
				r.roles[p] = rolePlace
			}
		}
	}
}

// waits explains the waiting a question turns down after proposing the
// action: "Shall I submit the claim now *rather than waiting for
// Monday*?", "..., *statt bis Montag zu warten*?". A yes to it is a yes
// to acting, not to waiting: the phrase (instead_of_waiting) stands after
// the action's last verb, and from it to the end of the sentence stand
// only its words, plain words, tags and dates or times that are none of
// the call's arguments (the day one would wait for). Such a date is
// explained, and no longer a stray; a date that is one of the call's
// arguments there leaves the phrase unexplained, so that "book now rather
// than waiting for Monday" never states the Monday it books. Anything
// else there ("rather than waiting, or ...", "instead of waiting and
// printing it") leaves it unexplained, and the question not plain.
func (l *Locale) waits(r *reading, spans *spanArena) {
	if l.insteadOfWaiting.empty() || r.lastVerb < 0 {
		return
	}
	toks := r.s.Tokens
	n := len(toks)
	for _, sp := range spans.find(&l.insteadOfWaiting) {
		if sp.start <= r.lastVerb || r.datedBefore(sp.start) {
			continue
		}
		phrase := make([]bool, n) // the phrase's own words, not its gaps
		pos, _ := appendPositions(nil, sp.p.elems, toks, sp.start)
		for _, p := range pos {
			phrase[p] = true
		}
		var dates []int // indexes into r.strays
		ok := true
		for p := sp.start; p < n && ok; p++ {
			switch {
			case phrase[p]:
			case r.roles[p] == rolePlain || r.roles[p] == roleTag:
			default:
				i := slices.IndexFunc(r.strays, func(h valueHit) bool { return h.start <= p && p < h.end })
				if i < 0 {
					ok = false
					break
				}
				switch r.strays[i].kind {
				case ValueDate, ValueTime, ValueDateTime, ValueRelative:
					if !slices.Contains(dates, i) {
						dates = append(dates, i)
					}
				default:
					ok = false // an amount: "rather than waiting for $50"
				}
			}
		}
		if !ok {
			continue
		}
		for p := sp.start; p < n; p++ {
			if phrase[p] || (r.roles[p] != roleTag && r.roles[p] != rolePlain) {
				r.roles[p] = roleWait
			}
		}
		kept := r.strays[:0]
		for i, h := range r.strays {
			if !slices.Contains(dates, i) {
				kept = append(kept, h)
			}
		}
		r.strays = kept
		return
	}
}

// datedBefore reports whether a date or time that is none of the call's
// arguments stands before toks[k], stray or explained as naming which
// thing the action acts on: before a turned-down wait it says when to act
// ("den Termin *nächste Woche* stornieren, statt bis Montag zu warten").
func (r *reading) datedBefore(k int) bool {
	for _, hs := range [][]valueHit{r.values, r.strays} {
		for _, h := range hs {
			if h.stray && h.start < k {
				return true
			}
		}
	}
	return false
}

// conjunctionAt reports whether one of the locale's conjunctions starts at
// toks[k]: a slot right before one may end in a verb that no list knows
// ("im Hotel Post abholen und einreichen"), so it explains nothing.
func (l *Locale) conjunctionAt(toks []string, k int) bool {
	if k >= len(toks) {
		return false
	}
	_, ok := l.conjunctions.startsWith(toks[k:])
	return ok
}

// placedBefore reports whether, past plain words, what the action acts
// on stands before toks[k]: an object, a word describing one, a value or
// a place.
//
// The action's verb counts only where an object stands before it: a
// place names where the thing is, not how the action is done.
// A stray value counts ("the reservation for tonight at Luigi's"): it is
// judged apart, and stays unexplained.
func (r *reading) placedBefore(k int) bool {
	for k--; k >= 0; k-- {
		switch r.roles[k] {
		case roleObject, roleOther, roleModifier, roleValue, rolePlace, roleArg:
			return true
		case rolePlain, roleVerb:
			continue // a separated particle: "send the appeal *in* at ..."
		}
		return r.strayOrValueAt(k)
	}
	return false
}

// describedBefore reports whether, past plain words, an object (or a word
// describing one) stands before toks[k].
func (r *reading) describedBefore(k int) bool {
	for k--; k >= 0; k-- {
		switch r.roles[k] {
		case roleObject, roleOther, roleModifier:
			return true
		case rolePlain:
			continue
		}
		return false
	}
	return false
}

// describesAfter reports whether, past plain words, an object, a value or
// a describing word stands from toks[k] on.
func (r *reading) describesAfter(k int) bool {
	for ; k < len(r.roles); k++ {
		switch r.roles[k] {
		case roleObject, roleOther, roleModifier, roleValue:
			return true
		case rolePlain:
			continue
		}
		return false
	}
	return false
}

// mark gives toks [i, j) of r role ro.
func mark(r *reading, i, j int, ro role) {
	for k := i; k < j; k++ {
		r.roles[k] = ro
	}
}

// linkedTo reports whether, from toks[k] on in direction dir, a modifier
// link ("de") and then, past plain words, one of the objects stand: the
// words next to it describe that object ("solicitud| de apelación",
// "factura de la| luz").
//
// The link's own words are explained with the modifier.
func (l *Locale) linkedTo(r *reading, k int, dir int) bool {
	toks := r.s.Tokens
	if k < 0 || k >= len(toks) || l.modifierLinks.empty() {
		return false
	}
	// The link may stand apart by plain words ("gegen *den* Bescheid").
	linkable := func(p int) bool { return r.roles[p] == unexplained || r.roles[p] == rolePlain }
	markLink := func(sp span) {
		for p := sp.start; p < sp.end; p++ {
			if r.roles[p] == unexplained {
				r.roles[p] = roleModifier
			}
		}
	}
	if dir > 0 {
		for p := k; p < len(toks) && linkable(p); p++ {
			sp, ok := l.modifierLinks.startsWith(toks[p:])
			if !ok {
				if r.roles[p] != rolePlain {
					return false
				}
				continue
			}
			sp.start, sp.end = sp.start+p, sp.end+p
			for q := sp.end; q < len(toks); q++ {
				switch r.roles[q] {
				case roleObject, roleOther:
					markLink(sp)
					return true
				case rolePlain:
					continue
				}
				return false
			}
			return false
		}
		return false
	}
	// Backwards: past plain words, a link ending there, then, past plain
	// words and values, an object.
	for end := k; end >= 0 && linkable(end); end-- {
		for _, sp := range l.modifierLinks.find(toks[:end+1]) {
			if sp.end != end+1 {
				continue
			}
		back:
			for p := sp.start - 1; p >= 0; p-- {
				switch r.roles[p] {
				case roleObject, roleOther:
					markLink(sp)
					return true
				case rolePlain, roleValue:
				default:
					break back
				}
			}
		}
		if r.roles[end] != rolePlain {
			break
		}
	}
	return false
}

// partyBefore reports whether a party preposition, and past it only
// plain words, stand right before toks[i] ("with the |hygienist", "para o
// seu |e-mail"). The preposition's words are explained with the party.
//
// A determiner must stand between ("with *the* hygienist", "a *su*
// abogado"), unless the preposition holds its own (party_articles: es
// "al", de "beim"): "¿Procedo a imprimir la apelación?" names no party.
func (l *Locale) partyBefore(r *reading, i int) bool {
	toks := r.s.Tokens
	for _, sp := range l.partyPrepositions.find(toks[:i]) {
		between := true
		for k := sp.end; k < i; k++ {
			if r.roles[k] != rolePlain {
				between = false
			}
		}
		if !between {
			continue
		}
		if sp.end == i {
			if a, ok := l.partyArticles.startsWith(toks[sp.start:i]); !ok || a.end != i-sp.start {
				continue
			}
		}
		for k := sp.start; k < sp.end; k++ {
			if r.roles[k] == unexplained {
				r.roles[k] = roleParty
			}
		}
		return true
	}
	return false
}

// endsProposal reports whether the slot ending before toks[j] ends there:
// the sentence ends, or an explained word follows ("an die Behörde
// übermitteln", "with the hygienist today").
func (l *Locale) endsProposal(r *reading, j int) bool {
	return j >= len(r.roles) || r.roles[j] != unexplained
}

// contentWord reports whether tok may stand in a modifier or party slot:
// it is no function word of the locale, no number and none of this
// action's words.
func (l *Locale) contentWord(tok string, a *Action) bool {
	if tok == "" || (tok[0] >= '0' && tok[0] <= '9') {
		return false
	}
	if _, ok := l.ParseNumber(tok); ok {
		return false
	}
	return !l.functionWords[tok] && !a.words[tok]
}
