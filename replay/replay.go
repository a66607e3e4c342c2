package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/internal/inproc"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// raceTie is how close two Checks of one action must end to have raced
// for its reservation (waited_ms is whole milliseconds, and both were
// woken by the same event).
const raceTie = 5 * time.Millisecond

// cutoffSlack is added to a Check's time plus waited_ms: waited_ms is
// truncated to the millisecond, so the guard's view may include events up
// to a millisecond later.
const cutoffSlack = time.Millisecond

// Options name the rules to replay under.
type Options struct {
	// Policy and LocalesDir are as serve's --policy and --locales-dir.
	Policy, LocalesDir string
}

// Pair is one recorded decision and the decision made now.
type Pair struct {
	Recorded *yesguardv1.Decision
	// Now is the decision under the current policy; nil for a record that
	// is not re-judged (a Redeem).
	Now *guard.Verdict
	// Same: outcome, reason and original decision agree.
	Same bool
	// DetailSame: the evidence's detail agrees too (a Same pair may differ
	// in it: another pattern matched, or the timing of a duplicate).
	DetailSame bool
	// Note says what else happened (a Complete the replay could not apply).
	Note string
}

// Result is one call's replay.
type Result struct {
	CallID string
	// PolicyVersion is the rules replayed under.
	PolicyVersion string
	Pairs         []Pair
	// Events is how many events were applied; Dropped how many did not
	// decode.
	Events, Dropped int
}

// Changed counts the re-judged decisions that differ.
func (r *Result) Changed() int {
	n := 0
	for _, p := range r.Pairs {
		if isCheck(p.Recorded) && !p.Same {
			n++
		}
	}
	return n
}

// Replay re-judges one call on an engine of its own.
func Replay(ctx context.Context, c *Call, o Options) (*Result, error) {
	var clock atomic.Int64 // unix nanoseconds
	var feed atomic.Pointer[feedState]
	eng, err := inproc.New(o.Policy, o.LocalesDir, inproc.Options{
		Now: func() time.Time { return time.Unix(0, clock.Load()) },
		Feed: func() (guard.FeedState, string) {
			if f := feed.Load(); f != nil {
				return f.state, f.why
			}
			return guard.FeedLive, ""
		},
	})
	if err != nil {
		return nil, err
	}
	res := &Result{CallID: c.ID, PolicyVersion: eng.Guard.PolicyVersion(), Dropped: c.Dropped}
	next := 0 // the next event to apply
	// applyUntil applies the events that arrived by t, and those the
	// record d shows the guard held (by their publisher's seq).
	applyUntil := func(t time.Time, d *yesguardv1.Decision) {
		held := heldSeq(d)
		for ; next < len(c.Events); next++ {
			e := c.Events[next]
			if e.ReceivedAt.After(t) && (e.Event.Seq == 0 || e.Event.Seq > held) {
				break
			}
			if ok, _ := eng.Store.Apply(e.Event, e.ReceivedAt); ok {
				res.Events++
			}
		}
	}
	// A context already ended: the wait returns at once, judging the
	// events applied (what the guard held when it decided).
	done, cancel := context.WithCancel(ctx)
	cancel()

	for _, s := range schedule(c.Records) {
		d := s.rec
		p := Pair{Recorded: d}
		switch d.GetKind() {
		case yesguardv1.DecisionKind_DECISION_KIND_COMPLETE:
			applyUntil(s.at, nil)
			clock.Store(s.at.UnixNano())
			var result *structpb.Struct
			if d.GetResult() != "" {
				result = new(structpb.Struct)
				if err := result.UnmarshalJSON([]byte(d.GetResult())); err != nil {
					result = nil
				}
			}
			failed := d.GetReason() == yesguardv1.Reason_REASON_FAILED
			if _, err := eng.Book.Complete(ctx, d.GetOriginalDecisionId(), dedupe.AnyOwner, result, failed); err != nil {
				p.Note = fmt.Sprintf("not applied: %v (the replay did not allow %s)", err, d.GetOriginalDecisionId())
			}
			p.Same = true
		case yesguardv1.DecisionKind_DECISION_KIND_REDEEM:
			p.Note = "a Redeem: not re-judged"
			p.Same = true
		default:
			applyUntil(s.at.Add(cutoffSlack), d)
			clock.Store(s.at.UnixNano())
			feed.Store(feedOf(d))
			req, err := request(d)
			if err != nil {
				p.Note = err.Error()
				res.Pairs = append(res.Pairs, p)
				continue
			}
			v := eng.Guard.Check(done, req)
			feed.Store(nil)
			p.Now = v
			p.Same = v.Outcome == d.GetOutcome() && v.Reason == d.GetReason() && v.OriginalDecisionID == d.GetOriginalDecisionId()
			p.DetailSame = p.Same && v.GetEvidence().GetDetail() == d.GetEvidence().GetDetail()
		}
		res.Pairs = append(res.Pairs, p)
	}
	return res, nil
}

