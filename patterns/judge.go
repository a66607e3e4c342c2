package patterns

import (
	"slices"
	"strconv"
	"strings"
)

// This file holds rules 3 to 6 in one place: the caller's plain yes (3),
// the question it answers (4), that question being a plain question about
// this action with its values (5), and the caller's own instruction when
// nothing was asked (6). The guard applies rules 1 and 2 (the latest
// words, their age) and calls Judge once per decision.

// Argument is one argument of the tool call, its value as JSON decodes it
// (float64, string, bool, nil, []any, map[string]any).
type Argument struct {
	Name  string
	Value any
}

// Tool is what the judge knows of the tool called, in one language.
type Tool struct {
	// Action is the tool's verbs and objects.
	Action *Action
	// Others is every other confirmed tool's verbs and objects (MergeActions).
	Others *Action
}

// Turn is one turn, read in its own language with the tool's words in
// that language.
type Turn struct {
	Locale *Locale
	Text   string
	Tool   Tool
}

// Input is what one decision reads.
type Input struct {
	// Answer is the caller's latest turn.
	Answer Turn
	// Question is the agent's turn before it; nil when the caller spoke
	// first.
	Question *Turn
	// Args are the call's arguments, Bind the names of those the question
	// must state.
	Args []Argument
	Bind []string
}

// Outcome is what the rules decided.
type Outcome int

// The outcomes of Judge. Only Confirmed and Instructed allow the action.
const (
	// Confirmed: a plain yes to a plain question about this action that
	// states its values (rule 5).
	Confirmed Outcome = iota + 1
	// Instructed: no question, and the caller's own words plainly ask for
	// this action (rule 6).
	Instructed
	// Negated: the caller said no or took the yes back.
	Negated
	// NotPlain: the caller's turn is no plain yes.
	NotPlain
	// NoQuestion: nothing was asked that a yes answers.
	NoQuestion
	// ActionMismatch: the question is about another action or none.
	ActionMismatch
	// QuestionNotPlain: the question is about this action but holds words
	// the rule cannot explain (another verb, a negation, an alternative,
	// a time or purpose clause).
	QuestionNotPlain
	// ArgumentMismatch: a bound value is not stated, or a value stated is
	// none of the call's.
	ArgumentMismatch
)

