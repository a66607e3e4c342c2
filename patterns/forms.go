package patterns

import (
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

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
			out[l.suffixed(st, suf)] = true
		}
	}
	if inf.DoubleFinal && len(w) >= 3 {
		last := w[len(w)-1]
		prev := w[len(w)-2]
		if !strings.ContainsRune("aeiouwxy", rune(last)) && strings.ContainsRune("aeiou", rune(prev)) {
			for _, suf := range suffixes {
				if suf != "" && strings.ContainsRune("aeiou", rune(suf[0])) {
					out[l.suffixed(w+string(last), suf)] = true
				}
			}
		}
	}
	for base, irr := range inf.Irregular {
		if self && Fold(base) == w {
			for _, f := range irr {
				out[l.fold(f)] = true
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

// suffixed joins a folded stem and a suffix as text folds the word: with
// keep_final_accents, a suffix ending in an accented vowel ("aré") keeps
// its mark.
func (l *Locale) suffixed(stem, suf string) string {
	w := stem + Fold(suf)
	if l.keepFinalAccents && len(w) >= 3 {
		if r, _ := utf8.DecodeLastRuneInString(suf); isAccentedVowel(unicode.ToLower(r)) {
			w += "\u02b9"
		}
	}
	return w
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
	// sharedVerbs are this action's verbs (as the policy writes them)
	// that another tool lists too: a question naming only such a verb
	// must also name what this action acts on, and none of rivals, the
	// objects of the tools that share them.
	sharedVerbs map[string]bool
	rivals      phraseList
	// objectWords are the single-word forms of the objects and of the
	// nouns the verbs make.
	objectWords map[string]bool
	// askVerb is the verb the plain question suggested in a refusal
	// uses: the first single-word verb, else the first;
	// askVerbHoldsObject: it names an object itself ("send a copy").
	askVerb            string
	askVerbHoldsObject bool
	// thingless: the policy names no thing the action acts on, only
	// nouns of its verbs ("cancellation"): a thing the question
	// identifies by its date ("cancel the Friday visit") is then what it
	// acts on.
	thingless bool
	// ask is the plain question AskFor suggests, written once for the
	// locale that compiled the action (askedIn).
	ask     string
	askedIn *Locale
}

// CompileAction compiles a tool's verbs and objects. Each verb matches its
// inflected forms, the separated forms of a separable verb ("reiche ...
// ein"), and a multi-word verb with its particle moved ("send it in").
//
// shared names the verbs another confirmed tool lists too.
func (l *Locale) CompileAction(verbs, objects []string, shared ...string) *Action {
	return l.CompileTool(verbs, objects, shared, nil)
}

// CompileTool is CompileAction for a tool that shares verbs with others:
// shared are its verbs another confirmed tool lists too, rivals the
// objects of those tools. A question that names only a shared verb must
// name what the action acts on, and no rival's object: "Shall I cancel
// it?" and "Shall I cancel your subscription?" are no question about
// cancelling an appointment.
func (l *Locale) CompileTool(verbs, objects, shared, rivals []string) *Action {
	a := &Action{words: map[string]bool{}, sharedVerbs: map[string]bool{}, objectWords: map[string]bool{}}
	for _, v := range shared {
		a.sharedVerbs[v] = true
	}
	for _, o := range rivals {
		for _, p := range l.compileInflected(o, map[string]bool{}, false) {
			a.rivals.add(p)
		}
	}
	if len(verbs) > 0 {
		a.Verb = verbs[0]
		a.askVerb = verbs[0]
		for _, v := range verbs {
			if len(strings.Fields(v)) == 1 {
				a.askVerb = v
				break
			}
		}
	}
	if len(objects) > 0 {
		a.Object = objects[0]
	}
	if fv := strings.Fields(Fold(a.askVerb)); len(fv) > 1 {
		for _, o := range objects {
			for _, w := range strings.Fields(Fold(o)) {
				if slices.Contains(fv[1:], w) {
					a.askVerbHoldsObject = true
				}
			}
		}
	}
	verbNouns := map[string]bool{}
	for _, v := range verbs {
		for _, p := range l.compileInflected(v, a.words, true) {
			a.verbs.add(p)
		}
		for f := range l.verbNouns(v) {
			verbNouns[f] = true
		}
		// The nouns a verb makes name what it acts on: "die Buchung
		// stornieren" is about cancelling, not booking.
		if nouns := l.verbNouns(v); len(nouns) > 0 {
			for f := range nouns {
				a.words[f] = true
				a.objectWords[f] = true
			}
			a.objects.add(&phrase{src: v, elems: []element{{forms: nouns}}})
		}
	}
	l.addObjects(a, &a.objects, objects)
	a.thingless = true
	for _, o := range objects {
		if fo := l.fold(strings.TrimSpace(o)); !verbNouns[fo] {
			a.thingless = false
		}
	}
	a.ask, a.askedIn = l.askFor(a), l
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
	if len(parts) != 1 {
		return nil
	}
	head := parts[0]
	out := l.nounForms(head)
	for base, nouns := range l.inflection.IrregularNouns {
		if Fold(base) == head {
			if out == nil {
				out = map[string]bool{}
			}
			for _, n := range nouns {
				out[l.fold(n)] = true
			}
		}
	}
	if out == nil {
		return nil
	}
	for _, pre := range l.inflection.SeparablePrefixes {
		pre = Fold(pre)
		if strings.HasPrefix(head, pre) && len(head)-len(pre) >= 4 && len(l.inflection.NounSuffixes) > 0 {
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
	// A phrase a preposition opens may follow the particle: "ik plan u
	// in voor woensdag", "ich trage Sie ein für Dienstag".
	if _, ok := l.prepositions.startsWith(rest); ok {
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

// MergeActions compiles what every other action of the policy says: their
// verbs (and the nouns the verbs make, "cancellation"), and their objects,
// so that a question naming one of them is known to be about another
// action, and an object they share with this one names neither.
func (l *Locale) MergeActions(verbs, objects []string) *Action {
	a := l.CompileAction(verbs, nil)
	l.addObjects(a, &a.shared, objects)
	return a
}

// addObjects compiles objects, inflected, into pl, and their one-word
// forms into a's objectWords (a compound ending in one names it).
func (l *Locale) addObjects(a *Action, pl *phraseList, objects []string) {
	for _, o := range objects {
		for _, p := range l.compileInflected(o, a.words, false) {
			pl.add(p)
			if len(p.elems) == 1 && p.elems[0].forms != nil {
				for f := range p.elems[0].forms {
					a.objectWords[f] = true
				}
			}
		}
	}
}

// minCompoundHead is how many letters a compound must hold before the
// object it ends in ("Zahnarzt" + "termin").
const minCompoundHead = 3

// endsInObject reports whether tok is a compound ending in one of the
// action's single-word object forms ("zahnarzttermin").
func (a *Action) endsInObject(tok string) bool {
	for f := range a.objectWords {
		if len(tok) >= len(f)+minCompoundHead && strings.HasSuffix(tok, f) {
			return true
		}
	}
	return false
}

// Words returns every single-word form of the action's verbs and objects
// (for an action built by MergeActions, of all the other actions' verbs
// and objects). The map must not be changed.
func (a *Action) Words() map[string]bool { return a.words }
