package timeline

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// What the templates render: plain values, worked out here, so that the
// templates only lay them out (and html/template escapes every one).

// segment is a run of text, highlighted or not.
type segment struct {
	Text string
	Mark bool
	// Class is the mark's: "q" for a question sentence, "a" for an answer.
	Class string
}

// turnView is one turn of the call.
type turnView struct {
	Anchor  string
	Speaker string
	Text    []segment
	Lang    string
	// Audio is the turn's audio time ("1.20-2.40 s"), "" when unknown.
	Audio string
	// Arrived is when its last event reached the guard ("12:10:51.502"),
	// At its offset from the call's first moment ("+1.502 s").
	Arrived, At string
	Interrupted bool
	// Roles says which checks took it as question or answer.
	Roles []string
	// Marked: some check took it as its question or answer.
	Marked bool

	arrived              time.Time
	firstSeq             uint64
	raw                  string
	audioStart, audioEnd int64 // ms; audioEnd 0 when unknown
}

// matchView is one thing a rule matched.
type matchView struct{ Rule, Pattern, Text string }

// checkView is one decision record.
type checkView struct {
	N          int
	Anchor     string
	DecisionID string
	Kind       string // "check", "complete", "redeem"
	Tool       string
	Args       string
	Outcome    string // ALLOW, REFUSE, ...
	Class      string // allow, refuse, repeat, neutral
	Reason     string // negated
	// Why is the one line saying why: the reason in words and the detail.
	Why     string
	Message string
	// MessageTo is whom the message is for: the model (a Check's), the
	// backend (a Redeem's), the pipeline (a Complete's).
	MessageTo string
	Arrived   string
	At        string
	Waited    string
	Decided   string // offset of time + waited
	Question  []segment
	// QuestionFound is false when the question sentence could not be
	// found in its turn's text; it is then shown apart.
	QuestionFound    bool
	QuestionSentence string
	QuestionAt       string
	// GuardQuestion is the id of the guard's own question, when the
	// question was one it issued.
	GuardQuestion      string
	Answer             string
	AnswerAt           string
	Matches            []matchView
	OriginalDecisionID string
	OriginalN          int
	Result             string
	PolicyVersion      string
	Replica            string
	Lang               string
	Refused            bool

	time   time.Time
	waited time.Duration
}

// rowView is one row of the call's story: a turn or a decision.
type rowView struct {
	Turn  *turnView
	Check *checkView
}

// markView is one mark on a time axis.
type markView struct {
	Class string // agent, caller, allow, refuse, repeat, neutral
	Left  string // percent, "12.34"
	Width string // percent; "" for a point
	Href  string
	Title string
	Label string
	// LabelX places the label (percent): inside the mark when LabelIn,
	// else after its end.
	LabelX  string
	LabelIn bool
	// Y and LabelY place a tick's grid line end and label (px).
	Y, LabelY int
}

// laneView is one row of a time axis, laid out in px from the top.
type laneView struct {
	Name                       string
	Marks                      []markView
	Y, H, MarkY, MarkH, LabelY int
}

// axisView is a time axis: its lanes and its ticks.
type axisView struct {
	Title  string
	Note   string
	Lanes  []laneView
	Ticks  []markView
	Height int
}

// The axes' geometry, in px.
const (
	laneH   = 30
	laneGap = 6
	tickH   = 22
)

// layout places the lanes one under the other and the ticks below them.
func (a *axisView) layout() {
	y := 0
	for i := range a.Lanes {
		l := &a.Lanes[i]
		l.Y, l.H = y, laneH
		l.MarkY, l.MarkH = y+6, laneH-12
		l.LabelY = y + laneH - 10
		y += laneH + laneGap
	}
	for i := range a.Ticks {
		a.Ticks[i].Y = y - laneGap
		a.Ticks[i].LabelY = y + tickH - 6
	}
	a.Height = y + tickH
}

// callView is a call's page.
type callView struct {
	CallID   string
	Date     string
	Started  string
	Counts   []countView
	Axes     []axisView
	Rows     []rowView
	Checks   []*checkView
	Refusals []*checkView
	// Kept is set when the guard no longer holds the call's transcript:
	// the turns shown are those its records kept.
	Kept     bool
	SignedIn bool
	// First is the number of the page's first record; Next, the URL of
	// the page after it ("" when none follows); Paged, that this is not
	// the call's first page.
	First int
	Next  string
	Paged bool
}

