package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/guard"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// redeemTimeout bounds the ledger's claim when the caller set no deadline:
// a Redeem never hangs on an unreachable ledger, it refuses (INTERNAL).
const redeemTimeout = 5 * time.Second

// Redeem is called by the system of record just before it executes an
// allowed action. It verifies the approval with the guard's own keys
// against the action about to be executed (the tool and call when given,
// the canonical arguments always), then claims the approval's decision
// once in the ledger, and writes a Redeem record either way. Only
// REDEEMED lets the action run, and only its answer carries the receipt
// that can release the approval again (Complete(failed) with it): the
// pipeline holds the approval, never the receipt, so once redeemed it
// cannot reopen what the backend is executing. Every other answer says
// why not and what the backend should do. It needs the pipeline role.
func (s *Service) Redeem(ctx context.Context, req *yesguardv1.RedeemRequest) (*yesguardv1.RedeemResponse, error) {
	if err := auth.RequireRole(ctx, auth.RolePipeline); err != nil {
		s.CountError(status.Code(err))
		return nil, err
	}
	if err := validateRedeem(req); err != nil {
		return nil, s.invalid(err)
	}
	if req.GetCallId() != "" {
		if err := s.requireCall(ctx, req.GetCallId()); err != nil {
			return nil, err
		}
	}
	argsJSON, err := approval.CanonicalArgs(req.GetArgs())
	if err != nil {
		return nil, s.invalid(fmt.Errorf("args: %w", err))
	}
	a := s.cfg.Approvals
	if a == nil {
		s.CountError(codes.FailedPrecondition)
		return nil, status.Error(codes.FailedPrecondition, "this guard issues no approvals, so it redeems none")
	}
	start := s.now()
	hash := approval.ArgsHash(argsJSON)
	claims, err := a.Verifier.VerifyAction(req.GetApproval(), approval.Action{CallID: req.GetCallId(), Tool: req.GetTool(), ArgsHash: hash})
	if claims != nil {
		// The approval's own call: a token bound to other calls may not
		// spend it.
		if cerr := s.requireCall(ctx, claims.CallID); cerr != nil {
			return nil, cerr
		}
	}
	receipt := ""
	if err == nil {
		lctx, cancel := context.WithTimeout(ctx, redeemTimeout)
		receipt, err = a.Ledger.Redeem(lctx, claims)
		cancel()
	}
	reason := redeemReason(err)
	tool := req.GetTool()
	d := &yesguardv1.Decision{
		DecisionId: ulid.Make().String(),
		Time:       timestamppb.New(start),
		CallId:     req.GetCallId(),
		ArgsHash:   hash,
		Args:       string(argsJSON),
		Outcome:    yesguardv1.Outcome_OUTCOME_REFUSE,
		Reason:     reason,
		Kind:       yesguardv1.DecisionKind_DECISION_KIND_REDEEM,
		Replica:    s.cfg.Replica,
		Evidence:   &yesguardv1.Evidence{Detail: "approved and claimed once"},
	}
	resp := &yesguardv1.RedeemResponse{DecisionId: d.DecisionId, Reason: reason}
	if claims != nil {
		// The signature verified: the claims are the guard's own, and the
		// record belongs to the allowed action's call.
		tool = claims.Tool
		d.CallId, d.OriginalDecisionId = claims.CallID, claims.DecisionID
		d.ApprovalKeyId, d.ApprovalExpiresAt = claims.KeyID, timestamppb.New(claims.ExpiresAt)
		resp.AllowedDecisionId, resp.CallId, resp.Tool, resp.ArgsHash = claims.DecisionID, claims.CallID, claims.Tool, claims.ArgsHash
		resp.ExpiresAt = timestamppb.New(claims.ExpiresAt)
	}
	d.Tool = tool
	if err == nil {
		// The receipt goes to the redeemer alone, never into a record.
		d.Outcome, resp.Receipt = yesguardv1.Outcome_OUTCOME_ALLOW, receipt
	} else {
		d.Evidence.Detail = guard.Clip(err.Error(), maxDetail)
	}
	d.Message = s.redeemMessage(ctx, reason, err, tool, claims, d.Evidence.Detail)
	resp.Outcome, resp.Message = d.Outcome, d.Message
	s.record(ctx, d)
	s.m.redeems.WithLabelValues(reasonLabel(reason)).Inc()
	return resp, nil
}

