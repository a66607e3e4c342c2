package guard

import (
	"context"
	"strings"
	"time"

	"github.com/yesguard/yesguard/transcript"
)

// look takes the view of the request's call and the channel closed at its
// next change.
func (c *check) look() (view, <-chan struct{}) {
	snap, changed := c.g.cfg.Store.SnapshotTurns(c.req.GetCallId(), c.req.GetResponseId(), recentTurns)
	v := view{snap: snap}
	if snap.Exists {
		skip := c.req.GetResponseId()
		if skip != "" && c.ownSpeechAsks(snap, skip) {
			// The request's own speech is the question, sent with the
			// tool call: it is no filler, and the caller's answer to it
			// is still to come.
			skip = ""
		}
		v.turns = snap.Turns(skip)
		// Agent speech left out as filler settles no gap: for this Check
		// nothing the agent said came after the missing events.
		v.snap.Gap = snap.GapFor(skip)
	}
	return v, changed
}

// ownSpeechAsks reports whether the agent's speech carrying the request's
// own response id asks a question a yes answers. Such speech is skipped as
// filler ("One moment while I submit that.") only when it asks nothing.
func (c *check) ownSpeechAsks(snap transcript.Snapshot, responseID string) bool {
	var text strings.Builder
	lang := snap.Lang
	for i := range snap.Utterances {
		u := &snap.Utterances[i]
		if u.Speaker != transcript.Agent || u.ResponseID != responseID {
			continue
		}
		if text.Len() > 0 {
			text.WriteByte(' ')
		}
		text.WriteString(u.Text)
		if u.Lang != "" {
			lang = u.Lang
		}
	}
	if text.Len() == 0 {
		return false
	}
	if lang == "" {
		lang = c.rs.policy.Defaults.DefaultLang
	}
	loc := c.rs.locales.Get(lang)
	if loc == nil {
		return true // unreadable: not known to be filler
	}
	return loc.Asks(text.String())
}

// waitTurn waits, woken by the call's transcript changes, until the
// caller's current turn is in (see ready), the wait ends (Policy.WaitFor:
// the request's, the tool's or the defaults', never above max_wait), or
// the caller's deadline is near. It returns the view to judge.
func (c *check) waitTurn(ctx context.Context) view {
	t0 := c.g.now()
	limit := c.rs.policy.WaitFor(c.req.Tool, c.req.Wait)
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - deadlineMargin; left < limit {
			limit = max(left, 0)
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		c.waited = c.g.now().Sub(t0)
		c.g.transcriptWait.Observe(c.waited.Seconds())
	}()
	for {
		v, changed := c.look()
		if ready(v, c.req) {
			return v
		}
		if timer == nil {
			timer = time.NewTimer(limit)
		}
		select {
		case <-changed:
		case <-timer.C:
			v, _ = c.look()
			return v
		case <-ctx.Done():
			v, _ = c.look()
			return v
		}
	}
}

// ready reports whether the caller's current turn is complete: the last
// turn is the caller's (the agent has not spoken since, leaving out speech
// of the request's own response), it reaches responding_to_ms when given,
// no caller speech is in flight, and no event the call's publishers
// numbered is missing. An ended call is ready as it is.
func ready(v view, req *Request) bool {
	snap := v.snap
	if !snap.Exists {
		return false
	}
	if snap.Ended {
		return true
	}
	if snap.CallerInFlight || snap.Gap != "" {
		return false
	}
	turns := v.turns
	if len(turns) == 0 {
		return false
	}
	last := &turns[len(turns)-1]
	if last.Speaker != transcript.Caller {
		return false
	}
	if to := req.GetRespondingToMs(); to > 0 && last.HasTimes && last.EndMS < to {
		return false
	}
	return true
}
