// Package guard is yesguard's engine: it judges whether a tool call rests
// on a plain yes the caller gave. Check waits a bounded time for the
// caller's current turn, applies the rules (latest words, plain yes, a
// question or confirm request, about this action), reserves the action
// through the dedupe book, and returns a Verdict: the outcome, the reason,
// the evidence, the message for the model, the original decision of a
// repeat, the caller turn used and the time waited.
//
// The engine knows nothing of gRPC, request validation, decision records or
// the labels of metrics: package service serves it as yesguard.v1.Guard.
// It can be driven in process with no NATS and no gRPC (a transcript Store
// fed directly and a memory book), under the same timing rules.
//
// Rules that hold:
//   - Fail closed: an unknown call, a down or incomplete transcript feed, a
//     timeout, an unsupported language, a book that does not answer or an
//     internal fault (a panic included) refuses the action, with a reason
//     and a message telling the model what to do next. Check always
//     returns a verdict.
//   - Waiting is woken by transcript changes and by the book, never by
//     polling, and never outlasts the policy's wait or the caller's
//     deadline. A duplicate of a running original answers well before the
//     deadline, saying that the original still runs.
package guard

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/internal/ask"
	"github.com/yesguard/yesguard/metrics"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// FeedState is what the transcript feed can promise at a moment.
type FeedState int

// Feed states.
const (
	// FeedLive: connected and caught up; every event published so far has
	// been applied, or is on its way.
	FeedLive FeedState = iota
	// FeedDown: not connected; nothing can be judged
	// (REASON_TRANSCRIPT_UNAVAILABLE).
	FeedDown
	// FeedBehind: connected but not caught up (after a start or a
	// reconnect): events may be missing (REASON_TRANSCRIPT_GAP).
	FeedBehind
	// FeedLagging: caught up once, but behind the stream now (a flood):
	// the call's own events may not have been applied yet, so a Check
	// settles (Config.Settle) before it looks at the call at all, and
	// refuses (REASON_TRANSCRIPT_GAP) when that does not finish in time.
	FeedLagging
)

// Config wires a Guard.
type Config struct {
	Policy  *Policy
	Locales *patterns.Set
	Store   *transcript.Store
	Book    dedupe.Book
	// Feed reports the transcript feed's state and, when it is not live,
	// why, for the refusal's detail; nil means always live.
	Feed func() (FeedState, string)
	// Settle, when set, waits until every transcript event of the call
	// published before it was called has been applied to Store (the
	// JetStream state: another replica's pipeline may be ahead of this
	// replica's consumer). The engine calls it before it claims an ALLOW
	// and judges again if the call changed; an error refuses
	// (REASON_TRANSCRIPT_GAP).
	Settle func(ctx context.Context, callID string) error
	// Registerer receives the engine's collectors (the transcript wait and
	// the checks in flight); nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Logger for operational messages; nil means none.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// DuplicateWait bounds how long a duplicate waits for its running
	// original's result before it answers DUPLICATE with original_running
	// (default 500ms; never more than a quarter of the time left to the
	// caller's deadline).
	DuplicateWait time.Duration
	// Asks remembers the guard's own questions (ask.go); nil takes Book's
	// when it has them, else the guard issues none.
	Asks dedupe.Asks
	// AskLocales say the guard's questions; nil loads the embedded ones.
	AskLocales *ask.Set
}

// Request is one tool call to judge.
type Request struct {
	// CallID is the call: the last token of its transcript subject.
	CallID string
	// Tool is the tool's name as the model called it.
	Tool string
	// Args are the model's arguments.
	Args *structpb.Struct
	// ArgsHash identifies the arguments in the action's key (the hex
	// sha256 of approval.CanonicalArgs); empty, the engine computes it.
	ArgsHash string
	// DecisionID names the decision: an ALLOW's reservation is held, and
	// completed, under it. Empty, the engine makes a ULID.
	DecisionID string
	// ResponseID, optional, is the model response that made the call:
	// agent speech carrying it does not count as the agent speaking after
	// the caller.
	ResponseID string
	// RespondingToMS, optional, is the audio time at which the caller turn
	// the model answers ended: the engine waits for a caller final that
	// reaches it.
	RespondingToMS int64
	// Wait, optional, is how long to wait for the caller's turn instead of
	// the policy's wait for the tool; the policy's max_wait caps it.
	Wait time.Duration
	// Owner is who asks (dedupe.Request.Owner): only it may complete an
	// ALLOW's reservation.
	Owner string
}

// GetCallId, GetResponseId and GetRespondingToMs read a Request as the
// rules read it, whatever its origin; they are nil-safe.
func (r *Request) GetCallId() string {
	if r == nil {
		return ""
	}
	return r.CallID
}