// Title names the page.
func (v *callView) Title() string { return "Call " + v.CallID }

// Title names the page.
func (listView) Title() string { return "Recent calls" }

// Title names the page.
func (loginPage) Title() string { return "Sign in" }

type countView struct {
	Class, Label string
	N            int
}

// callPage builds a call's page from its records (oldest first) and its
// transcript as the engine holds it.
func callPage(id string, recs []*yesguardv1.Decision, transcript []*yesguardv1.Turn, first int) *callView {
	v := &callView{CallID: id, First: first}
	turns := mergeTurns(transcript, recs)
	v.Kept = len(transcript) == 0 && len(turns) > 0

	var t0 time.Time
	for _, t := range turns {
		if !t.arrived.IsZero() && (t0.IsZero() || t.arrived.Before(t0)) {
			t0 = t.arrived
		}
	}
	for _, d := range recs {
		if at := d.GetTime().AsTime(); d.GetTime() != nil && (t0.IsZero() || at.Before(t0)) {
			t0 = at
		}
	}
	if !t0.IsZero() {
		v.Date = t0.UTC().Format("Monday 2 January 2006")
		v.Started = clock(t0)
	}

	byID := map[string]*checkView{}
	counts := map[string]int{}
	for i, d := range recs {
		c := checkOf(first+i, d, t0)
		byID[c.DecisionID] = c
		v.Checks = append(v.Checks, c)
		if c.Kind == "check" {
			counts[c.Class]++
		}
		if c.Refused {
			v.Refusals = append(v.Refusals, c)
		}
	}
	for _, c := range v.Checks {
		if o := byID[c.OriginalDecisionID]; o != nil {
			c.OriginalN = o.N
		}
	}
	for _, k := range []struct{ class, label string }{{"allow", "allowed"}, {"refuse", "refused"}, {"repeat", "repeats"}} {
		if counts[k.class] > 0 {
			v.Counts = append(v.Counts, countView{Class: k.class, Label: k.label, N: counts[k.class]})
		}
	}

	// Which turn each check took as question and answer.
	for _, c := range v.Checks {
		d := recs[c.N-first]
		ev := d.GetEvidence()
		if q := findTurn(turns, ev.GetQuestion()); q != nil {
			q.Roles = append(q.Roles, fmt.Sprintf("question of #%d", c.N))
			q.Marked = true
			if segs, ok := highlight(q.raw, ev.GetQuestionSentence()); ok && !hasMark(q.Text) {
				q.Text = segs
			}
		}
		if a := findTurn(turns, ev.GetAnswer()); a != nil {
			a.Roles = append(a.Roles, fmt.Sprintf("answer of #%d", c.N))
			a.Marked = true
			a.Text = highlightAnswer(a.raw, ev.GetAnswer().GetText())
		}
	}
	for i := range turns {
		turns[i].At = offset(turns[i].arrived, t0)
	}

	// The story: turns by arrival, each decision at its time.
	for i := range turns {
		v.Rows = append(v.Rows, rowView{Turn: &turns[i]})
	}
	for _, c := range v.Checks {
		v.Rows = append(v.Rows, rowView{Check: c})
	}
	sort.SliceStable(v.Rows, func(i, j int) bool { return rowTime(v.Rows[i]).Before(rowTime(v.Rows[j])) })

	v.Axes = axes(turns, v.Checks, t0)
	return v
}

func hasMark(segs []segment) bool {
	for _, s := range segs {
		if s.Mark {
			return true
		}
	}
	return false
}

func rowTime(r rowView) time.Time {
	if r.Turn != nil {
		return r.Turn.arrived
	}
	return r.Check.time
}

// turnKey names a turn across the records that hold it: by its speaker and
// first seq when the publisher numbered it, else by its words and arrival.
func turnKey(t *yesguardv1.Turn) string {
	if t.GetFirstSeq() > 0 {
		return t.GetSpeaker() + "#" + strconv.FormatUint(t.GetFirstSeq(), 10)
	}
	return t.GetSpeaker() + "|" + t.GetText() + "|" + t.GetReceivedAt().AsTime().String()
}

