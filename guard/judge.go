package guard

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// recentTurns is how many of the last turns the evidence shows. The rules
// read no further back (the answer is the last or the second last turn, its
// question the one before), so a Check copies only these turns of a call.
const recentTurns = 6

// view is a snapshot of a call's last recentTurns turns, grouped once for
// both ready and judge.
type view struct {
	snap  transcript.Snapshot
	turns []transcript.Turn // nil when the call is unknown
}

// judgement is the rules' verdict on one snapshot.
type judgement struct {
	outcome  yesguardv1.Outcome
	reason   yesguardv1.Reason
	evidence *yesguardv1.Evidence
	// turnID names the caller turn an ALLOW rests on (0: none).
	turnID uint64
	// answerTurnID names the caller's latest turn, whatever the verdict.
	answerTurnID uint64
	// statesQuantity: the caller's latest turn states a quantity.
	statesQuantity bool
}

// judge applies the rules to the caller's current turn.
func (c *check) judge(v view) (j judgement) {
	snap := v.snap
	j.outcome = yesguardv1.Outcome_OUTCOME_REFUSE
	ev := &yesguardv1.Evidence{}
	j.evidence = ev
	refuse := func(r yesguardv1.Reason, detail string) judgement {
		j.reason = r
		if ev.Detail == "" {
			ev.Detail = detail
		}
		return j
	}
	if !snap.Exists {
		return refuse(yesguardv1.Reason_REASON_UNKNOWN_CALL, "no transcript event has arrived for call "+c.req.GetCallId())
	}
	turns := v.turns
	first := max(0, len(turns)-recentTurns)
	ev.RecentTurns = turnProtos(turns[first:])
	pol := c.rs.policy.Defaults
	ev.Lang = pol.DefaultLang
	if snap.Lang != "" {
		ev.Lang = snap.Lang
	}
	if snap.CallerInFlight {
		return refuse(yesguardv1.Reason_REASON_CALLER_SPEAKING, "the caller started speaking and no final transcript arrived within the wait")
	}
	lastCaller := -1
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Speaker == transcript.Caller {
			lastCaller = i
			break
		}
	}
	if lastCaller < 0 {
		return refuse(yesguardv1.Reason_REASON_NO_ANSWER, "the caller has said nothing")
	}
	answer := turns[lastCaller]
	j.answerTurnID = answer.ID
	ev.Answer = turnAt(ev.RecentTurns, turns, first, lastCaller)
	var qTurn *transcript.Turn
	if lastCaller > 0 {
		qTurn = &turns[lastCaller-1]
		ev.Question = turnAt(ev.RecentTurns, turns, first, lastCaller-1)
	}
	if lastCaller != len(turns)-1 {
		agent := turns[len(turns)-1]
		return refuse(yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER,
			fmt.Sprintf("the agent said %q after the caller's last words", Clip(agent.Text, 120)))
	}
	if to := c.req.GetRespondingToMs(); to > 0 && answer.HasTimes && answer.EndMS < to {
		return refuse(yesguardv1.Reason_REASON_NO_ANSWER,
			fmt.Sprintf("the caller turn the model answers (ending at %d ms) has not arrived; the latest ends at %d ms", to, answer.EndMS))
	}
	if age := c.g.now().Sub(answer.ReceivedAt); age > pol.MaxAnswerAge.D() {
		return refuse(yesguardv1.Reason_REASON_STALE,
			fmt.Sprintf("the caller's answer is %s old; at most %s counts", age.Round(time.Second), pol.MaxAnswerAge.D()))
	}

	lang := answer.Lang
	if lang == "" {
		lang = ev.Lang
	}
	ev.Lang = lang
	loc := c.rs.locales.Get(lang)
	if loc == nil {
		return refuse(yesguardv1.Reason_REASON_UNSUPPORTED_LANGUAGE, lang)
	}
	action := c.rs.action(c.tool, loc)
	answerText := loc.Parse(answer.Text)
	j.statesQuantity = loc.StatesQuantity(answerText)

	// The question is read in its own language: a caller may answer in
	// another language than the agent asked in.
	qLoc := loc
	var qText patterns.Text
	var q patterns.Question
	asked := false
	if qTurn != nil {
		if l := c.rs.locales.Get(qTurn.Lang); l != nil {
			qLoc = l
		}
		qText = qLoc.Parse(qTurn.Text)
		q, asked = qLoc.LastQuestion(qText)
	}
	var echo map[string]bool
	var qMatches []patterns.Match
	if asked {
		echo = patterns.TokenSet(patterns.Text{Sentences: []patterns.Sentence{q.Sentence}})
		ev.QuestionSentence = q.Sentence.Raw
		qMatches = q.Matches
	}
	ans := loc.JudgeAnswer(answerText, action, echo)
	// The question's matches, then the answer's, as before; converted
	// together (JudgeAnswer does not read the evidence) so that they take
	// one allocation, and the list has room for rule 5's few.
	ev.Matches = matchProtos(qMatches, ans.Matches)
	if ans.Negated {
		return refuse(yesguardv1.Reason_REASON_NEGATED, ans.Detail)
	}
	if !asked {
		// Rule 6: with no question, only the caller's own explicit
		// instruction naming this action counts. It may name what the
		// action acts on in words the policy gives any tool ("I'd like to
		// cancel my appointment").
		if ans.NotPlain && ans.Verb {
			ans = loc.JudgeAnswer(answerText, action, c.rs.others(c.tool, loc).Words())
		}
		if !ans.NotPlain && ans.Verb {
			var said patterns.Text
			said.Sentences = append(said.Sentences, answerText.Sentences...)
			said.Sentences = append(said.Sentences, qText.Sentences...)
			if detail, ok := c.bindStated(loc, said); !ok {
				return refuse(yesguardv1.Reason_REASON_ARGUMENT_MISMATCH, detail)
			}
			j.outcome, j.reason, j.turnID = yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_EXPLICIT_INSTRUCTION, answer.ID
			ev.Detail = "the caller asked for this action by name: " + strconvQuote(answer.Text)
			return j
		}
		if qTurn == nil {
			return refuse(yesguardv1.Reason_REASON_NO_QUESTION, "the caller spoke before the agent asked anything")
		}
		for _, m := range q.Matches {
			if m.Rule == "open_question" || m.Rule == "alternative" {
				return refuse(yesguardv1.Reason_REASON_NO_QUESTION, fmt.Sprintf("the agent's question %q asks for a detail, a choice or a fact (%q), not for a yes to act on", q.Sentence.Raw, m.Text))
			}
		}
		return refuse(yesguardv1.Reason_REASON_NO_QUESTION, fmt.Sprintf("the agent's turn %q asks nothing", Clip(qTurn.Text, 160)))
	}
	if ans.NotPlain || (!ans.Affirmative && !ans.Verb) {
		return refuse(yesguardv1.Reason_REASON_NOT_PLAIN, ans.Detail)
	}
	ok, refMatches, detail := c.aboutAction(qLoc, qText, q, c.rs.action(c.tool, qLoc))
	ev.Matches = appendMatches(ev.Matches, refMatches)
	if !ok {
		return refuse(yesguardv1.Reason_REASON_ACTION_MISMATCH, detail)
	}
	if detail, ok := c.bindStated(qLoc, qText); !ok {
		return refuse(yesguardv1.Reason_REASON_ARGUMENT_MISMATCH, detail)
	}
	j.outcome, j.reason, j.turnID = yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED, answer.ID
	ev.Detail = "plain yes " + strconv.Quote(answer.Text) + " to " + strconv.Quote(q.Sentence.Raw) // as %q writes them
	return j
}

