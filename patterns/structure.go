package patterns

import (
	"slices"
	"strings"
)

// This file holds what the judge asks of the words of a proposal: it
// explains the proposal's structure and refuses on operators. The words
// that say what the action is (the frame, the verb, what the verb
// governs, the words that modify the action's noun) must be explained
// word by word; every other word is free, unless it is an operator.
//
// Rules that hold:
//   - The action's slot is the frame's tail up to the verb, the verb and
//     what it governs up to its object (or, where the finite verb comes
//     last, everything from the frame to the verb outside free phrases),
//     and the words right before the action's noun (and, with
//     postnominal_modifiers, right after it). An unexplained word there
//     refuses: "a sample refund", "la reserva provisional", "send you the
//     receipt".
//   - A descriptor (locales descriptors: "next", "available", "libero")
//     may modify the action's noun: it says which one, never what is
//     done to it.
//   - Free are the words before the frame, the free phrases after the
//     slot ("to Maria Lopez", "for four people", "with Dr. Haddad") and
//     the rest of the clause: names, titles, items, places. Their values
//     are compared with the call's all the same (bound.go).
//   - An operator refuses wherever it stands: a phrase of the locale's
//     operators, hedges, conditions, additions, alternatives or
//     side_clauses (the caller's negations are read in the caller's turn:
//     es "ya lo" is "already" there, "now" in "¿Le pago ya los 35
//     euros?"), a not_modifiers word, another tool's verb or
//     object, or a conjunction that opens a clause. A harmless phrase
//     or a list that explains the words ("if that's okay", "as soon as
//     possible", a value) takes them, and they are no operator.

// structure marks the free words of r and makes every operator word
// unexplained. It runs once every list has explained what it explains.
func (l *Locale) structure(r *reading, tool Tool, spans *spanArena, statement bool) {
	toks := r.s.Tokens
	n := len(toks)
	r.free = make([]bool, n)
	if n == 0 {
		return
	}
	slot := make([]bool, n)
	// Where the action is named: its verb, else a proceed, confirm or
	// back-reference phrase.
	verbAt, verbEnd := r.firstVerb, r.lastVerb+1
	if verbAt < 0 {
		verbAt, verbEnd = n, n
		for k, ro := range r.roles {
			if ro == roleProceed || ro == roleConfirm || ro == roleBack {
				if verbAt == n {
					verbAt = k
				}
				verbEnd = k + 1
			} else if verbAt < n {
				break
			}
		}
	}
	// The frame ends the words before the proposal, which are free.
	start := 0
	for k := 0; k < verbAt && k < n; k++ {
		if r.roles[k] == roleFrame {
			start = k + 1
		}
	}
	// So does a break before the verb: "María, ¿le agendo la cita?".
	for _, b := range r.s.Breaks {
		if b > start && b <= verbAt && verbAt < n {
			start = b
		}
	}
	if verbAt == n && start > 0 {
		// No word names the action's verb: the verb after the frame is
		// another ("Shall I forward the cancellation?", "Soll ich die
		// Absage weitergeben?"), and what it governs is the slot.
		verbAt, verbEnd = start, n
		for _, b := range r.s.Breaks {
			if b > start {
				verbEnd = b
				break
			}
		}
	}
	if verbAt < n && l.verbSecond {
		// Where the finite verb comes last, the verb that governs may be
		// any word up to the end of the clause ("die Absage für Ihren
		// Termin weitergeben"): the slot runs to it.
		verbEnd = n
		for _, b := range r.s.Breaks {
			if b > verbAt {
				verbEnd = b
				break
			}
		}
	}
	if verbAt < n {
		if l.verbSecond && verbEnd > verbAt {
			// "Soll ich den Termin bei Frau Dr. Kaya buchen?": from the
			// frame to the verb, what is in no free phrase is what the
			// verb governs.
			// The clause's last word is its verb's place: no free
			// phrase takes it.
			pp := l.freePhrases(r, start, verbEnd-1)
			for k := start; k < verbEnd; k++ {
				slot[k] = !pp[k] && !r.valueAt(k)
			}
		} else {
			for k := start; k < verbAt; k++ {
				slot[k] = true
			}
			l.core(r, verbAt, slot)
		}
	}
	// The words that modify the action's noun, before it (and after it
	// where modifiers follow the noun), are the action's: "a *test*
	// refund", "la reserva *provisional*".
	for k, ro := range r.roles {
		// This action's noun, or another tool's that names what it acts
		// on ("cancel the *appointment*").
		if (ro != roleObject && ro != roleOther) || (k > 0 && r.roles[k-1] == ro) {
			continue
		}
		for j := k - 1; j >= 0 && l.modifying(r, j); j-- {
			if l.descriptors[toks[j]] {
				r.roles[j] = rolePlain // "the first available appointment"
				continue
			}
			slot[j] = true
			r.roles[j] = unexplained
		}
		if l.postnominal {
			e := k
			for e+1 < n && r.roles[e+1] == ro {
				e++
			}
			for j := e + 1; j < n && l.modifying(r, j) && !slices.Contains(r.s.Breaks, j); j++ {
				if l.descriptors[toks[j]] {
					r.roles[j] = rolePlain
					continue
				}
				slot[j] = true
				r.roles[j] = unexplained
			}
		}
	}
	for k := range toks {
		r.free[k] = !slot[k]
	}
	l.operatorsIn(r, tool, spans, statement)
}