// mergeTurns is the call's turns: the transcript the engine holds, and
// before it (or instead, once the engine has dropped the call) the turns
// the records kept as evidence. Of one turn seen at several moments, the
// latest (largest last seq) stands.
func mergeTurns(transcript []*yesguardv1.Turn, recs []*yesguardv1.Decision) []turnView {
	type kept struct {
		t     *yesguardv1.Turn
		order int
	}
	byKey := map[string]kept{}
	var first time.Time
	for i, t := range transcript {
		byKey[turnKey(t)] = kept{t, i}
		if at := t.GetReceivedAt().AsTime(); t.GetReceivedAt() != nil && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	fromTranscript := len(byKey)
	n := len(transcript)
	add := func(t *yesguardv1.Turn) {
		if t == nil || t.GetText() == "" {
			return
		}
		// Beside a transcript, only turns older than it: the rest are
		// earlier views of turns it holds.
		if fromTranscript > 0 && !first.IsZero() && !t.GetReceivedAt().AsTime().Before(first) {
			return
		}
		k := turnKey(t)
		if old, ok := byKey[k]; ok && old.t.GetLastSeq() >= t.GetLastSeq() {
			return
		}
		byKey[k] = kept{t, n}
		n++
	}
	for _, d := range recs {
		ev := d.GetEvidence()
		for _, t := range ev.GetRecentTurns() {
			add(t)
		}
		add(ev.GetQuestion())
		add(ev.GetAnswer())
	}
	list := make([]kept, 0, len(byKey))
	for _, k := range byKey {
		list = append(list, k)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i].t, list[j].t
		ta, tb := a.GetReceivedAt().AsTime(), b.GetReceivedAt().AsTime()
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		if a.GetFirstSeq() != b.GetFirstSeq() {
			return a.GetFirstSeq() < b.GetFirstSeq()
		}
		return list[i].order < list[j].order
	})
	out := make([]turnView, len(list))
	for i, k := range list {
		t := k.t
		tv := turnView{
			Anchor:      fmt.Sprintf("turn-%d", i+1),
			Speaker:     t.GetSpeaker(),
			Text:        []segment{{Text: t.GetText()}},
			Lang:        t.GetLang(),
			Interrupted: t.GetInterrupted(),
			firstSeq:    t.GetFirstSeq(),
			raw:         t.GetText(),
		}
		if t.GetReceivedAt() != nil {
			tv.arrived = t.GetReceivedAt().AsTime()
			tv.Arrived = clock(tv.arrived)
		}
		if t.GetEndMs() > 0 {
			tv.audioStart, tv.audioEnd = t.GetStartMs(), t.GetEndMs()
			tv.Audio = fmt.Sprintf("%s-%s s", seconds(t.GetStartMs()), seconds(t.GetEndMs()))
		}
		out[i] = tv
	}
	return out
}

// findTurn is the turn of the call that t (a record's view of it) is.
func findTurn(turns []turnView, t *yesguardv1.Turn) *turnView {
	if t == nil || t.GetText() == "" {
		return nil
	}
	for i := range turns {
		tv := &turns[i]
		if tv.Speaker != t.GetSpeaker() {
			continue
		}
		if t.GetFirstSeq() > 0 && tv.firstSeq == t.GetFirstSeq() {
			return tv
		}
		if t.GetFirstSeq() == 0 && strings.HasPrefix(tv.raw, t.GetText()) && !tv.arrived.Before(t.GetReceivedAt().AsTime()) {
			return tv
		}
	}
	return nil
}

