package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/dedupe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Complete reports an allowed action's result to the book, so that its
// duplicates get the result, brings its approval's ledger entry in step
// (closeApproval), and writes a Complete record. An approval in the
// request authorises it for that approval's decision only. A failure of
// a redeemed approval is the redeemer's alone to report: without the
// Redeem's receipt it is FailedPrecondition, counted and recorded, and
// changes nothing (holdRedeemed), so the pipeline cannot reopen an
// action the backend is executing or has executed. Only the
// pipeline role may (auth), and of it only the identity whose Check got
// the ALLOW (auth.Identity.Owner, kept in the reservation so that every
// replica knows it) or whoever presents the ALLOW's approval: a failed
// Complete frees the reservation, and a result is what the ALLOW's
// duplicates are told. Anyone else is PermissionDenied, counted.
func (s *Service) Complete(ctx context.Context, req *yesguardv1.CompleteRequest) (*yesguardv1.CompleteResponse, error) {
	if err := auth.RequireRole(ctx, auth.RolePipeline); err != nil {
		s.CountError(codes.PermissionDenied)
		return nil, err
	}
	id, claims, err := s.completeAuthority(req)
	if err != nil {
		return nil, err
	}
	resultJSON := []byte(nil)
	if req.GetResult() != nil {
		b, err := approval.CanonicalResult(req.GetResult())
		if err != nil {
			return nil, s.invalid(fmt.Errorf("result: %w", err))
		}
		resultJSON = b
	}
	owner := dedupe.AnyOwner
	if claims != nil {
		if err := s.requireCall(ctx, claims.CallID); err != nil {
			return nil, err
		}
	} else {
		caller, _ := auth.FromContext(ctx)
		owner = caller.Owner()
	}
	if req.GetFailed() {
		if err := s.holdRedeemed(ctx, id, req.GetReceipt(), claims); err != nil {
			return nil, err
		}
	}
	key, err := s.cfg.Book.Complete(ctx, id, owner, req.GetResult(), req.GetFailed())
	// The record is stamped when the book has the result, not after the
	// approval is closed: a duplicate that saw the original done ended
	// after this time, and a replay orders the two as they happened.
	at := s.now()
	result := "ok"
	if req.GetFailed() {
		result = "failed"
	}
	note, ledgerErr, ledgerOnly := "", error(nil), false
	if errors.Is(err, dedupe.ErrUnknownDecision) && claims != nil {
		// A failure released the action from the book, and a retry
		// redeemed its approval again: that retry's outcome is the
		// ledger's alone.
		key, ledgerOnly = dedupe.Key{CallID: claims.CallID, Tool: claims.Tool, ArgsHash: claims.ArgsHash}, true
		note, err = s.completeInLedger(ctx, id, req.GetFailed(), req.GetReceipt(), claims)
	}
	switch {
	case err == nil && !ledgerOnly:
		note, ledgerErr = s.closeApproval(ctx, id, req.GetFailed(), req.GetReceipt())
	case err == nil:
	case ledgerOnly:
		result = "unknown"
	case errors.Is(err, dedupe.ErrNotOwner):
		result = "refused"
		err = status.Errorf(codes.PermissionDenied, "decision_id %q: it was allowed to another caller; only the token (or client certificate) whose Check got the ALLOW, or whoever presents its approval, may complete it", id)
	case errors.Is(err, dedupe.ErrUnknownDecision):
		result = "unknown"
		err = status.Errorf(codes.NotFound, "decision_id %q: no allowed action is held for it (never allowed, already failed, or expired)", id)
	case errors.Is(err, dedupe.ErrAlreadyCompleted):
		result = "unknown"
		if !req.GetFailed() {
			// A retry of a success whose approval was not closed (below)
			// closes it now; Done is idempotent.
			if _, cerr := s.closeApproval(ctx, id, false, ""); cerr != nil {
				s.cfg.Logger.Warn("a completed action's approval is still not closed", zap.String("decision_id", id), zap.Error(cerr))
			}
		}
		err = status.Errorf(codes.FailedPrecondition, "decision_id %q: its result was already reported", id)
	default:
		result = "unknown"
		err = status.Errorf(codes.Unavailable, "complete %q: the shared decision state did not answer; retry: %v", id, err)
	}
	if errors.Is(ledgerErr, approval.ErrNotRedeemer) {
		// Redeemed between holdRedeemed and the release: the book let
		// the reservation go, the approval stays redeemed.
		result = completeRedeemed
	}
	s.m.completions.WithLabelValues(result).Inc()
	if err != nil {
		s.CountError(status.Code(err))
		return nil, err
	}
	d := &yesguardv1.Decision{
		DecisionId:         ulid.Make().String(),
		Time:               timestamppb.New(at),
		CallId:             key.CallID,
		Tool:               key.Tool,
		ArgsHash:           key.ArgsHash,
		Reason:             yesguardv1.Reason_REASON_COMPLETED,
		Message:            "the allowed action completed; its duplicates get this result",
		OriginalDecisionId: id,
		Result:             string(resultJSON),
		Kind:               yesguardv1.DecisionKind_DECISION_KIND_COMPLETE,
		Replica:            s.cfg.Replica,
	}
	if req.GetFailed() {
		d.Reason = yesguardv1.Reason_REASON_FAILED
		d.Message = "the allowed action failed: its reservation is released and a retry is judged afresh"
	}
	if ledgerOnly {
		d.Message = note
	} else {
		d.Message += note
	}
	if errors.Is(ledgerErr, approval.ErrNotRedeemer) {
		d.Outcome, d.Reason = yesguardv1.Outcome_OUTCOME_REFUSE, yesguardv1.Reason_REASON_ALREADY_REDEEMED
		s.record(ctx, d)
		s.CountError(codes.FailedPrecondition)
		return nil, status.Errorf(codes.FailedPrecondition, "decision_id %q: %s", id, redeemedHeld)
	}
	if ledgerErr != nil {
		d.Message += "; its approval could not be closed (the redeem ledger did not answer) until the Complete is retried"
	}
	s.record(ctx, d)
	if ledgerErr != nil {
		// The book took the result (the record says so), but the approval
		// could still be redeemed: the caller must retry, which closes it.
		s.CountError(codes.Unavailable)
		return nil, status.Errorf(codes.Unavailable, "decision_id %q: the result is recorded, but its approval could not be closed (the redeem ledger did not answer): retry the Complete: %v", id, ledgerErr)
	}
	return &yesguardv1.CompleteResponse{DecisionId: d.DecisionId}, nil
}