// heldSeq is the largest seq of the events the record's evidence shows
// the guard held: its turns name their last event's seq. The record's time
// is taken before the Check's wait starts, so the event that woke the wait
// may have arrived a little after time plus waited_ms; its seq says the
// guard had it. (Publishers that number per source compare per source
// once events carry it.)
func heldSeq(d *yesguardv1.Decision) uint64 {
	var held uint64
	ev := d.GetEvidence()
	for _, t := range append([]*yesguardv1.Turn{ev.GetQuestion(), ev.GetAnswer()}, ev.GetRecentTurns()...) {
		held = max(held, t.GetLastSeq())
	}
	return held
}

type feedState struct {
	state guard.FeedState
	why   string
}

// feedOf is the feed's state a Check was judged with, as its record says.
func feedOf(d *yesguardv1.Decision) *feedState {
	switch d.GetReason() {
	case yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE:
		return &feedState{guard.FeedDown, d.GetEvidence().GetDetail()}
	case yesguardv1.Reason_REASON_TRANSCRIPT_GAP:
		// Behind the stream, or a publisher's seq skipped events: either
		// way the guard could not vouch for the call's events then.
		return &feedState{guard.FeedBehind, d.GetEvidence().GetDetail()}
	}
	return nil
}

// request is the Check a record answered. Its arguments are the record's
// (redacted arguments replay as redacted); its hash, decision id and
// response id are the record's, so that Completes and repeats match.
func request(d *yesguardv1.Decision) (guard.Request, error) {
	req := guard.Request{CallID: d.GetCallId(), Tool: d.GetTool(), ArgsHash: d.GetArgsHash(), DecisionID: d.GetDecisionId(), ResponseID: d.GetResponseId()}
	if a := d.GetArgs(); a != "" {
		var m map[string]any
		if err := json.Unmarshal([]byte(a), &m); err != nil {
			return req, fmt.Errorf("args of %s do not parse: %v", d.GetDecisionId(), err)
		}
		st, err := structpb.NewStruct(m)
		if err != nil {
			return req, fmt.Errorf("args of %s: %v", d.GetDecisionId(), err)
		}
		req.Args = st
	}
	return req, nil
}

// step is one record at the moment it takes effect: a Check when it
// ended, a Complete when it was reported.
type step struct {
	rec *yesguardv1.Decision
	at  time.Time
}

func schedule(recs []*yesguardv1.Decision) []step {
	out := make([]step, 0, len(recs))
	for _, d := range recs {
		at := d.GetTime().AsTime()
		if isCheck(d) {
			at = at.Add(time.Duration(d.GetWaitedMs()) * time.Millisecond)
		}
		out = append(out, step{d, at})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	// Checks of one action that ended together raced for its
	// reservation: the recorded winner goes first.
	for i := 1; i < len(out); i++ {
		a, b := out[i-1], out[i]
		if isCheck(a.rec) && isCheck(b.rec) && b.at.Sub(a.at) <= raceTie &&
			a.rec.GetTool() == b.rec.GetTool() && a.rec.GetArgsHash() == b.rec.GetArgsHash() &&
			b.rec.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW && a.rec.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			out[i-1], out[i] = b, a
		}
	}
	// A Complete's record is written after the book has its result: a
	// duplicate of the action that ended just before the record's time,
	// and saw its original done, came after the Complete took effect.
	for i := 1; i < len(out); i++ {
		a, b := out[i-1], out[i]
		if b.rec.GetKind() == yesguardv1.DecisionKind_DECISION_KIND_COMPLETE && isCheck(a.rec) && b.at.Sub(a.at) <= raceTie &&
			a.rec.GetOutcome() == yesguardv1.Outcome_OUTCOME_DUPLICATE && a.rec.GetOriginalDecisionId() == b.rec.GetOriginalDecisionId() &&
			a.rec.GetEvidence().GetDetail() == guard.DetailOriginalDone {
			out[i-1], out[i] = b, a
		}
	}
	return out
}

func isCheck(d *yesguardv1.Decision) bool {
	k := d.GetKind()
	return k == yesguardv1.DecisionKind_DECISION_KIND_CHECK || k == yesguardv1.DecisionKind_DECISION_KIND_UNSPECIFIED
}