func validateRedeem(req *yesguardv1.RedeemRequest) error {
	var errs []error
	if req.GetApproval() == "" {
		errs = append(errs, errors.New("approval: required: the approval of the ALLOW (CheckResponse.approval)"))
	}
	if t := req.GetTool(); t != "" && !guard.ValidToolName(t) {
		errs = append(errs, errors.New("tool: 1-128 characters of letters, digits and _ . : -"))
	}
	if err := validateID("call_id", req.GetCallId(), false); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// redeemReason maps a verification or ledger error onto the Redeem's
// reason. Anything it does not know refuses as an invalid approval.
func redeemReason(err error) yesguardv1.Reason {
	switch {
	case err == nil:
		return yesguardv1.Reason_REASON_REDEEMED
	case errors.Is(err, approval.ErrAlreadyRedeemed):
		return yesguardv1.Reason_REASON_ALREADY_REDEEMED
	case errors.Is(err, approval.ErrExpired):
		return yesguardv1.Reason_REASON_APPROVAL_EXPIRED
	case errors.Is(err, approval.ErrMismatch):
		return yesguardv1.Reason_REASON_APPROVAL_MISMATCH
	case errors.Is(err, approval.ErrLedgerUnavailable), errors.Is(err, approval.ErrKeysUnavailable):
		return yesguardv1.Reason_REASON_INTERNAL
	default:
		// ErrMalformed, ErrAlgorithm, ErrSignature (ErrUnknownKey),
		// ErrIssuer.
		return yesguardv1.Reason_REASON_APPROVAL_INVALID
	}
}

// redeemMessage tells the system of record what to do next.
func (s *Service) redeemMessage(ctx context.Context, reason yesguardv1.Reason, err error, tool string, c *approval.Claims, detail string) string {
	action := "the action"
	if tool != "" {
		action = tool
	}
	switch reason {
	case yesguardv1.Reason_REASON_REDEEMED:
		return "Redeemed: execute " + action + " once, now. Then report how it went with Complete, this approval and this answer's receipt: " +
			"failed (with the receipt: nobody else can) lets a retry redeem it again; success closes it for good."
	case yesguardv1.Reason_REASON_ALREADY_REDEEMED:
		what := "was already redeemed, on this or another replica"
		if errors.Is(err, approval.ErrYesRedeemed) {
			what = "rests on a caller's yes that another approval of the same action already redeemed (a failure let the guard allow it again)"
		} else if st, err := s.cfg.Approvals.Ledger.State(ctx, c.DecisionID); err == nil && st == approval.LedgerDone {
			what = "belongs to an action already reported done"
		}
		return "Do not execute " + action + ": this approval " + what + ", and each approval executes once. " +
			"Answer a retried request with the first one's result; a new action needs the caller's new yes (a new Check)."
	case yesguardv1.Reason_REASON_APPROVAL_EXPIRED:
		return "Do not execute " + action + ": its approval expired at " + c.ExpiresAt.Format(time.RFC3339) + ", so the caller's yes is no longer fresh. " +
			"The pipeline must ask the caller again and Check again for a new approval."
	case yesguardv1.Reason_REASON_APPROVAL_MISMATCH:
		return "Do not execute this request: the approval is for other details (" + detail + "). " +
			"Execute exactly what the caller approved, or have the pipeline confirm these details with the caller and Check again."
	case yesguardv1.Reason_REASON_INTERNAL:
		return "Do not execute " + action + " yet: the guard could not reach its redeem ledger, so nothing was redeemed. " +
			"Retry the Redeem in a moment, and execute only once it answers REDEEMED."
	}
	return "Do not execute " + action + ": the approval is not valid (" + detail + "): malformed, forged, altered, or signed by a key this guard no longer accepts. " +
		"Refuse the request: an approval comes only from the guard's ALLOW."
}

// maxDetail bounds a detail taken from an error (a malformed token's
// header may be quoted in it).
const maxDetail = 240