// checkOf is record d, the n-th of the call.
func checkOf(n int, d *yesguardv1.Decision, t0 time.Time) *checkView {
	ev := d.GetEvidence()
	c := &checkView{
		N:                  n,
		Anchor:             fmt.Sprintf("decision-%d", n),
		DecisionID:         d.GetDecisionId(),
		Tool:               d.GetTool(),
		Args:               d.GetArgs(),
		Outcome:            strings.TrimPrefix(d.GetOutcome().String(), "OUTCOME_"),
		Reason:             strings.ToLower(strings.TrimPrefix(d.GetReason().String(), "REASON_")),
		Message:            d.GetMessage(),
		OriginalDecisionID: d.GetOriginalDecisionId(),
		Result:             d.GetResult(),
		PolicyVersion:      d.GetPolicyVersion(),
		Replica:            d.GetReplica(),
		Lang:               ev.GetLang(),
		QuestionSentence:   ev.GetQuestionSentence(),
		GuardQuestion:      ev.GetGuardQuestion(),
		Answer:             ev.GetAnswer().GetText(),
		waited:             time.Duration(d.GetWaitedMs()) * time.Millisecond,
	}
	if c.Args == "{}" {
		c.Args = ""
	}
	switch d.GetKind() {
	case yesguardv1.DecisionKind_DECISION_KIND_COMPLETE:
		c.Kind, c.Outcome, c.Class, c.MessageTo = "complete", "COMPLETE", "neutral", "the pipeline"
	case yesguardv1.DecisionKind_DECISION_KIND_REDEEM:
		// The backend's claim of an ALLOW, not a judgement of the caller.
		c.Kind, c.Outcome, c.MessageTo = "redeem", "REDEEM", "the backend"
		if d.GetReason() != yesguardv1.Reason_REASON_REDEEMED {
			c.Outcome = "REDEEM REFUSED"
		}
	default:
		c.Kind, c.MessageTo = "check", "the model"
	}
	if c.Class == "" {
		c.Class = outcomeClass(d.GetOutcome())
	}
	c.Refused = c.Kind == "check" && d.GetOutcome() == yesguardv1.Outcome_OUTCOME_REFUSE
	c.Why = why(d.GetReason(), ev.GetDetail())
	if d.GetTime() != nil {
		c.time = d.GetTime().AsTime()
		c.Arrived = clock(c.time)
		c.At = offset(c.time, t0)
		if c.Kind == "check" {
			c.Decided = offset(c.time.Add(c.waited), t0)
		}
	}
	if c.Kind == "check" {
		c.Waited = fmt.Sprintf("%d ms", d.GetWaitedMs())
	}
	if q := ev.GetQuestion(); q != nil {
		c.Question, c.QuestionFound = highlight(q.GetText(), c.QuestionSentence)
		if q.GetReceivedAt() != nil {
			c.QuestionAt = offset(q.GetReceivedAt().AsTime(), t0)
		}
	}
	if a := ev.GetAnswer(); a != nil && a.GetReceivedAt() != nil {
		c.AnswerAt = offset(a.GetReceivedAt().AsTime(), t0)
	}
	for _, m := range ev.GetMatches() {
		c.Matches = append(c.Matches, matchView{Rule: m.GetRule(), Pattern: m.GetPattern(), Text: m.GetText()})
	}
	return c
}

func outcomeClass(o yesguardv1.Outcome) string {
	switch o {
	case yesguardv1.Outcome_OUTCOME_ALLOW:
		return "allow"
	case yesguardv1.Outcome_OUTCOME_REFUSE:
		return "refuse"
	case yesguardv1.Outcome_OUTCOME_DUPLICATE, yesguardv1.Outcome_OUTCOME_IGNORED:
		return "repeat"
	}
	return "neutral"
}

