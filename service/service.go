// Package service serves the engine (package guard) as the gRPC service
// yesguard.v1.Guard. It owns what the engine does not know of: request
// validation (InvalidArgument naming the field), the canonical arguments
// and their hash, decision ids (ULIDs), the decision record and where it
// goes (the decision sink and the decision store), Complete,
// ListDecisions, and the metrics labelled by tool, outcome, reason and
// gRPC code.
//
// Rules that hold:
//   - Every Check that passes validation writes exactly one decision
//     record, to the sink and to the store, even when its caller has gone
//     away; so does every Complete that finds its decision.
//   - A record is not changed once written; the answer shares its
//     evidence.
//   - The Check answer carries the short evidence (question sentence,
//     answer text, detail) always, and the full evidence only when the
//     request sets include_evidence; the record always holds the whole.
//   - Metric labels are bounded: a tool the policy does not list is
//     labelled "other".
package service

import (
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
	// Registerer receives the service's collectors; nil leaves them
	// unregistered.
	Registerer prometheus.Registerer
	// Logger for operational messages; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Redact returns the copy of a record that the sink and the store
	// get (package redact); the Check's answer is made from the verdict
	// and never redacted. Nil keeps records whole.
	Redact func(*yesguardv1.Decision) *yesguardv1.Decision
	// RedactTurns does the same for ListDecisions' transcript.
	RedactTurns func([]*yesguardv1.Turn) []*yesguardv1.Turn
}

// Service implements yesguardv1.GuardServer. Redeem is not served yet
// (Unimplemented).
type Service struct {
	yesguardv1.UnimplementedGuardServer

	cfg Config
	m   serviceMetrics
}

type serviceMetrics struct {
	decisions     *prometheus.CounterVec   // tool, outcome, reason
	checkDuration *prometheus.HistogramVec // outcome
	errors        *prometheus.CounterVec   // code
	completions   *prometheus.CounterVec   // result
	hits          *prometheus.CounterVec   // kind
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
	return &Service{cfg: cfg, m: serviceMetrics{
		decisions:     metrics.NewCounterVec(reg, metrics.Decisions),
		checkDuration: metrics.NewHistogramVec(reg, metrics.CheckDuration),
		errors:        metrics.NewCounterVec(reg, metrics.CheckErrors),
		completions:   metrics.NewCounterVec(reg, metrics.Completions),
		hits:          metrics.NewCounterVec(reg, metrics.DedupeHits),
	}}
}

func (s *Service) now() time.Time { return s.cfg.Now() }

// CountError counts a Guard call answered with an error; the server's
// panic recovery calls it for the calls it answers.
func (s *Service) CountError(code codes.Code) {
	s.m.errors.WithLabelValues(code.String()).Inc()
}
