package guard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Limits on a CheckRequest.
const (
	maxIDBytes   = 128
	maxRefBytes  = 256
	maxArgsBytes = 64 << 10
)

// deadlineMargin is kept back from the caller's deadline so that a wait
// cut short by it still leaves time to answer.
const deadlineMargin = 20 * time.Millisecond

// maxDuplicateWait bounds how long a duplicate waits for the original's
// result when its caller set no deadline.
const maxDuplicateWait = 5 * time.Second

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
	if cfg.MaxDecisionsPerCall <= 0 {
		cfg.MaxDecisionsPerCall = 256
	}
	if cfg.DecisionTTL <= 0 {
		cfg.DecisionTTL = time.Hour
	}
	g := &Guard{cfg: cfg, decisions: newDecisionStore(cfg.MaxDecisionsPerCall, cfg.DecisionTTL)}
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
	g.rules.Store(rs)
	return nil
}

// PolicyVersion identifies the rules in force.
func (g *Guard) PolicyVersion() string { return g.rules.Load().version }

func (g *Guard) now() time.Time { return g.cfg.Now() }

// Check judges one tool call. Whatever happens after validation, it writes
// exactly one decision record.
func (g *Guard) Check(ctx context.Context, req *yesguardv1.CheckRequest) (*yesguardv1.CheckResponse, error) {
	start := g.now()
	if err := validateCheck(req); err != nil {
		g.countError(codes.InvalidArgument)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	argsJSON, err := canonicalArgs(req.GetArgs())
	if err != nil {
		g.countError(codes.InvalidArgument)
		return nil, status.Error(codes.InvalidArgument, "args: "+err.Error())
	}
	if m := g.cfg.Metrics; m != nil {
		m.ChecksInFlight.Inc()
		defer m.ChecksInFlight.Dec()
	}
	sum := sha256.Sum256(argsJSON)
	rs := g.rules.Load()
	tr := rs.tool(req.GetTool())
	c := &check{
		g: g, rs: rs, tool: tr, req: req, start: start,
		args: req.GetArgs().GetFields(),
		d: &yesguardv1.Decision{
			DecisionId:    ulid.Make().String(),
			Time:          timestamppb.New(start),
			CallId:        req.GetCallId(),
			Tool:          req.GetTool(),
			ToolCallId:    req.GetToolCallId(),
			ResponseId:    req.GetResponseId(),
			ArgsHash:      hex.EncodeToString(sum[:]),
			Args:          string(argsJSON),
			PolicyVersion: rs.version,
		},
	}
	resp := c.run(ctx)
	return resp, nil
}

// check is one Check under way.
type check struct {
	g     *Guard
	rs    *ruleset
	tool  *toolRules
	req   *yesguardv1.CheckRequest
	args  map[string]*structpb.Value
	start time.Time
	d     *yesguardv1.Decision

	waited         time.Duration
	originalResult *structpb.Struct
}

// run decides, records and answers. A panic inside the rules becomes a
// recorded REFUSE, never a lost decision.
func (c *check) run(ctx context.Context) (resp *yesguardv1.CheckResponse) {
	defer func() {
		if r := recover(); r != nil {
			c.g.cfg.Logger.Error("check panicked; refusing", zap.Any("panic", r), zap.String("decision_id", c.d.GetDecisionId()))
			c.d.Outcome = yesguardv1.Outcome_OUTCOME_REFUSE
			c.d.Reason = yesguardv1.Reason_REASON_INTERNAL
			c.d.Message = message(c.d.Outcome, c.d.Reason, c.tool.name, c.tool.describe(c.rs.policy.Defaults.DefaultLang), "internal error")
			c.d.Evidence = nil
			resp = c.finish()
		}
	}()
	c.decide(ctx)
	return c.finish()
}

// finish records the decision and builds the answer.
func (c *check) finish() *yesguardv1.CheckResponse {
	d := c.d
	d.WaitedMs = c.waited.Milliseconds()
	if d.Message == "" {
		detail := d.GetEvidence().GetDetail()
		d.Message = message(d.Outcome, d.Reason, c.tool.name, c.tool.describe(c.lang()), detail)
	}
	g := c.g
	now := g.now()
	g.decisions.add(d, now)
	if g.cfg.Sink != nil {
		g.cfg.Sink.Write(d)
	}
	if m := g.cfg.Metrics; m != nil {
		outcome := enumLabel(d.Outcome.String(), "OUTCOME_")
		m.Decisions.WithLabelValues(c.tool.label, outcome, enumLabel(d.Reason.String(), "REASON_")).Inc()
		m.CheckDuration.WithLabelValues(outcome).Observe(now.Sub(c.start).Seconds())
	}
	return &yesguardv1.CheckResponse{
		DecisionId:         d.DecisionId,
		Outcome:            d.Outcome,
		Reason:             d.Reason,
		Message:            d.Message,
		Evidence:           d.Evidence,
		OriginalDecisionId: d.OriginalDecisionId,
		OriginalResult:     c.originalResult,
		WaitedMs:           d.WaitedMs,
	}
}

func (c *check) lang() string {
	if l := c.d.GetEvidence().GetLang(); l != "" {
		return l
	}
	return c.rs.policy.Defaults.DefaultLang
}

func (c *check) set(outcome yesguardv1.Outcome, reason yesguardv1.Reason) {
	c.d.Outcome, c.d.Reason = outcome, reason
}

func (c *check) refuse(reason yesguardv1.Reason, ev *yesguardv1.Evidence) {
	c.set(yesguardv1.Outcome_OUTCOME_REFUSE, reason)
	c.d.Evidence = ev
}

// decide fills c.d with the outcome.
func (c *check) decide(ctx context.Context) {
	g, pol := c.g, c.rs.policy.Defaults
	if g.cfg.FeedUp != nil && !g.cfg.FeedUp() {
		c.refuse(yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE, &yesguardv1.Evidence{Detail: "the transcript feed (NATS) is not connected"})
		return
	}
	qtySet := c.tool.quantitySet(c.args)
	req := dedupe.Request{
		Key:         dedupe.Key{CallID: c.req.GetCallId(), Tool: c.req.GetTool(), ArgsHash: c.d.ArgsHash},
		DecisionID:  c.d.DecisionId,
		Now:         c.start,
		Window:      pol.DuplicateWindow.D(),
		EvidenceTTL: evidenceTTL,
		Item:        c.tool.itemKey(c.args),
		ItemWindow:  pol.QuantityWindow.D(),
	}
	for attempt := 0; attempt < 2; attempt++ {
		// A repeat already known needs no transcript.
		switch v, r := g.cfg.Book.Lookup(req); {
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
			snap := c.waitTurn(ctx)
			verdict = c.judge(snap)
		}
		if !c.tool.confirm() {
			verdict.outcome, verdict.reason, verdict.turnID = yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_NOT_REQUIRED, 0
			if verdict.evidence == nil {
				verdict.evidence = &yesguardv1.Evidence{}
			}
			verdict.evidence.Detail = "the policy says " + c.tool.name + " needs no confirmation"
		}
		c.d.Evidence = verdict.evidence
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
			req.Key.ArgsHash = fmt.Sprintf("%s#turn%d", c.d.ArgsHash, verdict.answerTurnID)
		}
		switch v, r := g.cfg.Book.Allow(req); v {
		case dedupe.OK:
			c.set(yesguardv1.Outcome_OUTCOME_ALLOW, verdict.reason)
			return
		case dedupe.Duplicate:
			if c.duplicate(ctx, r) {
				continue
			}
			return
		case dedupe.EvidenceUsed:
			c.refuse(yesguardv1.Reason_REASON_EVIDENCE_USED, c.d.Evidence)
			c.d.OriginalDecisionId = r.DecisionID()
			return
		case dedupe.QuantityRepeat:
			c.ignored(r, c.d.Evidence)
			return
		}
	}
	c.refuse(yesguardv1.Reason_REASON_INTERNAL, &yesguardv1.Evidence{Detail: "the original action failed twice while this check waited"})
}

