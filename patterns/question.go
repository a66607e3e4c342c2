package patterns

import (
	"slices"
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