var outcomeNames = [...]string{"", "confirmed", "instructed", "negated", "not_plain", "no_question", "action_mismatch", "question_not_plain", "argument_mismatch"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Allows reports whether the outcome allows the action.
func (o Outcome) Allows() bool { return o == Confirmed || o == Instructed }

// Verdict is the judge's decision and what it rests on.
type Verdict struct {
	Outcome Outcome
	// Detail says, for people, what the decision rests on.
	Detail string
	// Asked: the agent's turn holds a question; QuestionSentence is its
	// last one, as the yes answers it.
	Asked            bool
	QuestionSentence string
	// Matches are the rules that matched, for the evidence: the
	// question's, then the answer's, then rule 5's.
	Matches []Match
	// Unexplained are the words that keep the question from being plain
	// (QuestionNotPlain), as they stand in it.
	Unexplained []string
	// StatesQuantity: the caller's turn states a quantity ("two more").
	StatesQuantity bool
}

// Judge applies rules 3 to 6 to one decision. It never fails: what it
// cannot read refuses.
func Judge(in Input) Verdict {
	var v Verdict
	loc := in.Answer.Locale
	ca := newCallArgs(in.Args)
	answer := loc.Parse(in.Answer.Text)
	v.StatesQuantity = loc.StatesQuantity(answer)

	qTurn := in.Question
	var qText Text
	var q Question
	qLoc := loc
	qTool := in.Answer.Tool
	if qTurn != nil {
		qLoc, qTool = qTurn.Locale, qTurn.Tool
		qText = qLoc.splitRunOn(qLoc.Parse(qTurn.Text))
		q, v.Asked = qLoc.LastQuestion(qText)
	}
	var echo map[string]bool
	if v.Asked {
		echo = TokenSet(Text{Sentences: []Sentence{q.Sentence}})
		v.QuestionSentence = unmark(q.Sentence.Raw)
		v.Matches = append(v.Matches, q.Matches...)
		// A yes may restate a value of the question that is the call's
		// ("Yes, 71.25 is right"), never another one ("Ja, am
		// Donnerstag" to "Dienstag?").
		var asked uint64
		var qToks map[string]bool
		for _, s := range answer.Sentences {
			hits, stated := loc.readValues(s, ca)
			for _, h := range hits {
				if h.stray {
					continue
				}
				if qToks == nil {
					// Read the agent's turn only for an answer that holds
					// a value of the call's.
					for _, s := range qText.Sentences {
						_, st := qLoc.readValues(s, ca)
						asked |= st
					}
					qToks = TokenSet(qText)
				}
				said := stated&asked != 0
				for _, tok := range s.Tokens[h.start:h.end] {
					said = said || qToks[tok] && tok[0] >= '0' && tok[0] <= '9'
				}
				if said {
					for _, tok := range s.Tokens[h.start:h.end] {
						echo[tok] = true
					}
				}
			}
		}
	}
	ans := loc.JudgeAnswer(answer, in.Answer.Tool.Action, echo)
	v.Matches = append(v.Matches, ans.Matches...)
	// "Would you mind if I ...?" turns the answer round: a yes says the
	// caller minds, and only a no that says go ahead ("No, not at all, go
	// ahead.") consents; a bare "No." says nothing certain.
	if v.Asked && len(qLoc.mindFrames.find(q.Sentence.Tokens)) > 0 {
		switch {
		case loc.mindConsent(answer):
			ans = Judgement{Affirmative: true, Matches: []Match{{Rule: "mind_consent", Text: in.Answer.Text}}}
		case ans.Negated:
			return v.with(Negated, "the question asks whether the caller minds, and "+strconv.Quote(in.Answer.Text)+" does not say to go ahead")
		default:
			return v.with(NotPlain, "the question asks whether the caller minds, and "+strconv.Quote(in.Answer.Text)+" may say they do")
		}
	} else if ans.Negated {
		return v.with(Negated, ans.Detail)
	}
	if !v.Asked {
		return v.instruction(in, ca, loc, answer, qText, ans, q, qTurn != nil)
	}
	if ans.NotPlain || (!ans.Affirmative && !ans.Verb) {
		return v.with(NotPlain, ans.Detail)
	}
	// Rule 5: the question must be a plain question about this action.
	p := qLoc.proposal(qText, q, qTool, ca, in.Bind)
	v.Matches = append(v.Matches, p.matches...)
	if p.outcome != 0 {
		v.Unexplained = p.unexplained
		return v.with(p.outcome, p.detail)
	}
	if alt, ok := qLoc.turnAlternative(qText, q, ca); ok {
		return v.with(QuestionNotPlain, "the turn offers an alternative (\""+alt+"\"), and the question does not say which it proposes")
	}
	if detail, ok := qLoc.turnValues(qText, q.Index, p.stated, ca, in.Bind); !ok {
		return v.with(ArgumentMismatch, detail)
	}
	return v.with(Confirmed, "plain yes "+strconv.Quote(in.Answer.Text)+" to "+strconv.Quote(q.Sentence.Raw))
}

func (v Verdict) with(o Outcome, detail string) Verdict {
	v.Outcome, v.Detail = o, detail
	return v
}

// instruction applies rule 6: with no question before it, only the
// caller's own plain instruction naming this action counts ("Yes, please
// submit the appeal."). It may name what the action acts on in words the
// policy gives any tool ("I'd like to cancel my appointment").
func (v Verdict) instruction(in Input, ca *callArgs, loc *Locale, answer, qText Text, ans Judgement, q Question, agentSpoke bool) Verdict {
	tool := in.Answer.Tool
	if ans.NotPlain && ans.Verb {
		// An instruction may name what it acts on in any tool's words, and
		// state values ("Please pay the bill of $120.50 now."): strayValue
		// and boundStated below judge them (one that is none of the call's
		// refuses as ARGUMENT_MISMATCH), so they are no words beyond the
		// instruction.
		echo := loc.valueTokens(answer, ca)
		if tool.Others != nil {
			for w := range tool.Others.Words() {
				echo[w] = true
			}
		}
		ans = loc.JudgeAnswer(answer, tool.Action, echo)
	}
	if !ans.NotPlain && ans.Verb {
		if sen, bad, ok := loc.strayValue(answer, ca); !ok {
			return v.with(ArgumentMismatch, "the caller's words state "+strconv.Quote(bad)+", which is none of the call's arguments ("+strconv.Quote(sen)+")")
		}
		// With no question, nobody proposed the values: each bound one is
		// stated in the caller's words or in the agent's turn before them,
		// and, when the tool binds any, that turn states no other value (a
		// balance of 212.40 and 80 of it past due: "Just pay it." does not
		// say which).
		if sen, bad, ok := loc.strayValue(qText, ca); !ok && len(in.Bind) > 0 {
			return v.with(ArgumentMismatch, "the agent's turn before the instruction states "+strconv.Quote(bad)+", which is none of the call's arguments ("+strconv.Quote(sen)+"): the caller's words do not say which value they ask for")
		}
		said := Text{Sentences: append(append([]Sentence(nil), answer.Sentences...), qText.Sentences...)}
		if detail, ok := loc.boundStated(said.Sentences, ca, in.Bind); !ok {
			return v.with(ArgumentMismatch, detail)
		}
		return v.with(Instructed, "the caller asked for this action by name: "+strconv.Quote(clip(in.Answer.Text, 160)))
	}
	if !agentSpoke {
		return v.with(NoQuestion, "the caller spoke before the agent asked anything")
	}
	for _, m := range q.Matches {
		if m.Rule == "open_question" || m.Rule == "alternative" {
			return v.with(NoQuestion, "the agent's question "+strconv.Quote(q.Sentence.Raw)+" asks for a detail, a choice or a fact ("+strconv.Quote(m.Text)+"), not for a yes to act on")
		}
	}
	return v.with(NoQuestion, "the agent's turn "+strconv.Quote(clip(in.Question.Text, 160))+" asks nothing")
}

// mindConsent reports whether the caller's answer to a "would you mind"
// question consents: it holds one of the locale's mind_consents ("not at
// all", "go ahead"), and every negation in it is the word that opens it
// ("No, go ahead.") or lies inside a consent ("not at all"), and no yes
// stands outside one; "No, don't go ahead" and "Yes, go ahead" do not
// consent.
func (l *Locale) mindConsent(t Text) bool {
	consents := 0
	for i, s := range t.Sentences {
		cs := l.mindConsents.find(s.Tokens)
		consents += len(cs)
		// A yes outside the consent ("Yes, go ahead") may say they mind.
		for _, a := range l.affirmatives.find(s.Tokens) {
			if !slices.ContainsFunc(cs, func(c span) bool { return c.start <= a.start && a.end <= c.end }) {
				return false
			}
		}
		for _, n := range l.negations.find(s.Tokens) {
			inside := slices.ContainsFunc(cs, func(c span) bool { return c.start <= n.start && n.end <= c.end })
			opening := i == 0 && n.start == 0 && n.end == 1
			if !inside && !opening {
				return false
			}
		}
	}
	return consents > 0
}

// valueTokens returns the tokens of t that state an amount, date or time,
// the call's or not, in a new set the caller may add to.
func (l *Locale) valueTokens(t Text, ca *callArgs) map[string]bool {
	out := map[string]bool{}
	for _, s := range t.Sentences {
		hits, _ := l.readValues(s, ca)
		for _, h := range hits {
			for _, tok := range s.Tokens[h.start:h.end] {
				out[tok] = true
			}
		}
	}
	return out
}

// clip cuts s to at most n bytes, at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return strings.TrimSpace(s[:n]) + "…"
}
