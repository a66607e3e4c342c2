// Package service serves the engine (package guard) as the gRPC service
// yesguard.v1.Guard. It owns what the engine does not know of: request
// validation (InvalidArgument naming the field), the canonical arguments
// and their hash, decision ids (ULIDs), the decision record and where it
// goes (the decision sink and the decision store), Complete,
// ListDecisions, the signed approval of every ALLOW and its Redeem, and
// the metrics labelled by tool, outcome, reason and gRPC code.
//
// Rules that hold:
//   - Every Check that passes validation writes exactly one decision
//     record, to the sink and to the store, even when its caller has gone
//     away; so does every Complete that finds its decision, and every
//     Redeem that passes validation (kind REDEEM, original_decision_id the
//     ALLOW). A record with no call id (the Redeem of a token whose
//     signature did not verify) goes to the sink only: the store keys
//     records by call.
//   - With Approvals configured, every ALLOW carries its approval, signed
//     before the answer; an ALLOW whose approval cannot be signed is
//     refused (INTERNAL) and its reservation released. A Redeem executes
//     the action at most once across every replica sharing the ledger:
//     it answers REDEEMED only after the ledger's atomic claim. A
//     successful Complete closes the decision's approval for good; a
//     failed one reopens it, once the book (or, for a retry the book no
//     longer holds, the approval's ledger entry) took the report.
//   - A record is not changed once written; the answer shares its
//     evidence.
//   - The Check answer carries the short evidence (question sentence,
//     answer text, detail) always, and the full evidence only when the
//     request sets include_evidence; the record always holds the whole.
//     Both are redacted by the same rules (Config.Redact): a pipeline
//     token reads no more of a call than an auditor does.
//   - A token bound to call-id prefixes (auth.Token.Calls) is
//     PermissionDenied, counted, on any other call: Check, ListDecisions,
//     Redeem, and Complete (its decision's call, through the owner or the
//     approval's call id).
//   - Metric labels are bounded: a tool the policy does not list is
//     labelled by its name for the first 32 such tools, then "other".
//   - The known label sets of the error, completion and redeem counters
//     are exported at zero from the start, so a dashboard's query of them
//     matches before the first one happens.
package service

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/metrics"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

var _ yesguardv1.GuardServer = (*Service)(nil)

// DecisionSink receives every decision record. Write must not block: a sink
// that cannot keep up drops and counts.
type DecisionSink interface {
	Write(d *yesguardv1.Decision)
}

// CallerSink is a DecisionSink that also logs who asked for each record
// (auth.Identity's String: a token's name and roles, a certificate's
// subject, never a token); the service uses it when the sink is one.
type CallerSink interface {
	DecisionSink
	WriteCaller(d *yesguardv1.Decision, caller string)
}

// Config wires a Service.
type Config struct {
	// Engine judges the Checks.
	Engine *guard.Guard
	// Book is the engine's book, which Complete reports results to.
	Book dedupe.Book
	// Store keeps the records for ListDecisions.
	Store decisions.Store
	// Sink receives each record (the decision log); nil discards them.
	Sink DecisionSink
	// Replica names this guard in the records it writes.
	Replica string
	// Approvals signs the approval of every ALLOW and redeems them; nil
	// issues none, and Redeem answers FailedPrecondition.
	Approvals *Approvals
	// Registerer receives the service's collectors; nil leaves them
	// unregistered.
	Registerer prometheus.Registerer
	// Logger for operational messages; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Redact returns the copy of a record that the sink, the store and
	// the Check's answer get (package redact). Nil keeps records whole.
	Redact func(*yesguardv1.Decision) *yesguardv1.Decision
	// RedactTurns does the same for ListDecisions' transcript.
	RedactTurns func([]*yesguardv1.Turn) []*yesguardv1.Turn
	// Events reads a call's transcript events for ListDecisions'
	// include_events, redacted as its transcript is; nil (no transcript
	// stream) answers FailedPrecondition.
	Events func(ctx context.Context, callID string) ([]*yesguardv1.ReceivedEvent, error)
	// Transcripts stores PublishTranscript's events in the transcript
	// stream; nil (the memory state, or an external NATS) answers
	// FailedPrecondition.
	Transcripts TranscriptWriter
}

// Service implements yesguardv1.GuardServer.
type Service struct {
	yesguardv1.UnimplementedGuardServer

	cfg   Config
	m     serviceMetrics
	tools toolLabels
}

type serviceMetrics struct {
	decisions     *prometheus.CounterVec   // tool, outcome, reason
	checkDuration *prometheus.HistogramVec // outcome
	errors        *prometheus.CounterVec   // code
	completions   *prometheus.CounterVec   // result
	hits          *prometheus.CounterVec   // kind
	redeems       *prometheus.CounterVec   // reason
	unencodable   prometheus.Counter
	trimmed       prometheus.Counter
}

// New builds a service over cfg.Engine.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	reg := cfg.Registerer
	s := &Service{cfg: cfg, m: serviceMetrics{
		decisions:     metrics.NewCounterVec(reg, metrics.Decisions),
		checkDuration: metrics.NewHistogramVec(reg, metrics.CheckDuration),
		errors:        metrics.NewCounterVec(reg, metrics.CheckErrors),
		completions:   metrics.NewCounterVec(reg, metrics.Completions),
		hits:          metrics.NewCounterVec(reg, metrics.DedupeHits),
		redeems:       metrics.NewCounterVec(reg, metrics.Redeems),
		unencodable:   metrics.NewCounter(reg, metrics.DecisionsUnencodable),
		trimmed:       metrics.NewCounter(reg, metrics.DecisionsTrimmed),
	}}
	for _, c := range errorCodes {
		s.m.errors.WithLabelValues(c.String())
	}
	for _, r := range completionResults {
		s.m.completions.WithLabelValues(r)
	}
	for _, r := range redeemReasons {
		s.m.redeems.WithLabelValues(reasonLabel(r))
	}
	for _, k := range []string{metrics.HitDuplicate, metrics.HitEvidence, metrics.HitQuantity} {
		s.m.hits.WithLabelValues(k)
	}
	return s
}

// completionResults are the result labels of the completions counter.
var completionResults = []string{"ok", "failed", "unknown", "refused", completeRedeemed}

// errorCodes are the codes the service answers errors with.
var errorCodes = []codes.Code{
	codes.InvalidArgument, codes.PermissionDenied, codes.NotFound, codes.FailedPrecondition,
	codes.ResourceExhausted, codes.Unavailable, codes.Internal,
}

// redeemReasons are the reasons a Redeem answers with (redeemReason).
var redeemReasons = []yesguardv1.Reason{
	yesguardv1.Reason_REASON_REDEEMED, yesguardv1.Reason_REASON_ALREADY_REDEEMED, yesguardv1.Reason_REASON_APPROVAL_EXPIRED,
	yesguardv1.Reason_REASON_APPROVAL_MISMATCH, yesguardv1.Reason_REASON_APPROVAL_INVALID, yesguardv1.Reason_REASON_INTERNAL,
}

func (s *Service) now() time.Time { return s.cfg.Now() }

// CountError counts a Guard call answered with an error; the server's
// panic recovery calls it for the calls it answers.
func (s *Service) CountError(code codes.Code) {
	s.m.errors.WithLabelValues(code.String()).Inc()
}
