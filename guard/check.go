package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// deadlineMargin is kept back from the caller's deadline so that a wait
// cut short by it still leaves time to answer.
const deadlineMargin = 20 * time.Millisecond

// defaultDuplicateWait bounds how long a duplicate waits for a running
// original's result (Config.DuplicateWait).
const defaultDuplicateWait = 500 * time.Millisecond

// evidenceTTL is how long a caller turn's use is remembered: longer than
// any turn stays fresh (max_answer_age) and than a call stays held.
const evidenceTTL = 15 * time.Minute

// New builds a guard. It fails when the policy names a language no locale
// covers.
func New(cfg Config) (*Guard, error) {
	if cfg.Store == nil || cfg.Book == nil {
		return nil, errors.New("guard: a transcript store and a dedupe book are required")
	}
	rs, err := newRuleset(cfg.Policy, cfg.Locales)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.DuplicateWait <= 0 {
		cfg.DuplicateWait = defaultDuplicateWait
	}
	if err := askSetup(&cfg); err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg}
	g.metricsOf(cfg.Registerer)
	g.rules.Store(rs)
	return g, nil
}

// Reload swaps the policy and locales atomically; checks under way finish
// with the rules they started with. On error the old rules stay.
func (g *Guard) Reload(p *Policy, l *patterns.Set) error {
	rs, err := newRuleset(p, l)
	if err != nil {
		return err
	}
	if err := checkAskLangs(p, g.cfg.AskLocales); err != nil {
		return err
	}
	g.rules.Store(rs)
	return nil
}

// PolicyVersion identifies the rules in force.
func (g *Guard) PolicyVersion() string { return g.rules.Load().version }

// DefaultLang is the policy's language for turns and calls that name none.
func (g *Guard) DefaultLang() string { return g.rules.Load().policy.Defaults.DefaultLang }

func (g *Guard) now() time.Time { return g.cfg.Now() }

// Check judges one tool call. It always returns a verdict: whatever fails
// inside refuses.
func (g *Guard) Check(ctx context.Context, req Request) *Verdict {
	g.inFlight.Inc()
	defer g.inFlight.Dec()
	// A call a Check asks about is never evicted to make room for new
	// calls, and not at all while the Check runs.
	defer g.cfg.Store.Hold(req.CallID)()
	rs := g.rules.Load()
	if req.DecisionID == "" {
		req.DecisionID = ulid.Make().String()
	}
	c := &check{
		g: g, rs: rs, tool: rs.tool(req.Tool), req: &req, start: g.now(),
		args: req.Args.GetFields(),
		v: &Verdict{
			DecisionID:    req.DecisionID,
			PolicyVersion: rs.version,
		},
	}
	_, c.v.ToolListed = rs.tools[req.Tool]
	return c.run(ctx)
}

// Transcript returns the call's turns as the engine holds them, oldest
// first (nil for an unknown call).
func (g *Guard) Transcript(callID string) []*yesguardv1.Turn {
	snap, _ := g.cfg.Store.Snapshot(callID)
	if !snap.Exists {
		return nil
	}
	return turnProtos(snap.Turns(""))
}

// check is one Check under way.
type check struct {
	g     *Guard
	rs    *ruleset
	tool  *toolRules
	req   *Request
	args  map[string]*structpb.Value
	start time.Time
	v     *Verdict

	waited time.Duration
}

// run decides and completes the verdict. A panic inside the rules becomes
// a REFUSE, never a lost decision.
func (c *check) run(ctx context.Context) (v *Verdict) {
	defer func() {
		if r := recover(); r != nil {
			c.g.cfg.Logger.Error("check panicked; refusing", zap.Any("panic", r), zap.String("decision_id", c.v.DecisionID))
			c.v.Message = ""
			c.refuse(yesguardv1.Reason_REASON_INTERNAL, &yesguardv1.Evidence{Detail: "internal error"})
			c.v.Turn = nil
			v = c.finish()
		}
	}()
	c.decide(ctx)
	v = c.finish()
	c.offerAsk(ctx)
	return v
}