// aboutAction applies rule 5: the question names this action by a verb, by
// an object a proceed or confirm phrase governs, or by a generic proceed
// phrase; a question that only points back takes the rest of its turn.
func (c *check) aboutAction(loc *patterns.Locale, qText patterns.Text, q patterns.Question, action *patterns.Action) (bool, []patterns.Match, string) {
	others := c.rs.others(c.tool, loc)
	ref := loc.Refers(q.Sentence, action, others)
	matches := ref.Matches
	switch ref.Kind {
	case patterns.RefVerb, patterns.RefObject:
		return true, matches, ""
	case patterns.RefOther:
		return false, matches, fmt.Sprintf("the question %q is about something else", q.Sentence.Raw)
	case patterns.RefNone:
		return false, matches, fmt.Sprintf("the question %q does not name this action", q.Sentence.Raw)
	}
	// RefProceed, RefBack and RefShared: the rest of the turn says what
	// they mean. Only a verb of this action, or an object of its own that
	// a proceed or confirm phrase governs, makes it this action; an object
	// merely named ("I have saved your appeal. Is that okay?") does not.
	ours, other := false, false
	for i, s := range qText.Sentences {
		if i == q.Index {
			continue
		}
		r := loc.Refers(s, action, others)
		switch r.Kind {
		case patterns.RefVerb, patterns.RefObject:
			ours = true
			matches = append(matches, r.Matches...)
		case patterns.RefOther:
			other = true
			matches = append(matches, r.Matches...)
		}
	}
	switch {
	case ours:
		return true, matches, ""
	case other:
		return false, matches, "the turn around the question is about another action"
	case ref.Kind == patterns.RefProceed:
		return true, matches, ""
	case ref.Kind == patterns.RefShared:
		return false, matches, fmt.Sprintf("the question %q names something another action also acts on, and the turn never says which action", q.Sentence.Raw)
	}
	return false, matches, fmt.Sprintf("the question %q points back to nothing that names this action", q.Sentence.Raw)
}