// core marks the action's verb and what it governs, from toks[at]: the
// words up to the action's object, or, when none comes first, up to a
// free preposition, a value, a break or a conjunction. After it the
// clause is free.
func (l *Locale) core(r *reading, at int, slot []bool) {
	toks := r.s.Tokens
	n := len(toks)
	for k := at; k < n; k++ {
		ro := r.roles[k]
		named := ro == roleVerb || ro == roleProceed || ro == roleConfirm || ro == roleBack
		// A preposition right after the named verb is its own ("proceed
		// with", "procedo a imprimir"): the core goes on.
		right := k > at && r.roles[k-1] != ro && (r.roles[k-1] == roleVerb || r.roles[k-1] == roleProceed || r.roles[k-1] == roleConfirm)
		if k > at && !named && !right {
			if slices.Contains(r.s.Breaks, k) || r.valueAt(k) || l.listConjunctionAt(toks, k) {
				return
			}
			if _, ok := l.freePrepositions.startsWith(toks[k:]); ok {
				return
			}
		}
		slot[k] = true
		if ro == roleObject {
			for k+1 < n && r.roles[k+1] == roleObject {
				k++
				slot[k] = true
			}
			return
		}
	}
}

// freePhrases marks, within toks[from:to], the free phrases: from a free
// preposition through the words after it, up to the action's verb or
// object, a break, or a determiner after a content word that no linking
// determiner is ("für Frau Lopez *die* Quittung": what the verb governs).
func (l *Locale) freePhrases(r *reading, from, to int) []bool {
	toks := r.s.Tokens
	pp := make([]bool, len(toks))
	for k := from; k < to; k++ {
		sp, ok := l.freePrepositions.startsWith(toks[k:])
		if !ok || r.roles[k] == roleVerb || r.roles[k] == roleObject {
			continue
		}
		j := k + sp.end
		for j < to {
			ro := r.roles[j]
			if ro == roleVerb || ro == roleObject || ro == roleFrame || slices.Contains(r.s.Breaks, j) {
				break
			}
			if l.determiners[toks[j]] && ro != roleName && !l.linkingDeterminers[toks[j]] && j > k+sp.end && !l.determiners[toks[j-1]] {
				if _, ok := l.listConjunctions.startsWith(toks[j-1:]); !ok {
					if _, ok := l.freePrepositions.startsWith(toks[j-1:]); !ok {
						break
					}
				}
			}
			j++
		}
		for p := k; p < j; p++ {
			pp[p] = true
		}
		k = j - 1
	}
	return pp
}

// modifying reports whether toks[j] may modify the action's noun next to
// it: a word no list explains, or one a slot took for a modifier.
func (l *Locale) modifying(r *reading, j int) bool {
	ro := r.roles[j]
	if ro != unexplained && ro != roleModifier {
		return false
	}
	tok := r.s.Tokens[j]
	if l.determiners[tok] || r.valueAt(j) {
		return false
	}
	if _, ok := l.modifierLinks.startsWith(r.s.Tokens[j:]); ok {
		return false
	}
	if _, ok := l.freePrepositions.startsWith(r.s.Tokens[j:]); ok {
		return false
	}
	return true
}