// finish fills in what every verdict carries.
func (c *check) finish() *Verdict {
	v := c.v
	v.Waited = c.waited
	if v.Evidence == nil {
		v.Evidence = &yesguardv1.Evidence{}
	}
	if v.Message == "" {
		v.Message = message(v.Outcome, v.Reason, c.tool.name, func() phrasing { return c.rs.phrasing(c.tool, c.lang()) }, v.Evidence.GetDetail())
	}
	return v
}

func (c *check) lang() string {
	if l := c.v.Evidence.GetLang(); l != "" {
		return l
	}
	return c.rs.policy.Defaults.DefaultLang
}

func (c *check) set(outcome yesguardv1.Outcome, reason yesguardv1.Reason) {
	c.v.Outcome, c.v.Reason = outcome, reason
}

func (c *check) refuse(reason yesguardv1.Reason, ev *yesguardv1.Evidence) {
	c.set(yesguardv1.Outcome_OUTCOME_REFUSE, reason)
	c.v.Evidence = ev
}

// bookFailed refuses because the book did not answer.
func (c *check) bookFailed(err error) {
	c.g.cfg.Logger.Warn("dedupe book did not answer; refusing", zap.Error(err), zap.String("decision_id", c.v.DecisionID))
	c.refuse(yesguardv1.Reason_REASON_INTERNAL, &yesguardv1.Evidence{Detail: "the shared decision state did not answer: " + Clip(err.Error(), 160)})
}

// feedRefusal refuses when the transcript feed cannot vouch for the
// call's events; it reports whether it did.
func (c *check) feedRefusal() bool {
	if c.g.cfg.Feed == nil {
		return false
	}
	switch state, why := c.g.cfg.Feed(); state {
	case FeedDown:
		c.refuse(yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE, &yesguardv1.Evidence{Detail: why})
		return true
	case FeedBehind:
		c.gap(why)
		return true
	}
	return false
}

// gap refuses because events of the call may be missing, with a message
// saying why (messages.go has none for this reason).
func (c *check) gap(why string) {
	c.refuse(yesguardv1.Reason_REASON_TRANSCRIPT_GAP, &yesguardv1.Evidence{Detail: why})
	action := c.tool.describe(c.rs.policy.Defaults.DefaultLang)
	c.v.Message = "The guard is missing part of this call's transcript (" + why + "), so the caller's consent cannot be checked. Do not " +
		action + " yet: ask the caller plainly whether to " + action + ", wait for their answer, and call " + c.tool.name + " again."
}