// duplicate answers DUPLICATE with the original's result, waiting for it
// within the caller's deadline. It returns true when the original failed,
// so the check must be judged afresh.
func (c *check) duplicate(ctx context.Context, r *dedupe.Reservation) (retry bool) {
	res, failed, done := r.Result()
	if !done {
		wctx, cancel := context.WithTimeout(ctx, maxDuplicateWait)
		if dl, ok := ctx.Deadline(); ok {
			cancel()
			wctx, cancel = context.WithDeadline(ctx, dl.Add(-deadlineMargin))
		}
		t0 := c.g.now()
		res, failed, done = r.Wait(wctx)
		cancel()
		c.waited += c.g.now().Sub(t0)
	}
	if done && failed {
		return true
	}
	c.set(yesguardv1.Outcome_OUTCOME_DUPLICATE, yesguardv1.Reason_REASON_DUPLICATE)
	c.d.OriginalDecisionId = r.DecisionID()
	c.originalResult = res
	detail := "the original is done"
	if !done {
		detail = "the original is still running; its result was not ready within this check's deadline"
	}
	c.d.Evidence = &yesguardv1.Evidence{Detail: detail}
	return false
}

func (c *check) ignored(r *dedupe.Reservation, ev *yesguardv1.Evidence) {
	c.set(yesguardv1.Outcome_OUTCOME_IGNORED, yesguardv1.Reason_REASON_QUANTITY_REPEAT)
	c.d.OriginalDecisionId = r.DecisionID()
	if ev == nil {
		ev = &yesguardv1.Evidence{}
	}
	if ev.Detail == "" {
		ev.Detail = "the same item was recorded moments ago and no quantity was stated"
	}
	c.d.Evidence = ev
}