// valueAt reports whether a value of the sentence, the call's or not,
// takes toks[k].
func (r *reading) valueAt(k int) bool { return r.strayOrValueAt(k) }

// listConjunctionAt reports whether a list conjunction starts at toks[k].
func (l *Locale) listConjunctionAt(toks []string, k int) bool {
	_, ok := l.listConjunctions.startsWith(toks[k:])
	return ok
}

// operatorsIn finds the operators of r and makes their words unexplained
// and not free, each with the class that names it (r.operatorClass).
//
// statement: r is a sentence the question points back to, or one after
// it, not the question itself.
func (l *Locale) operatorsIn(r *reading, tool Tool, spans *spanArena, statement bool) {
	toks := r.s.Tokens
	n := len(toks)
	// A word that an explaining list takes is no operator's: "if that's
	// okay" is a tag, "as soon as possible" a plain phrase, "Tuesday
	// morning" a value.
	taken := func(k int) bool {
		switch r.roles[k] {
		case unexplained, roleModifier, roleParty, rolePlace, roleStatement, rolePlain:
			return false
		case roleTag:
			// A tag takes an operator's words only as the sentence's
			// last words ("..., não?"), not before plain ones ("não pro
			// que está no cadastro").
			for j := k + 1; j < n; j++ {
				if r.roles[j] != roleTag {
					return false
				}
			}
		}
		return true
	}
	// A plain or harmless phrase takes an operator only when it holds
	// more words than it: "as soon as possible", "if you'd like"; a plain
	// word that is an operator too ("e") is the operator.
	plain := append(spans.find(&l.plainWords), spans.find(&l.harmless)...)
	inPlain := func(sp span) bool {
		return slices.ContainsFunc(plain, func(p span) bool {
			return p.start <= sp.start && sp.end <= p.end && p.end-p.start > sp.end-sp.start
		})
	}
	hit := func(sp span, class string) {
		explained := true
		for k := sp.start; k < sp.end; k++ {
			if class == "other_action" {
				// Another tool's words are taken only by this tool's
				// own (a verb both list) or by a value.
				ro := r.roles[k]
				explained = explained && ro != unexplained && ro != rolePlain && ro != roleOther && ro != roleModifier && ro != roleParty && ro != rolePlace
				continue
			}
			explained = explained && taken(k)
		}
		// A word that makes the action another one refuses even where
		// the action's own noun takes it in a compound (nl
		// "deelbetaling").
		if (explained && class != "action_changer") || inPlain(sp) {
			return
		}
		for k := sp.start; k < sp.end; k++ {
			if !taken(k) || r.roles[k] == rolePlain {
				r.roles[k] = unexplained
				r.free[k] = false
			}
		}
		// The first class found names the refusal, a negation only when
		// nothing else is there (it takes nothing back after the
		// question: reference.go).
		if r.operatorClass == "" || r.operatorClass == "negation" {
			r.operatorClass = class
		}
		if class == "action_changer" {
			r.changed = true
		}
	}
	for _, sp := range spans.find(&l.operators) {
		class := l.operatorClass[sp.p]
		if class == "sequence" {
			// "then" adds an action except at the end ("Shall I submit
			// it then?") or after a word of assent ("Okay then, shall
			// I ...").
			end := true
			for k := sp.end; k < n; k++ {
				end = end && (r.roles[k] == rolePlain || r.roles[k] == roleTag)
			}
			assent := false
			if sp.start > 0 {
				_, assent = l.affirmatives.startsWith(toks[sp.start-1 : sp.start])
			}
			if end || assent {
				continue
			}
		}
		hit(sp, class)
	}
	for _, c := range []struct {
		pl    *phraseList
		class string
	}{{&l.alternatives, "alternative"}, {&l.conditions, "condition"},
		{&l.sideClauses, "condition"}, {&l.hedges, "hedge"}, {&l.additions, "addition"}} {
		for _, sp := range spans.find(c.pl) {
			hit(sp, c.class)
		}
	}
	if !statement {
		// In the question itself, the words of time, order, addition and
		// agency ("again", "soon", "someone") change what is proposed; a
		// descriptor of the noun ("the first available") does not.
		for _, sp := range spans.find(&l.notModifierPhrases) {
			if sp.end-sp.start == 1 && l.descriptors[toks[sp.start]] && r.roles[sp.start] == rolePlain {
				continue
			}
			hit(sp, "deferral")
		}
	}
	if tool.Others != nil {
		for _, sp := range spans.find(&tool.Others.objects) {
			hit(sp, "other_action")
		}
		for _, sp := range spans.find(&tool.Others.verbs) {
			// Another tool's verb after a determiner, or after a
			// determiner and one word, is a noun ("the ambulance
			// charge"), not an action.
			det := func(k int) bool { return k >= 0 && l.determiners[toks[k]] }
			if k := sp.start - 1; !l.verbSecond && (det(k) || (k >= 1 && (r.roles[k] == unexplained || r.roles[k] == roleModifier) && det(k-1))) {
				continue
			}
			hit(sp, "other_action")
		}
	}
	// A conjunction joins items only before a determiner, a number, a
	// title or a word of the call's; else it opens a second clause ("and
	// then print it"), and at the start of the sentence it adds to what
	// was asked before ("And email you a copy?").
	for _, sp := range spans.find(&l.listConjunctions) {
		k := sp.end
		joins := sp.start > 0 && k < n && (l.determiners[toks[k]] || r.valueAt(k) || r.roles[k] == roleName || r.roles[k] == roleArg || r.roles[k] == roleObject)
		if weak := sp.end-sp.start == 1 && l.weakConjunctions[toks[sp.start]]; weak {
			// it "è pronto", pt "é": only before an infinitive.
			joins = k >= n || !slices.ContainsFunc(l.infinitiveEndings, func(e string) bool { return len(toks[k]) > len(e)+1 && strings.HasSuffix(toks[k], e) })
		}
		if !joins {
			hit(sp, "addition")
		}
	}
}

