package service

import (
	"context"
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
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/metrics"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Limits on a request.
const (
	maxIDBytes  = 128
	maxRefBytes = 256
	// maxWaitMS bounds wait_ms before the policy's max_wait caps it, so
	// that a huge value is an error, not an overflow.
	maxWaitMS = 60_000
)

// Check validates the request, has the engine judge it, records the
// decision and answers.
func (s *Service) Check(ctx context.Context, req *yesguardv1.CheckRequest) (*yesguardv1.CheckResponse, error) {
	start := s.now()
	if err := validateCheck(req); err != nil {
		return nil, s.invalid(err)
	}
	if err := s.requireCall(ctx, req.GetCallId()); err != nil {
		return nil, err
	}
	argsJSON, err := approval.CanonicalArgs(req.GetArgs())
	if err != nil {
		return nil, s.invalid(fmt.Errorf("args: %w", err))
	}
	hash := approval.ArgsHash(argsJSON)
	caller, _ := auth.FromContext(ctx)
	v := s.cfg.Engine.Check(ctx, guard.Request{
		CallID:         req.GetCallId(),
		Tool:           req.GetTool(),
		Args:           req.GetArgs(),
		ArgsHash:       hash,
		DecisionID:     ulid.Make().String(),
		ResponseID:     req.GetResponseId(),
		RespondingToMS: req.GetRespondingToMs(),
		Wait:           time.Duration(req.GetWaitMs()) * time.Millisecond,
		Owner:          caller.Owner(),
	})
	token, claims := s.issue(ctx, req, hash, v)
	d := &yesguardv1.Decision{
		DecisionId:         v.DecisionID,
		Time:               timestamppb.New(start),
		CallId:             req.GetCallId(),
		Tool:               req.GetTool(),
		ToolCallId:         req.GetToolCallId(),
		ResponseId:         req.GetResponseId(),
		ArgsHash:           hash,
		Outcome:            v.Outcome,
		Reason:             v.Reason,
		Message:            v.Message,
		Evidence:           v.Evidence,
		WaitedMs:           v.Waited.Milliseconds(),
		PolicyVersion:      v.PolicyVersion,
		OriginalDecisionId: v.OriginalDecisionID,
		Args:               string(argsJSON),
		Kind:               yesguardv1.DecisionKind_DECISION_KIND_CHECK,
		Replica:            s.cfg.Replica,
	}
	if claims != nil {
		d.ApprovalKeyId, d.ApprovalExpiresAt = claims.KeyID, timestamppb.New(claims.ExpiresAt)
	}
	d = s.redacted(d)
	s.write(ctx, d)

	tool := s.tools.of(req.GetTool(), v.ToolListed)
	outcome := outcomeLabel(v.Outcome)
	s.m.decisions.WithLabelValues(tool, outcome, reasonLabel(v.Reason)).Inc()
	s.m.checkDuration.WithLabelValues(outcome).Observe(s.now().Sub(start).Seconds())
	if kind := hitKind(v.Reason); kind != "" {
		s.m.hits.WithLabelValues(kind).Inc()
	}
	resp := answer(v, d, req.GetIncludeEvidence())
	if claims != nil {
		resp.Approval, resp.ApprovalExpiresAt = token, timestamppb.New(claims.ExpiresAt)
	}
	return resp, nil
}

// answer is the wire answer of a verdict with the message and evidence
// of its record d (redacted by the same rules: the message may quote the
// caller): the short evidence always, the full evidence only when asked
// for.
func answer(v *guard.Verdict, d *yesguardv1.Decision, full bool) *yesguardv1.CheckResponse {
	ev := d.GetEvidence()
	resp := &yesguardv1.CheckResponse{
		DecisionId:         v.DecisionID,
		Outcome:            v.Outcome,
		Reason:             v.Reason,
		Message:            d.GetMessage(),
		OriginalDecisionId: v.OriginalDecisionID,
		OriginalResult:     v.OriginalResult,
		OriginalRunning:    v.OriginalRunning,
		WaitedMs:           v.Waited.Milliseconds(),
		QuestionSentence:   ev.GetQuestionSentence(),
		AnswerText:         ev.GetAnswer().GetText(),
		Detail:             ev.GetDetail(),
		Ask:                v.Ask,
	}
	if full {
		resp.Evidence = ev
	}
	return resp
}

// requireCall refuses, counted, a call id the caller's token is not bound
// to (auth.RequireCall).
func (s *Service) requireCall(ctx context.Context, callID string) error {
	if err := auth.RequireCall(ctx, callID); err != nil {
		s.CountError(codes.PermissionDenied)
		return err
	}
	return nil
}

// record writes d, redacted, to the sink and, when it names a call, the
// store.
func (s *Service) record(ctx context.Context, d *yesguardv1.Decision) {
	s.write(ctx, s.redacted(d))
}

// redacted is the copy of d the sink, the store and the Check's answer
// get (Config.Redact).
func (s *Service) redacted(d *yesguardv1.Decision) *yesguardv1.Decision {
	if s.cfg.Redact != nil {
		return s.cfg.Redact(d)
	}
	return d
}

// write writes d, already redacted, to the sink and, when it names a call,
// the store. The caller may have gone: the store is given a context that
// its cancellation does not end.
func (s *Service) write(ctx context.Context, d *yesguardv1.Decision) {
	// Every writer must be able to encode it, or the record would be lost
	// in the log and the store alike.
	d, fixed := decisions.Encodable(d)
	if len(fixed) > 0 {
		s.m.unencodable.Inc()
		s.cfg.Logger.Error("a decision record held fields no writer can encode; they were replaced so that it is written",
			zap.String("decision_id", d.GetDecisionId()), zap.Strings("fields", fixed))
	}
	// One record never grows the log line, the stored message or a
	// ListDecisions page past its bound.
	if b, trimmed := decisions.Bound(d); trimmed {
		d = b
		s.m.trimmed.Inc()
		s.cfg.Logger.Warn("decision record trimmed to its bound (decisions.MaxRecordBytes)", zap.String("decision_id", d.GetDecisionId()), zap.String("detail", d.GetEvidence().GetDetail()))
	}
	if cw, ok := s.cfg.Sink.(CallerSink); ok {
		// Who asked, per decision: the identity the interceptors found.
		id, _ := auth.FromContext(ctx)
		cw.WriteCaller(d, id.String())
	} else if s.cfg.Sink != nil {
		s.cfg.Sink.Write(d)
	}
	if s.cfg.Store == nil || d.GetCallId() == "" {
		return
	}
	timeout := storeTimeout
	if dl, ok := ctx.Deadline(); ok {
		// The answer must still reach the caller: a store that does not
		// take the record by then queues it instead.
		timeout = min(timeout, max(time.Until(dl)-answerMargin, minStoreWait))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := s.cfg.Store.Add(sctx, d); err != nil {
		s.cfg.Logger.Warn("decision record not stored for ListDecisions (it is in the decision log)",
			zap.String("decision_id", d.GetDecisionId()), zap.Error(err))
	}
}

// How long a record's store may hold an answer up: storeTimeout, and no
// later than answerMargin before the caller's deadline (but minStoreWait
// at least).
const (
	storeTimeout = 2 * time.Second
	answerMargin = 20 * time.Millisecond
	minStoreWait = 50 * time.Millisecond
)

func (s *Service) invalid(err error) error {
	s.CountError(codes.InvalidArgument)
	return status.Error(codes.InvalidArgument, err.Error())
}

// hitKind is the dedupe_hits kind of a repeat's reason; "" for others.
func hitKind(r yesguardv1.Reason) string {
	switch r {
	case yesguardv1.Reason_REASON_DUPLICATE:
		return metrics.HitDuplicate
	case yesguardv1.Reason_REASON_EVIDENCE_USED:
		return metrics.HitEvidence
	case yesguardv1.Reason_REASON_QUANTITY_REPEAT:
		return metrics.HitQuantity
	}
	return ""
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
	} else if !guard.ValidToolName(req.GetTool()) {
		errs = append(errs, errors.New("tool: 1-128 characters of letters, digits and _ . : -"))
	}
	if req.GetRespondingToMs() < 0 {
		errs = append(errs, errors.New("responding_to_ms: must not be negative"))
	}
	if w := req.GetWaitMs(); w < 0 || w > maxWaitMS {
		errs = append(errs, fmt.Errorf("wait_ms: 0 (the policy's wait) to %d; the policy's max_wait caps it", maxWaitMS))
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
