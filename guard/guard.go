// Package guard judges whether a tool call rests on a plain yes the caller
// gave. It serves the yesguard.v1.Guard gRPC service: Check waits a bounded
// time for the caller's current turn, applies the rules (latest words, plain
// yes, a question or confirm request, about this action), consults the
// dedupe book, and writes one decision record per Check.
//
// Rules that hold:
//   - Fail closed: an unknown call, a down transcript feed, a timeout, an
//     unsupported language or an internal fault refuses the action, with a
//     reason and a message telling the model what to do next.
//   - Every Check that passes validation produces exactly one decision
//     record, written to the decision sink and kept for ListDecisions, even
//     when its caller has gone away.
//   - Waiting is woken by transcript changes, never by polling, and never
//     outlasts the policy's wait or the caller's deadline.
package guard

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/metrics"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

var _ yesguardv1.GuardServer = (*Guard)(nil)

// DecisionSink receives every decision record. Write must not block: a sink
// that cannot keep up drops and counts.
type DecisionSink interface {
	Write(d *yesguardv1.Decision)
}

// Config wires a Guard.
type Config struct {
	Policy  *Policy
	Locales *patterns.Set
	Store   *transcript.Store
	Book    *dedupe.Book
	// Sink receives each decision record; nil discards them (they are
	// still kept for ListDecisions).
	Sink DecisionSink
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// FeedUp reports whether the transcript feed is connected; nil means
	// always up. While it reports false, every Check is refused.
	FeedUp func() bool
	// Logger for operational messages (not decisions); nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxDecisionsPerCall kept for ListDecisions (default 256).
	MaxDecisionsPerCall int
	// DecisionTTL: a call's decisions are forgotten this long after its
	// last decision (default 1h).
	DecisionTTL time.Duration
}

// Guard implements yesguardv1.GuardServer.
type Guard struct {
	yesguardv1.UnimplementedGuardServer

	cfg       Config
	rules     atomic.Pointer[ruleset]
	decisions *decisionStore
}
