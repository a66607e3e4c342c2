package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/guard"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Approvals is what the service issues and redeems signed approvals with.
type Approvals struct {
	// Signer signs the approval of every ALLOW.
	Signer *approval.Signer
	// Verifier checks the approvals given to Redeem and Complete. It is
	// over the guard's own key set, which every replica holds alike.
	Verifier *approval.Verifier
	// Ledger redeems each approval once: across the replicas sharing a
	// JetStream bucket (approval.Ledger), or in this process
	// (approval.MemoryLedger) for the memory state.
	Ledger approval.Redeemer
}

// issue signs the approval of an ALLOW. When it cannot be signed the
// action is not allowed (fail closed): the verdict becomes a REFUSE
// INTERNAL and its reservation is released, so that a retry is judged
// afresh. It returns nil claims for any verdict but a signed ALLOW.
func (s *Service) issue(ctx context.Context, req *yesguardv1.CheckRequest, argsHash string, v *guard.Verdict) (string, *approval.Claims) {
	a := s.cfg.Approvals
	if a == nil || v.Outcome != yesguardv1.Outcome_OUTCOME_ALLOW {
		return "", nil
	}
	ap := approval.Approval{
		DecisionID: v.DecisionID,
		CallID:     req.GetCallId(),
		Tool:       req.GetTool(),
		ArgsHash:   argsHash,
		TTL:        v.ApprovalTTL,
	}
	if t := v.Turn; t != nil {
		ap.Turn = &approval.Turn{TextHash: approval.TextHash(t.GetText()), StartMs: t.GetStartMs(), EndMs: t.GetEndMs()}
		if t.GetReceivedAt() != nil {
			ap.Turn.ReceivedAt = t.GetReceivedAt().AsTime()
		}
	}
	token, claims, err := a.Signer.Sign(ap)
	if err == nil {
		return token, claims
	}
	s.cfg.Logger.Error("approval not signed: the ALLOW is refused as INTERNAL and its reservation released",
		zap.String("decision_id", v.DecisionID), zap.Error(err))
	if _, rerr := s.cfg.Book.Complete(context.WithoutCancel(ctx), v.DecisionID, dedupe.AnyOwner, nil, true); rerr != nil {
		s.cfg.Logger.Warn("the unsigned ALLOW's reservation was not released; it expires by itself",
			zap.String("decision_id", v.DecisionID), zap.Error(rerr))
	}
	v.Outcome, v.Reason = yesguardv1.Outcome_OUTCOME_REFUSE, yesguardv1.Reason_REASON_INTERNAL
	v.Message = "Do not run " + req.GetTool() + ": the guard could not sign the approval the system of record needs for it (an internal fault). " +
		"Tell the caller you cannot complete it at the moment."
	v.Turn, v.ApprovalTTL = nil, 0
	if v.Evidence == nil {
		v.Evidence = &yesguardv1.Evidence{}
	}
	v.Evidence.Detail = "the caller confirmed, but the approval could not be signed: " + err.Error()
	return "", nil
}

// completeAuthority checks the approval a Complete carries, if any: it
// must be a token this guard signed, valid or merely expired (the action
// may finish after its approval's life), for the decision being
// completed. It returns the decision id (the request's, or the
// approval's when the request names none) and the approval's claims (nil
// without one).
func (s *Service) completeAuthority(req *yesguardv1.CompleteRequest) (string, *approval.Claims, error) {
	id, token := req.GetDecisionId(), req.GetApproval()
	if token == "" {
		if err := validateID("decision_id", id, true); err != nil {
			return "", nil, s.invalid(fmt.Errorf("%w: the decision_id of the ALLOW whose result this is", err))
		}
		return id, nil, nil
	}
	if s.cfg.Approvals == nil {
		return "", nil, s.refusedComplete(codes.FailedPrecondition, "approval: this guard issues no approvals; complete by decision_id")
	}
	c, err := s.cfg.Approvals.Verifier.Verify(token)
	if err != nil && !(errors.Is(err, approval.ErrExpired) && c != nil) {
		return "", nil, s.refusedComplete(codes.PermissionDenied, "approval: it does not authorise this Complete: "+guard.Clip(err.Error(), maxDetail))
	}
	if id != "" && id != c.DecisionID {
		return "", nil, s.refusedComplete(codes.PermissionDenied, "approval: it is the approval of decision "+c.DecisionID+", not of "+id+": complete each decision with its own approval")
	}
	return c.DecisionID, c, nil
}

// completeRedeemed is the completions label of a Complete(failed) refused
// because the approval is redeemed and the Complete lacks its receipt.
const completeRedeemed = "redeemed"

// redeemedHeld is what a refused release answers: who may release it,
// and what to do instead.
const redeemedHeld = "its approval is redeemed, so the system of record that redeemed it is executing the action or has done so. " +
	"Only that redeemer may report a failure, with the receipt its Redeem answered; nothing was changed. " +
	"Do not retry the action: wait for the system of record's result, or ask the caller again for a new action"