// decide fills c.v with the outcome.
func (c *check) decide(ctx context.Context) {
	g, pol := c.g, c.rs.policy.Defaults
	if c.feedRefusal() {
		return
	}
	if c.req.ArgsHash == "" {
		b, err := approval.CanonicalArgs(c.req.Args)
		if err != nil {
			c.refuse(yesguardv1.Reason_REASON_INTERNAL, &yesguardv1.Evidence{Detail: "args: " + err.Error()})
			return
		}
		c.req.ArgsHash = approval.ArgsHash(b)
	}
	qtySet := c.tool.quantitySet(c.args)
	req := dedupe.Request{
		Key:         dedupe.Key{CallID: c.req.CallID, Tool: c.req.Tool, ArgsHash: c.req.ArgsHash},
		DecisionID:  c.v.DecisionID,
		Now:         c.start,
		Window:      pol.DuplicateWindow.D(),
		EvidenceTTL: evidenceTTL,
		Item:        c.tool.itemKey(c.args),
		ItemWindow:  pol.QuantityWindow.D(),
		Owner:       c.req.Owner,
	}
	for attempt := 0; attempt < 2; attempt++ {
		// A repeat already known needs no transcript.
		v, r, err := g.cfg.Book.Lookup(ctx, req)
		switch {
		case err != nil:
			c.bookFailed(err)
			return
		case v == dedupe.Duplicate:
			if c.duplicate(ctx, r) {
				continue // the original failed: judge afresh
			}
			return
		case v == dedupe.QuantityRepeat && !qtySet:
			c.ignored(r, nil)
			return
		}

		var verdict judgement
		if c.tool.confirm() || (qtySet && req.Item != "") {
			if !c.settleIfLagging(ctx) {
				return
			}
			view := c.waitTurn(ctx)
			for settled := false; ; settled = true {
				// The feed may have gone down or fallen behind during the
				// wait.
				if c.feedRefusal() {
					return
				}
				if view.snap.Gap != "" {
					c.gap(view.snap.Gap)
					return
				}
				verdict = c.recognise(ctx, view, c.judge(view))
				// An unknown call settles too: with the JetStream state its
				// events may be queued behind a flood on other calls.
				unknown := verdict.reason == yesguardv1.Reason_REASON_UNKNOWN_CALL
				if (verdict.outcome != yesguardv1.Outcome_OUTCOME_ALLOW && !unknown) || settled || g.cfg.Settle == nil {
					break
				}
				// Before an ALLOW: every word published before this Check
				// must be in; if the call changed meanwhile, judge again.
				if err := c.settle(ctx); err != nil {
					c.gap("the guard could not confirm it holds every event of the call: " + Clip(err.Error(), 160))
					return
				}
				next, _ := c.look()
				if sameView(view, next) {
					break
				}
				view = next
			}
		}
		if !c.tool.confirm() {
			verdict.outcome, verdict.reason, verdict.turnID = yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_NOT_REQUIRED, 0
			if verdict.evidence == nil {
				verdict.evidence = &yesguardv1.Evidence{}
			}
			verdict.evidence.Detail = "the policy says " + c.tool.name + " needs no confirmation"
		}
		c.v.Evidence = verdict.evidence
		if verdict.outcome != yesguardv1.Outcome_OUTCOME_ALLOW {
			c.set(verdict.outcome, verdict.reason)
			return
		}
		req.Now = g.now()
		req.TurnID = verdict.turnID
		req.ExplicitQuantity = qtySet && verdict.statesQuantity
		if req.ExplicitQuantity {
			// A new caller turn stating a quantity is a new order line,
			// not a retry of the last one.
			req.Key.ArgsHash = fmt.Sprintf("%s#turn%d", c.req.ArgsHash, verdict.answerTurnID)
		}
		v, r, err = g.cfg.Book.Allow(ctx, req)
		if err != nil {
			c.bookFailed(err)
			return
		}
		switch v {
		case dedupe.OK:
			c.set(yesguardv1.Outcome_OUTCOME_ALLOW, verdict.reason)
			c.v.ApprovalTTL = c.rs.policy.ApprovalTTLFor(c.req.Tool)
			if verdict.turnID != 0 {
				c.v.Turn = c.v.Evidence.GetAnswer()
			}
			return
		case dedupe.Duplicate:
			if c.duplicate(ctx, r) {
				continue
			}
			return
		case dedupe.EvidenceUsed:
			c.refuse(yesguardv1.Reason_REASON_EVIDENCE_USED, c.v.Evidence)
			c.v.OriginalDecisionID = r.DecisionID()
			return
		case dedupe.QuantityRepeat:
			c.ignored(r, c.v.Evidence)
			return
		}
	}
	c.refuse(yesguardv1.Reason_REASON_INTERNAL, &yesguardv1.Evidence{Detail: "the original action failed twice while this check waited"})
}

// duplicateWaitLimit is how long a duplicate may wait for its original's
// result: DuplicateWait, and at most a quarter of the time left to the
// caller's deadline, so that the answer comes well before it.
func (c *check) duplicateWaitLimit(ctx context.Context) time.Duration {
	limit := c.g.cfg.DuplicateWait
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, max(time.Until(dl)/4, 0))
	}
	return limit
}