// ListDecisions returns a page of a call's records, oldest first, and its
// transcript as the engine holds it when asked.
func (s *Service) ListDecisions(ctx context.Context, req *yesguardv1.ListDecisionsRequest) (*yesguardv1.ListDecisionsResponse, error) {
	if err := validateID("call_id", req.GetCallId(), true); err != nil {
		return nil, s.invalid(err)
	}
	if err := s.requireCall(ctx, req.GetCallId()); err != nil {
		return nil, err
	}
	if req.GetPageSize() < 0 {
		return nil, s.invalid(errors.New("page_size: must not be negative"))
	}
	resp := &yesguardv1.ListDecisionsResponse{}
	if s.cfg.Store != nil {
		list, next, err := s.cfg.Store.List(ctx, req.GetCallId(), int(req.GetPageSize()), req.GetPageToken())
		switch {
		case errors.Is(err, decisions.ErrBadPageToken):
			return nil, s.invalid(err)
		case err != nil:
			s.CountError(codes.Unavailable)
			return nil, status.Errorf(codes.Unavailable, "list decisions of %q: the decision store did not answer; retry: %v", req.GetCallId(), err)
		}
		resp.Decisions, resp.NextPageToken = list, next
	}
	if req.GetIncludeTranscript() {
		resp.Transcript = s.cfg.Engine.Transcript(req.GetCallId())
		if s.cfg.RedactTurns != nil {
			resp.Transcript = s.cfg.RedactTurns(resp.Transcript)
		}
		resp.Transcript = latestTurns(resp.Transcript, maxTranscriptBytes)
	}
	if req.GetIncludeEvents() && req.GetPageToken() == "" {
		if s.cfg.Events == nil {
			s.CountError(codes.FailedPrecondition)
			return nil, status.Error(codes.FailedPrecondition, "include_events: this guard keeps no transcript stream (state memory); replay a recording instead (yesguard probe --record, or the pipeline's events with the decision log)")
		}
		evs, err := s.cfg.Events(ctx, req.GetCallId())
		if st, ok := status.FromError(err); ok && err != nil && st.Code() != codes.Unknown {
			s.CountError(st.Code())
			return nil, err
		}
		if err != nil {
			s.CountError(codes.Unavailable)
			return nil, status.Errorf(codes.Unavailable, "include_events of %q: the transcript stream did not answer; retry: %v", req.GetCallId(), err)
		}
		resp.Events = evs
	}
	return resp, nil
}

// maxTranscriptBytes bounds the transcript of a ListDecisions answer,
// beside the records' decisions.MaxPageBytes and the first page's events
// (server's maxCallEventBytes): together under gRPC's 4 MiB message limit.
const maxTranscriptBytes = 768 << 10

// latestTurns is the latest of turns that fit in max bytes (protobuf
// sizes), oldest first.
func latestTurns(turns []*yesguardv1.Turn, max int) []*yesguardv1.Turn {
	used := 0
	for i := len(turns) - 1; i >= 0; i-- {
		if used += proto.Size(turns[i]); used > max {
			return turns[i+1:]
		}
	}
	return turns
}