// axes lays the turns and the checks on two time axes: arrival at the
// guard (where the checks are too), and audio time when the publisher gave
// it.
func axes(turns []turnView, checks []*checkView, t0 time.Time) []axisView {
	if t0.IsZero() {
		return nil
	}
	end := t0
	for _, t := range turns {
		if t.arrived.After(end) {
			end = t.arrived
		}
	}
	for _, c := range checks {
		if e := c.time.Add(c.waited); e.After(end) {
			end = e
		}
	}
	span := end.Sub(t0)
	if span < 200*time.Millisecond {
		span = 200 * time.Millisecond
	}
	span += span / 20 // room for the last label
	pos := func(t time.Time) float64 { return 100 * float64(t.Sub(t0)) / float64(span) }

	arrival := axisView{Title: "Arrival at the guard", Note: "when each turn's last event, and each Check, reached the guard"}
	agent, caller := laneView{Name: "agent"}, laneView{Name: "caller"}
	for _, t := range turns {
		if t.arrived.IsZero() {
			continue
		}
		m := markView{Class: t.Speaker, Left: pct(pos(t.arrived)), Href: "#" + t.Anchor, Title: fmt.Sprintf("%s %s: %s", t.At, t.Speaker, clip(t.raw, 120))}
		if t.Speaker == "caller" {
			caller.Marks = append(caller.Marks, m)
		} else {
			agent.Marks = append(agent.Marks, m)
		}
	}
	checkLane := laneView{Name: "checks"}
	for _, c := range checks {
		if c.time.IsZero() {
			continue
		}
		m := markView{Class: c.Class, Left: pct(pos(c.time)), Href: "#" + c.Anchor, Label: fmt.Sprintf("#%d", c.N), LabelX: pct(pos(c.time))}
		if c.Kind == "check" {
			w := max(pos(c.time.Add(c.waited))-pos(c.time), 0.6)
			m.Width, m.LabelX = pct(w), pct(pos(c.time)+w)
			if w >= 4 {
				// Room inside the bar: the label stays on its own check.
				m.LabelX, m.LabelIn = m.Left, true
			}
			m.Title = fmt.Sprintf("#%d %s %s at %s, waited %s: %s", c.N, c.Outcome, c.Reason, c.At, c.Waited, c.Why)
		} else {
			m.Title = fmt.Sprintf("#%d %s at %s", c.N, c.Kind, c.At)
		}
		checkLane.Marks = append(checkLane.Marks, m)
	}
	arrival.Lanes = []laneView{agent, caller, checkLane}
	arrival.Ticks = ticks(span, func(d time.Duration) float64 { return 100 * float64(d) / float64(span) }, func(d time.Duration) string {
		return "+" + seconds(d.Milliseconds()) + " s"
	})
	arrival.layout()
	out := []axisView{arrival}

	// Audio time, for the turns that carry it.
	var a1 int64
	var audioTurns []turnView
	for _, t := range turns {
		if t.Audio != "" {
			audioTurns = append(audioTurns, t)
		}
	}
	if len(audioTurns) == 0 {
		return out
	}
	for _, t := range audioTurns {
		a1 = max(a1, t.audioEnd)
	}
	aspan := time.Duration(a1) * time.Millisecond
	aspan += aspan / 20
	if aspan <= 0 {
		return out
	}
	apos := func(ms int64) float64 { return 100 * float64(time.Duration(ms)*time.Millisecond) / float64(aspan) }
	audio := axisView{Title: "Audio time", Note: "when each turn was spoken, in ms since the call started, as the pipeline stamped it"}
	agent, caller = laneView{Name: "agent"}, laneView{Name: "caller"}
	for _, t := range audioTurns {
		m := markView{Class: t.Speaker, Left: pct(apos(t.audioStart)), Width: pct(max(apos(t.audioEnd)-apos(t.audioStart), 0.6)), Href: "#" + t.Anchor,
			Title: fmt.Sprintf("%s s %s: %s", t.Audio, t.Speaker, clip(t.raw, 120))}
		if t.Speaker == "caller" {
			caller.Marks = append(caller.Marks, m)
		} else {
			agent.Marks = append(agent.Marks, m)
		}
	}
	audio.Lanes = []laneView{agent, caller}
	audio.Ticks = ticks(aspan, func(d time.Duration) float64 { return 100 * float64(d) / float64(aspan) }, func(d time.Duration) string {
		return seconds(d.Milliseconds()) + " s"
	})
	audio.layout()
	return append(out, audio)
}

// ticks are five to ten round marks along span.
func ticks(span time.Duration, pos func(time.Duration) float64, label func(time.Duration) string) []markView {
	step := 100 * time.Millisecond
	for _, s := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour} {
		step = s
		if span/s <= 8 {
			break
		}
	}
	var out []markView
	for d := time.Duration(0); d <= span; d += step {
		out = append(out, markView{Left: pct(pos(d)), Label: label(d)})
	}
	return out
}

func pct(f float64) string { return strconv.FormatFloat(min(max(f, 0), 100), 'f', 2, 64) }

// seconds is ms as seconds with up to three decimals: 1200 is "1.2".
func seconds(ms int64) string {
	s := strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// clock is t in UTC to the millisecond.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// offset is t's distance from t0: "+1.502 s".
func offset(t, t0 time.Time) string {
	if t.IsZero() || t0.IsZero() {
		return ""
	}
	d := t.Sub(t0)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + " s"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// recentView is one row of /calls.
type recentView struct {
	CallID, Tool, Outcome, Class, Reason, Why, When, Ago string
}

type listView struct {
	Calls    []recentView
	SignedIn bool
}

func listPage(recs []*yesguardv1.Decision, now time.Time, signedIn bool) listView {
	v := listView{SignedIn: signedIn}
	for _, d := range recs {
		c := checkOf(1, d, time.Time{})
		r := recentView{CallID: d.GetCallId(), Tool: c.Tool, Outcome: c.Outcome, Class: c.Class, Reason: c.Reason, Why: c.Why}
		if d.GetTime() != nil {
			at := d.GetTime().AsTime()
			r.When = at.UTC().Format("2006-01-02 15:04:05")
			r.Ago = ago(now.Sub(at))
		}
		v.Calls = append(v.Calls, r)
	}
	return v
}

func ago(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}