// Complete records an allowed call's result.
func (g *Guard) Complete(ctx context.Context, req *yesguardv1.CompleteRequest) (*yesguardv1.CompleteResponse, error) {
	if req.GetDecisionId() == "" {
		g.countError(codes.InvalidArgument)
		return nil, status.Error(codes.InvalidArgument, "decision_id: required: the decision_id of the ALLOW whose result this is")
	}
	err := g.cfg.Book.Complete(req.GetDecisionId(), req.GetResult(), req.GetFailed())
	result := "ok"
	if req.GetFailed() {
		result = "failed"
	}
	switch {
	case err == nil:
	case errors.Is(err, dedupe.ErrUnknownDecision):
		result = "unknown"
		err = status.Errorf(codes.NotFound, "decision_id %q: no allowed action is held for it (never allowed, already failed, or expired)", req.GetDecisionId())
	case errors.Is(err, dedupe.ErrAlreadyCompleted):
		result = "unknown"
		err = status.Errorf(codes.FailedPrecondition, "decision_id %q: its result was already reported", req.GetDecisionId())
	default:
		result = "unknown"
		err = status.Errorf(codes.Internal, "complete %q: %v", req.GetDecisionId(), err)
	}
	if m := g.cfg.Metrics; m != nil {
		m.Completions.WithLabelValues(result).Inc()
	}
	if err != nil {
		g.countError(status.Code(err))
		return nil, err
	}
	return &yesguardv1.CompleteResponse{}, nil
}

// ListDecisions returns a call's decisions, oldest first.
func (g *Guard) ListDecisions(ctx context.Context, req *yesguardv1.ListDecisionsRequest) (*yesguardv1.ListDecisionsResponse, error) {
	if err := validateID("call_id", req.GetCallId(), true); err != nil {
		g.countError(codes.InvalidArgument)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &yesguardv1.ListDecisionsResponse{Decisions: g.decisions.list(req.GetCallId())}, nil
}

func (g *Guard) countError(code codes.Code) {
	if m := g.cfg.Metrics; m != nil {
		m.CheckErrors.WithLabelValues(code.String()).Inc()
	}
}

func enumLabel(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

func validateCheck(req *yesguardv1.CheckRequest) error {
	var errs []error
	if err := validateID("call_id", req.GetCallId(), true); err != nil {
		errs = append(errs, err)
	}
	if req.GetTool() == "" {
		errs = append(errs, errors.New("tool: required: the tool's name as the model called it"))
	} else if !toolNameRE.MatchString(req.GetTool()) {
		errs = append(errs, errors.New("tool: 1-128 characters of letters, digits and _ . : -"))
	}
	if req.GetRespondingToMs() < 0 {
		errs = append(errs, errors.New("responding_to_ms: must not be negative"))
	}
	for _, f := range []struct{ name, v string }{{"response_id", req.GetResponseId()}, {"tool_call_id", req.GetToolCallId()}} {
		if len(f.v) > maxRefBytes || !utf8.ValidString(f.v) {
			errs = append(errs, fmt.Errorf("%s: at most %d bytes of UTF-8", f.name, maxRefBytes))
		}
	}
	return errors.Join(errs...)
}

// validateID checks an id that is also a NATS subject token.
func validateID(field, id string, required bool) error {
	if id == "" {
		if required {
			return fmt.Errorf("%s: required", field)
		}
		return nil
	}
	if len(id) > maxIDBytes {
		return fmt.Errorf("%s: at most %d bytes", field, maxIDBytes)
	}
	for _, r := range id {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%s: %q may not hold '.', '*', '>', spaces or control characters (it is a NATS subject token)", field, id)
		}
	}
	return nil
}

// canonicalArgs is the arguments as JSON with sorted keys, so the same
// arguments always hash the same.
func canonicalArgs(s *structpb.Struct) ([]byte, error) {
	if s == nil {
		return []byte("{}"), nil
	}
	b, err := canonicalValue(structpb.NewStructValue(s))
	if err != nil {
		return nil, err
	}
	if len(b) > maxArgsBytes {
		return nil, fmt.Errorf("at most %d bytes of JSON", maxArgsBytes)
	}
	return b, nil
}

func canonicalValue(v *structpb.Value) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.AsInterface()); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