// holdRedeemed refuses a Complete(failed) of a decision whose approval
// is redeemed, unless receipt is that Redeem's: the refusal is
// FailedPrecondition, counted and recorded, and neither the book nor the
// ledger changes. It only reads: the ledger's Release checks the receipt
// again atomically, so a redeem landing after this check still cannot be
// reopened (closeApproval). A ledger that does not answer lets the
// Complete go on: its release will fail closed.
func (s *Service) holdRedeemed(ctx context.Context, id, receipt string, claims *approval.Claims) error {
	a := s.cfg.Approvals
	if a == nil {
		return nil
	}
	r, err := a.Ledger.CheckRelease(ctx, id, receipt)
	if !errors.Is(err, approval.ErrNotRedeemer) {
		return nil
	}
	return s.refuseRelease(ctx, id, r, claims)
}

// refuseRelease records and answers a release the ledger refused for
// want of the redeemer's receipt.
func (s *Service) refuseRelease(ctx context.Context, id string, r approval.Redemption, claims *approval.Claims) error {
	if claims != nil {
		r.CallID, r.Tool, r.ArgsHash = claims.CallID, claims.Tool, claims.ArgsHash
	}
	s.record(ctx, &yesguardv1.Decision{
		DecisionId:         ulid.Make().String(),
		Time:               timestamppb.New(s.now()),
		CallId:             r.CallID,
		Tool:               r.Tool,
		ArgsHash:           r.ArgsHash,
		Outcome:            yesguardv1.Outcome_OUTCOME_REFUSE,
		Reason:             yesguardv1.Reason_REASON_ALREADY_REDEEMED,
		Message:            "the failure was refused: " + redeemedHeld,
		OriginalDecisionId: id,
		Kind:               yesguardv1.DecisionKind_DECISION_KIND_COMPLETE,
		Replica:            s.cfg.Replica,
		Evidence:           &yesguardv1.Evidence{Detail: "Complete(failed) without the receipt of the Redeem that holds the approval"},
	})
	s.m.completions.WithLabelValues(completeRedeemed).Inc()
	s.CountError(codes.FailedPrecondition)
	return status.Errorf(codes.FailedPrecondition, "decision_id %q: %s", id, redeemedHeld)
}

// completeInLedger reports, with its approval, the outcome of a decision
// the book no longer holds (a failure released it, then a retry redeemed
// the approval again): a success closes the approval for good, a failure
// with the retry's receipt reopens it for the next retry, and a failure
// after a success, or without that receipt, is refused. It returns the
// record's message, or a status error when nothing changed.
func (s *Service) completeInLedger(ctx context.Context, id string, failed bool, receipt string, claims *approval.Claims) (string, error) {
	l := s.cfg.Approvals.Ledger
	if !failed {
		if err := l.Done(ctx, id); err != nil {
			return "", status.Errorf(codes.Unavailable, "decision_id %q: its approval could not be closed (the redeem ledger did not answer): retry the Complete: %v", id, err)
		}
		return "the action redeemed again after a failure completed: its approval is closed for good", nil
	}
	err := l.Release(ctx, id, receipt)
	switch {
	case err == nil:
		return "the action redeemed again after a failure failed too: its approval may be redeemed again by a retry", nil
	case errors.Is(err, approval.ErrNotRedeemer):
		return "", s.refuseRelease(ctx, id, approval.Redemption{State: approval.LedgerRedeemed}, claims)
	case errors.Is(err, approval.ErrCompleted):
		return "", status.Errorf(codes.FailedPrecondition, "decision_id %q: its action was already reported done; a success is never undone", id)
	default:
		return "", status.Errorf(codes.Unavailable, "decision_id %q: its approval could not be reopened (the redeem ledger did not answer): retry the Complete: %v", id, err)
	}
}

func (s *Service) refusedComplete(code codes.Code, msg string) error {
	s.m.completions.WithLabelValues("unknown").Inc()
	s.CountError(code)
	return status.Error(code, msg)
}

// closeApproval brings the ledger in step with a Complete the book took:
// a success closes the decision's approval for good (never redeemed
// again, even if it never was), a failure reopens it so that a retry may
// redeem it. It returns what the record should add to its message.
func (s *Service) closeApproval(ctx context.Context, decisionID string, failed bool, receipt string) (string, error) {
	a := s.cfg.Approvals
	if a == nil {
		return "", nil
	}
	if !failed {
		if err := a.Ledger.Done(ctx, decisionID); err != nil {
			return "", err
		}
		return "", nil
	}
	err := a.Ledger.Release(ctx, decisionID, receipt)
	switch {
	case err == nil:
		return "; its approval may be redeemed again by a retry", nil
	case errors.Is(err, approval.ErrNotRedeemer):
		// Redeemed since holdRedeemed read the ledger: the book let the
		// reservation go, but the approval stays redeemed (its yes too).
		return "; the failure of the approval was refused: " + redeemedHeld, err
	case errors.Is(err, approval.ErrCompleted):
		// Only a backend's own Ledger.Done on the shared bucket closes a
		// decision the book had not completed: it stays closed.
		return "; its approval stays closed: the system of record reported the action done", nil
	default:
		// The book released the action; the approval stays redeemed, so
		// it cannot run twice (fail closed): a retry needs a new Check.
		s.cfg.Logger.Warn("a failed action's approval was not reopened; a retry needs a new Check",
			zap.String("decision_id", decisionID), zap.Error(err))
		return "; its approval could not be reopened (the redeem ledger did not answer): a retry needs a new Check", nil
	}
}