// GetResponseId returns ResponseID.
func (r *Request) GetResponseId() string {
	if r == nil {
		return ""
	}
	return r.ResponseID
}

// GetRespondingToMs returns RespondingToMS.
func (r *Request) GetRespondingToMs() int64 {
	if r == nil {
		return 0
	}
	return r.RespondingToMS
}

// Verdict is the engine's answer to one Request.
type Verdict struct {
	DecisionID string
	Outcome    yesguardv1.Outcome
	Reason     yesguardv1.Reason
	// Message tells the model what to do next.
	Message string
	// Evidence is what the decision relied on; its Detail says why in one
	// line. Never nil.
	Evidence *yesguardv1.Evidence
	// OriginalDecisionID: for DUPLICATE, IGNORED and EVIDENCE_USED, the
	// decision this one repeats.
	OriginalDecisionID string
	// OriginalResult: for DUPLICATE, the result Complete reported for the
	// original, once known. Shared: do not modify.
	OriginalResult *structpb.Struct
	// OriginalRunning: for DUPLICATE, the original has not completed yet.
	OriginalRunning bool
	// Ask is the guard's own question, on a REFUSE a fresh question can
	// mend (ask.go).
	Ask *yesguardv1.Ask
	// Turn is the caller turn an ALLOW rests on (nil when none, as for
	// NOT_REQUIRED or a refusal).
	Turn *yesguardv1.Turn
	// ApprovalTTL is, for an ALLOW, how long its signed approval stays
	// valid: the policy's approval_ttl for the tool, from the rules it was
	// judged under.
	ApprovalTTL time.Duration
	// Waited is how long the check waited, for the caller's turn and for a
	// running original.
	Waited time.Duration
	// PolicyVersion identifies the policy and locales it was judged under.
	PolicyVersion string
	// ToolListed reports whether the policy lists the tool.
	ToolListed bool
}

// The getters of Verdict are those of yesguardv1.CheckResponse, and
// nil-safe like them, so that code written against the wire answer (the
// rule and corpus tests, `yesguard test`) reads a verdict alike.

// GetDecisionId returns DecisionID.
func (v *Verdict) GetDecisionId() string {
	if v == nil {
		return ""
	}
	return v.DecisionID
}

// GetOutcome returns Outcome.
func (v *Verdict) GetOutcome() yesguardv1.Outcome {
	if v == nil {
		return yesguardv1.Outcome_OUTCOME_UNSPECIFIED
	}
	return v.Outcome
}

// GetReason returns Reason.
func (v *Verdict) GetReason() yesguardv1.Reason {
	if v == nil {
		return yesguardv1.Reason_REASON_UNSPECIFIED
	}
	return v.Reason
}

// GetMessage returns Message.
func (v *Verdict) GetMessage() string {
	if v == nil {
		return ""
	}
	return v.Message
}

// GetEvidence returns Evidence.
func (v *Verdict) GetEvidence() *yesguardv1.Evidence {
	if v == nil {
		return nil
	}
	return v.Evidence
}

// GetOriginalDecisionId returns OriginalDecisionID.
func (v *Verdict) GetOriginalDecisionId() string {
	if v == nil {
		return ""
	}
	return v.OriginalDecisionID
}

// GetOriginalResult returns OriginalResult.
func (v *Verdict) GetOriginalResult() *structpb.Struct {
	if v == nil {
		return nil
	}
	return v.OriginalResult
}

// GetOriginalRunning returns OriginalRunning.
func (v *Verdict) GetOriginalRunning() bool {
	return v != nil && v.OriginalRunning
}

// GetWaitedMs returns Waited in milliseconds.
func (v *Verdict) GetWaitedMs() int64 {
	if v == nil {
		return 0
	}
	return v.Waited.Milliseconds()
}

// Guard is the engine. It is safe for concurrent use.
type Guard struct {
	cfg   Config
	rules atomic.Pointer[ruleset]

	transcriptWait prometheus.Histogram
	inFlight       prometheus.Gauge
	asks           *prometheus.CounterVec
}

// metricsOf builds the engine's collectors on reg.
func (g *Guard) metricsOf(reg prometheus.Registerer) {
	g.transcriptWait = metrics.NewHistogram(reg, metrics.TranscriptWait)
	g.inFlight = metrics.NewGauge(reg, metrics.ChecksInFlight)
	g.asks = metrics.NewCounterVec(reg, metrics.Asks)
	for _, e := range metrics.AskEvents {
		g.asks.WithLabelValues(e)
	}
}