// operatorPhrase says, for a refusal's detail, what an operator of class
// does to the proposal.
func operatorPhrase(class string) string {
	switch class {
	case "negation":
		return "negates what is proposed"
	case "alternative":
		return "offers an alternative"
	case "condition":
		return "puts a condition on the action"
	case "deferral":
		return "puts the action off"
	case "embedding":
		return "proposes something else first (checking, trying)"
	case "purpose":
		return "proposes it for another purpose"
	case "retraction":
		return "takes the question back"
	case "hedge":
		return "hedges the proposal"
	case "action_changer":
		return "makes it another action (a test, a draft, a hold)"
	case "addition", "sequence":
		return "adds another action"
	case "other_action":
		return "names another action"
	}
	return "changes what is proposed"
}

// turnAlternative finds an alternative the agent's turn offers outside
// its question ("You could move to Standard or to Standard with Ads.
// Should I switch you over?", "Or Tom is free too. Shall I book it?"): a
// yes then does not say which is meant, unless the question itself
// states a value of the call's, which picks one. A word of an
// alternative inside a plain or harmless phrase of more words is none.
func (l *Locale) turnAlternative(t Text, q Question, ca *callArgs) (string, bool) {
	hits, _ := l.readValues(q.Sentence, ca)
	if slices.ContainsFunc(hits, func(h valueHit) bool { return !h.stray }) {
		return "", false
	}
	for i, s := range t.Sentences {
		if i == q.Index {
			continue
		}
		covers := append(l.plainWords.find(s.Tokens), l.harmless.find(s.Tokens)...)
		inside := func(sp span) bool {
			return slices.ContainsFunc(covers, func(c span) bool {
				return c.start <= sp.start && sp.end <= c.end && c.end-c.start > sp.end-sp.start
			})
		}
		alts := slices.DeleteFunc(l.operators.find(s.Tokens), func(sp span) bool { return l.operatorClass[sp.p] != "alternative" })
		for _, sp := range append(alts, l.alternatives.find(s.Tokens)...) {
			if !inside(sp) {
				return strings.Join(s.Tokens[sp.start:sp.end], " ") + `" in "` + unmark(s.Raw), true
			}
		}
	}
	return "", false
}