// bindStated checks that each bound argument's value is stated in t:
// numbers as numbers ("$120.50" and "120.50 dollars" state 120.5), other
// values as their words.
func (c *check) bindStated(loc *patterns.Locale, t patterns.Text) (string, bool) {
	var nums []float64
	numsRead := false
	for _, name := range c.tool.entry.Bind {
		v, ok := c.args[name]
		if !ok {
			return fmt.Sprintf("%s (the call has no such argument)", name), false
		}
		want, isNum := numericValue(loc, v)
		if isNum {
			if !numsRead {
				nums, numsRead = loc.Numbers(t), true
			}
			found := false
			for _, n := range nums {
				if math.Abs(n-want) < 0.005 {
					found = true
					break
				}
			}
			if !found {
				return fmt.Sprintf("%s = %s", name, strconv.FormatFloat(want, 'f', -1, 64)), false
			}
			continue
		}
		s, isStr := v.GetKind().(*structpb.Value_StringValue)
		if !isStr || !loc.ContainsValue(t, s.StringValue) {
			return fmt.Sprintf("%s = %s", name, Clip(valueString(v), 80)), false
		}
	}
	return "", true
}

func numericValue(loc *patterns.Locale, v *structpb.Value) (float64, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		return k.NumberValue, true
	case *structpb.Value_StringValue:
		s := strings.TrimSpace(strings.Trim(strings.TrimSpace(k.StringValue), "$€£¥"))
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r == ',') }) {
			return 0, false
		}
		return loc.ParseNumber(s)
	}
	return 0, false
}

