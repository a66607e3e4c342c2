package guard

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
	// Rules 3 to 6 are the language engine's, in one call. The question
	// is read in its own language: a caller may answer in another
	// language than the agent asked in.
	in := patterns.Input{
		Answer: patterns.Turn{Locale: loc, Text: answer.Text, Tool: c.rs.patternsTool(c.tool, loc)},
		Args:   c.arguments(),
		Bind:   c.tool.entry.Bind,
	}
	if qTurn != nil {
		qLoc := loc
		if l := c.rs.locales.Get(qTurn.Lang); l != nil {
			qLoc = l
		}
		in.Question = &patterns.Turn{Locale: qLoc, Text: qTurn.Text, Tool: c.rs.patternsTool(c.tool, qLoc)}
	}
	verdict := patterns.Judge(in)
	j.statesQuantity = verdict.StatesQuantity
	if verdict.Asked {
		ev.QuestionSentence = verdict.QuestionSentence
	}
	ev.Matches = matchProtos(verdict.Matches)
	if verdict.Outcome.Allows() && c.tool.compound {
		// An unlisted tool whose name joins actions
		// ("submit_appeal_and_close_account"): a yes that names one is no
		// yes to the other.
		return refuse(yesguardv1.Reason_REASON_ACTION_MISMATCH, fmt.Sprintf("the tool's name %q joins several actions, and the policy does not list it: a yes to one of them is not a yes to all", c.tool.name))
	}
	switch verdict.Outcome {
	case patterns.Confirmed:
		j.outcome, j.reason, j.turnID = yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED, answer.ID
		ev.Detail = verdict.Detail
		return j
	case patterns.Instructed:
		j.outcome, j.reason, j.turnID = yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_EXPLICIT_INSTRUCTION, answer.ID
		ev.Detail = verdict.Detail
		return j
	}
	return refuse(judgeReasons[verdict.Outcome], verdict.Detail)
}

// judgeReasons are the proto reasons of the judge's refusals.
var judgeReasons = map[patterns.Outcome]yesguardv1.Reason{
	patterns.Negated:          yesguardv1.Reason_REASON_NEGATED,
	patterns.NotPlain:         yesguardv1.Reason_REASON_NOT_PLAIN,
	patterns.NoQuestion:       yesguardv1.Reason_REASON_NO_QUESTION,
	patterns.ActionMismatch:   yesguardv1.Reason_REASON_ACTION_MISMATCH,
	patterns.QuestionNotPlain: yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN,
	patterns.ArgumentMismatch: yesguardv1.Reason_REASON_ARGUMENT_MISMATCH,
}

// arguments returns the call's arguments as the judge reads them, sorted
// by name so that a decision never depends on map order.
func (c *check) arguments() []patterns.Argument {
	if len(c.args) == 0 {
		return nil
	}
	out := make([]patterns.Argument, 0, len(c.args))
	for name, v := range c.args {
		out = append(out, patterns.Argument{Name: name, Value: v.AsInterface()})
	}
	slices.SortFunc(out, func(a, b patterns.Argument) int { return strings.Compare(a.Name, b.Name) })
	return out
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

// matchProtos converts ms to protos, with one allocation for the protos
// and one for the list (nil when ms is empty).
func matchProtos(ms []patterns.Match) []*yesguardv1.Match {
	if len(ms) == 0 {
		return nil
	}
	ps := make([]yesguardv1.Match, len(ms))
	out := make([]*yesguardv1.Match, len(ms))
	for i, m := range ms {
		p := &ps[i]
		p.Rule, p.Pattern, p.Text = m.Rule, m.Pattern, m.Text
		out[i] = p
	}
	return out
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
