package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// printer writes decisions for people: one block per decision, with the
// evidence turns, what matched, and the message for the model.
type printer struct {
	w     io.Writer
	color bool
}

func newPrinter(w io.Writer, e *env) printer {
	_, noColor := e.lookupEnv("NO_COLOR")
	return printer{w: w, color: !noColor && isTerminal(w)}
}

const (
	ansiReset = "\x1b[0m"
	ansiBold  = "\x1b[1m"
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiYell  = "\x1b[33m"
	ansiDim   = "\x1b[2m"
)

func (p printer) paint(code, s string) string {
	if !p.color {
		return s
	}
	return code + s + ansiReset
}

// outcomeName is OUTCOME_REFUSE as REFUSE.
func outcomeName(o yesguardv1.Outcome) string {
	return strings.TrimPrefix(o.String(), "OUTCOME_")
}

// reasonName is REASON_NO_QUESTION as no_question, the metrics label.
func reasonName(r yesguardv1.Reason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "REASON_"))
}

func (p printer) outcome(o yesguardv1.Outcome) string {
	name := outcomeName(o)
	switch o {
	case yesguardv1.Outcome_OUTCOME_ALLOW:
		return p.paint(ansiBold+ansiGreen, name)
	case yesguardv1.Outcome_OUTCOME_REFUSE:
		return p.paint(ansiBold+ansiRed, name)
	default:
		return p.paint(ansiBold+ansiYell, name)
	}
}

// decision writes one decision's block, each line after indent.
func (p printer) decision(d *yesguardv1.Decision, indent string) {
	w := p.w
	switch d.GetKind() {
	case yesguardv1.DecisionKind_DECISION_KIND_COMPLETE:
		p.completion(d, indent)
		return
	case yesguardv1.DecisionKind_DECISION_KIND_REDEEM:
		p.redemption(d, indent)
		return
	}
	head := fmt.Sprintf("%s %s  %s", p.outcome(d.GetOutcome()), reasonName(d.GetReason()), d.GetTool())
	if a := d.GetArgs(); a != "" && a != "{}" {
		head += " " + a
	}
	fmt.Fprintf(w, "%s%s\n", indent, head)
	line := func(label, text string) {
		fmt.Fprintf(w, "%s  %-9s %s\n", indent, label, text)
	}
	id := d.GetDecisionId()
	if t := d.GetTime(); t != nil {
		id += "  at " + t.AsTime().Local().Format("15:04:05.000")
	}
	id += fmt.Sprintf(", waited %d ms", d.GetWaitedMs())
	line("decision", id)
	ev := d.GetEvidence()
	if q := ev.GetQuestion(); q != nil {
		line("question", turn(q))
		if s := ev.GetQuestionSentence(); s != "" && s != q.GetText() {
			line("", "asked "+strconv.Quote(s))
		}
	} else if d.GetOutcome() == yesguardv1.Outcome_OUTCOME_REFUSE || d.GetReason() == yesguardv1.Reason_REASON_CONFIRMED {
		line("question", p.paint(ansiDim, "(none)"))
	}
	if a := ev.GetAnswer(); a != nil {
		line("answer", turn(a))
	}
	for i, m := range ev.GetMatches() {
		label := ""
		if i == 0 {
			label = "matched"
		}
		text := m.GetRule()
		pat, words := m.GetPattern(), m.GetText()
		if pat != "" {
			text += " " + strconv.Quote(pat)
		}
		if words != "" && !strings.EqualFold(words, pat) {
			text += " in " + strconv.Quote(words)
		}
		line(label, text)
	}
	if s := ev.GetDetail(); s != "" {
		line("why", s)
	}
	if s := ev.GetGuardQuestion(); s != "" {
		line("question", "the guard's own ("+s+")")
	}
	if s := d.GetOriginalDecisionId(); s != "" {
		line("original", s)
	}
	if k := d.GetApprovalKeyId(); k != "" {
		line("approval", "signed by key "+k+", expires "+d.GetApprovalExpiresAt().AsTime().Local().Format("15:04:05"))
	}
	if s := d.GetMessage(); s != "" {
		line("model", s)
	}
}

// redemption writes a Redeem record's block: the ALLOW it redeems (when
// the approval verified), its verdict and what the backend was told.
func (p printer) redemption(d *yesguardv1.Decision, indent string) {
	word := "REDEEM REFUSED"
	if d.GetReason() == yesguardv1.Reason_REASON_REDEEMED {
		word = "REDEEMED"
	}
	head := p.paint(ansiBold, word) + " " + reasonName(d.GetReason()) + "  " + d.GetTool()
	if a := d.GetArgs(); a != "" && a != "{}" {
		head += " " + a
	}
	fmt.Fprintf(p.w, "%s%s\n", indent, head)
	line := func(label, text string) {
		if text != "" {
			fmt.Fprintf(p.w, "%s  %-9s %s\n", indent, label, text)
		}
	}
	id := d.GetDecisionId()
	if t := d.GetTime(); t != nil {
		id += "  at " + t.AsTime().Local().Format("15:04:05.000")
	}
	line("record", id)
	line("of", d.GetOriginalDecisionId())
	line("why", d.GetEvidence().GetDetail())
	line("backend", d.GetMessage())
}

// completion writes a Complete record's block: which ALLOW it reports,
// and its result.
func (p printer) completion(d *yesguardv1.Decision, indent string) {
	head := p.paint(ansiBold, strings.ToUpper(reasonName(d.GetReason()))) + "  " + d.GetTool()
	fmt.Fprintf(p.w, "%s%s\n", indent, head)
	line := func(label, text string) { fmt.Fprintf(p.w, "%s  %-9s %s\n", indent, label, text) }
	id := d.GetDecisionId()
	if t := d.GetTime(); t != nil {
		id += "  at " + t.AsTime().Local().Format("15:04:05.000")
	}
	line("record", id)
	line("of", d.GetOriginalDecisionId())
	if r := d.GetResult(); r != "" {
		line("result", r)
	}
}

// turn is `agent: "Shall I submit your appeal?"`, with its audio times
// when the events carried them.
func turn(t *yesguardv1.Turn) string {
	s := t.GetSpeaker() + ": " + strconv.Quote(t.GetText())
	if t.GetEndMs() > 0 {
		s += fmt.Sprintf("  (%.1f–%.1f s)", float64(t.GetStartMs())/1000, float64(t.GetEndMs())/1000)
	}
	if t.GetInterrupted() {
		s += "  (interrupted)"
	}
	return s
}

// decisionOf is the record of a Check answer, for printing: the answer
// lacks the request's fields and the time.
func decisionOf(req *yesguardv1.CheckRequest, resp *yesguardv1.CheckResponse, args string) *yesguardv1.Decision {
	return &yesguardv1.Decision{
		DecisionId:         resp.GetDecisionId(),
		CallId:             req.GetCallId(),
		Tool:               req.GetTool(),
		ToolCallId:         req.GetToolCallId(),
		ResponseId:         req.GetResponseId(),
		Args:               args,
		Outcome:            resp.GetOutcome(),
		Reason:             resp.GetReason(),
		Message:            resp.GetMessage(),
		Evidence:           resp.GetEvidence(),
		WaitedMs:           resp.GetWaitedMs(),
		OriginalDecisionId: resp.GetOriginalDecisionId(),
	}
}

// protoJSON marshals m as the decision log does (proto field names).
func protoJSON(m proto.Message) (json.RawMessage, error) {
	return protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
}

// isTerminal reports whether w is a terminal, where people read.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// ms formats a duration in whole milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