func valueString(v *structpb.Value) string {
	b, err := canonicalValue(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

func turnProto(t transcript.Turn) *yesguardv1.Turn {
	p := &yesguardv1.Turn{}
	fillTurn(p, &t, nil)
	return p
}

// fillTurn sets p from t; stamp, when not nil, is where its received_at
// goes instead of a new Timestamp.
func fillTurn(p *yesguardv1.Turn, t *transcript.Turn, stamp *timestamppb.Timestamp) {
	p.Speaker = string(t.Speaker)
	p.Text = t.Text
	p.FirstSeq, p.LastSeq = t.FirstSeq, t.LastSeq
	p.Lang = t.Lang
	p.ResponseId = t.ResponseID
	p.Source = t.Source
	p.Interrupted = t.Interrupted
	if t.HasTimes {
		p.StartMs, p.EndMs = t.StartMS, t.EndMS
	}
	if !t.ReceivedAt.IsZero() {
		if stamp == nil {
			stamp = new(timestamppb.Timestamp)
		}
		stamp.Seconds, stamp.Nanos = t.ReceivedAt.Unix(), int32(t.ReceivedAt.Nanosecond()) // as timestamppb.New
		p.ReceivedAt = stamp
	}
}

// turnBlock holds up to recentTurns turn protos, their timestamps and the
// list pointing at them, so that turnProtos allocates once.
type turnBlock struct {
	list   [recentTurns]*yesguardv1.Turn
	turns  [recentTurns]yesguardv1.Turn
	stamps [recentTurns]timestamppb.Timestamp
}

// turnProtos converts the evidence's recent turns: with one allocation for
// up to recentTurns of them (all a Check shows), else three (the list, the
// turns, their timestamps). The protos are the same either way.
func turnProtos(ts []transcript.Turn) []*yesguardv1.Turn {
	if len(ts) == 0 {
		return nil
	}
	var (
		out    []*yesguardv1.Turn
		ps     []yesguardv1.Turn
		stamps []timestamppb.Timestamp
	)
	if len(ts) <= recentTurns {
		b := new(turnBlock)
		out, ps, stamps = b.list[:len(ts):len(ts)], b.turns[:len(ts)], b.stamps[:len(ts)]
	} else {
		out = make([]*yesguardv1.Turn, len(ts))
		ps = make([]yesguardv1.Turn, len(ts))
		stamps = make([]timestamppb.Timestamp, len(ts))
	}
	for i := range ts {
		fillTurn(&ps[i], &ts[i], &stamps[i])
		out[i] = &ps[i]
	}
	return out
}

// turnAt returns the proto of turns[i]: the one among recent (the protos
// of turns[first:]) when it is there, so the evidence holds each turn
// once; the answer and its question always are.
func turnAt(recent []*yesguardv1.Turn, turns []transcript.Turn, first, i int) *yesguardv1.Turn {
	if k := i - first; k >= 0 && k < len(recent) {
		return recent[k]
	}
	return turnProto(turns[i])
}

// matchRoom is how many more matches matchProtos leaves room for in the
// list: rule 5 (aboutAction) adds a few to a question's and answer's.
const matchRoom = 4

// matchProtos converts a then b, in that order, as appendMatches(
// appendMatches(nil, a), b) does, with one allocation for the protos and
// one for the list (nil when both are empty).
func matchProtos(a, b []patterns.Match) []*yesguardv1.Match {
	n := len(a) + len(b)
	if n == 0 {
		return nil
	}
	ps := make([]yesguardv1.Match, n)
	out := make([]*yesguardv1.Match, 0, n+matchRoom)
	for _, ms := range [2][]patterns.Match{a, b} {
		for _, m := range ms {
			p := &ps[len(out)]
			p.Rule, p.Pattern, p.Text = m.Rule, m.Pattern, m.Text
			out = append(out, p)
		}
	}
	return out
}

// appendMatches appends ms to dst as protos, allocated together.
func appendMatches(dst []*yesguardv1.Match, ms []patterns.Match) []*yesguardv1.Match {
	if len(ms) == 0 {
		return dst
	}
	ps := make([]yesguardv1.Match, len(ms))
	for i, m := range ms {
		p := &ps[i]
		p.Rule, p.Pattern, p.Text = m.Rule, m.Pattern, m.Text
		dst = append(dst, p)
	}
	return dst
}

// Clip cuts s to at most n bytes, on a UTF-8 boundary, marking the cut
// with "…": for details quoted from outside input.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

func strconvQuote(s string) string { return strconv.Quote(Clip(s, 160)) }
