package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	"github.com/yesguard/yesguard/metrics"
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
			ArgsHash:      hexString(&sum),
			Args:          string(argsJSON),
			PolicyVersion: rs.version,
		},
	}
	resp := c.run(ctx)
	return resp, nil
}

// hexString is hex.EncodeToString(sum[:]) with one allocation (the
// string) instead of two.
func hexString(sum *[sha256.Size]byte) string {
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
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
			lang := c.rs.policy.Defaults.DefaultLang
			c.d.Message = message(c.d.Outcome, c.d.Reason, c.tool.name, func() phrasing { return c.rs.phrasing(c.tool, lang) }, "internal error")
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
		d.Message = message(d.Outcome, d.Reason, c.tool.name, func() phrasing { return c.rs.phrasing(c.tool, c.lang()) }, detail)
	}
	g := c.g
	now := g.now()
	g.decisions.add(d, now)
	if g.cfg.Sink != nil {
		g.cfg.Sink.Write(d)
	}
	if m := g.cfg.Metrics; m != nil {
		outcome := outcomeLabel(d.Outcome)
		m.Decisions.WithLabelValues(c.tool.label, outcome, reasonLabel(d.Reason)).Inc()
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
		// The book counts the repeats Allow catches; these are caught
		// here, before it.
		switch v, r := g.cfg.Book.Lookup(req); {
		case v == dedupe.Duplicate:
			g.countHit(metrics.HitDuplicate)
			if c.duplicate(ctx, r) {
				continue // the original failed: judge afresh
			}
			return
		case v == dedupe.QuantityRepeat && !qtySet:
			g.countHit(metrics.HitQuantity)
			c.ignored(r, nil)
			return
		}

		var verdict judgement
		if c.tool.confirm() || (qtySet && req.Item != "") {
			verdict = c.judge(c.waitTurn(ctx))
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

func (g *Guard) countHit(kind string) {
	if m := g.cfg.Metrics; m != nil {
		m.DedupeHits.WithLabelValues(kind).Inc()
	}
}

func enumLabel(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// The metric labels of the outcomes and reasons, made once rather than at
// each Check.
var (
	outcomeLabels = enumLabels(yesguardv1.Outcome_name, "OUTCOME_")
	reasonLabels  = enumLabels(yesguardv1.Reason_name, "REASON_")
)

func enumLabels(names map[int32]string, prefix string) map[int32]string {
	out := make(map[int32]string, len(names))
	for v, name := range names {
		out[v] = enumLabel(name, prefix)
	}
	return out
}

func outcomeLabel(o yesguardv1.Outcome) string {
	if l, ok := outcomeLabels[int32(o)]; ok {
		return l
	}
	return enumLabel(o.String(), "OUTCOME_")
}

func reasonLabel(r yesguardv1.Reason) string {
	if l, ok := reasonLabels[int32(r)]; ok {
		return l
	}
	return enumLabel(r.String(), "REASON_")
}

func validateCheck(req *yesguardv1.CheckRequest) error {
	var errs []error
	if err := validateID("call_id", req.GetCallId(), true); err != nil {
		errs = append(errs, err)
	}
	if req.GetTool() == "" {
		errs = append(errs, errors.New("tool: required: the tool's name as the model called it"))
	} else if !validToolName(req.GetTool()) {
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

// validToolName is toolNameRE.MatchString without the regexp machinery, on
// every Check: 1 to 128 of the ASCII characters the class allows.
func validToolName(name string) bool {
	if len(name) < 1 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
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

// canonicalValue is v as JSON, byte for byte as encoding/json writes
// v.AsInterface() without HTML escaping: object keys sorted, numbers as
// ES6 writes them, NaN and the infinities as the strings AsInterface makes
// of them. It is written directly, without the maps and interfaces
// AsInterface builds; FuzzCanonicalValue holds it to encoding/json. It
// never fails.
func canonicalValue(v *structpb.Value) ([]byte, error) {
	return appendCanonical(make([]byte, 0, 128), v), nil
}

func appendCanonical(b []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if k != nil {
			return appendNumber(b, k.NumberValue)
		}
	case *structpb.Value_StringValue:
		if k != nil {
			return appendJSONString(b, k.StringValue)
		}
	case *structpb.Value_BoolValue:
		if k != nil {
			return strconv.AppendBool(b, k.BoolValue)
		}
	case *structpb.Value_StructValue:
		if k != nil {
			return appendStruct(b, k.StructValue)
		}
	case *structpb.Value_ListValue:
		if k != nil {
			b = append(b, '[')
			for i, e := range k.ListValue.GetValues() {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendCanonical(b, e)
			}
			return append(b, ']')
		}
	}
	return append(b, "null"...)
}

func appendStruct(b []byte, s *structpb.Struct) []byte {
	fields := s.GetFields()
	var small [8]string
	keys := small[:0]
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendCanonical(b, fields[k])
	}
	return append(b, '}')
}

// appendNumber writes f as encoding/json writes a float64, and NaN and the
// infinities as structpb's AsInterface turns them into strings.
func appendNumber(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString writes s as encoding/json does without HTML escaping:
// quotes, backslashes and control characters escaped, invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