// The evidence details of a DUPLICATE: whether its original had reported
// its result (package replay reads them back from records).
const (
	DetailOriginalDone    = "the original is done"
	DetailOriginalRunning = "the original is still running; its result is not known yet"
)

// duplicate answers DUPLICATE with the original's result, waiting a short
// bounded time for it. It returns true when the original failed, so the
// check must be judged afresh.
func (c *check) duplicate(ctx context.Context, r dedupe.Reservation) (retry bool) {
	res, failed, done := r.Result()
	if !done {
		wctx, cancel := context.WithTimeout(ctx, c.duplicateWaitLimit(ctx))
		t0 := c.g.now()
		res, failed, done = r.Wait(wctx)
		cancel()
		c.waited += c.g.now().Sub(t0)
	}
	if done && failed {
		return true
	}
	c.set(yesguardv1.Outcome_OUTCOME_DUPLICATE, yesguardv1.Reason_REASON_DUPLICATE)
	c.v.OriginalDecisionID = r.DecisionID()
	c.v.OriginalResult = res
	c.v.Evidence = &yesguardv1.Evidence{Detail: DetailOriginalDone}
	if !done {
		c.v.OriginalRunning = true
		c.v.Evidence.Detail = DetailOriginalRunning
		c.v.Message = "This action was already allowed moments ago and is still running. Do not run it again, and do not tell the caller it is done: wait for the original's result, then tell them what it was."
	}
	return false
}

func (c *check) ignored(r dedupe.Reservation, ev *yesguardv1.Evidence) {
	c.set(yesguardv1.Outcome_OUTCOME_IGNORED, yesguardv1.Reason_REASON_QUANTITY_REPEAT)
	c.v.OriginalDecisionID = r.DecisionID()
	if ev == nil {
		ev = &yesguardv1.Evidence{}
	}
	if ev.Detail == "" {
		ev.Detail = "the same item was recorded moments ago and no quantity was stated"
	}
	c.v.Evidence = ev
}

// settleIfLagging settles on the call's events first when the feed lags
// (a flood on other calls): its question and answer may still be queued
// behind the flood, and waiting for them beats judging an unknown call.
// It refuses, and reports false, when that cannot be done in time.
func (c *check) settleIfLagging(ctx context.Context) bool {
	if c.g.cfg.Feed == nil || c.g.cfg.Settle == nil {
		return true
	}
	if state, _ := c.g.cfg.Feed(); state != FeedLagging {
		return true
	}
	if err := c.settle(ctx); err != nil {
		c.gap("the guard lags the transcript stream and could not apply this call's events in time: " + Clip(err.Error(), 160))
		return false
	}
	return true
}

// settleTimeout bounds Settle: an ALLOW waits at most this long for this
// replica to apply what the stream holds of the call (and never past the
// caller's deadline, less a margin).
const settleTimeout = 2 * time.Second

func (c *check) settle(ctx context.Context) error {
	limit := settleTimeout
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, max(time.Until(dl)-deadlineMargin, 0))
	}
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t0 := c.g.now()
	defer func() { c.waited += c.g.now().Sub(t0) }()
	return c.g.cfg.Settle(sctx, c.req.CallID)
}

// sameView reports whether two views of a call show the same transcript:
// the same utterances, speech in flight, end and gap.
func sameView(a, b view) bool {
	x, y := a.snap, b.snap
	if x.Exists != y.Exists || x.CallerInFlight != y.CallerInFlight || x.Ended != y.Ended || x.Gap != y.Gap || len(x.Utterances) != len(y.Utterances) {
		return false
	}
	for i := range x.Utterances {
		if x.Utterances[i].ID != y.Utterances[i].ID {
			return false
		}
	}
	return true
}
