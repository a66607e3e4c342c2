package transcript

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yesguard/yesguard/metrics"
)

// Metrics are the transcript's collectors, shared by a Store and the
// ingesters that feed it.
type Metrics struct {
	Events         *prometheus.CounterVec // type, speaker
	EventsRejected *prometheus.CounterVec // reason
	ActiveCalls    prometheus.Gauge
	CallsEvicted   *prometheus.CounterVec // cause: idle, ended
	LimitHits      *prometheus.CounterVec // limit
	// GRPCEvents counts PublishTranscript's events by result (Writer).
	GRPCEvents     *prometheus.CounterVec // result
	SettleRequests prometheus.Counter     // the stream ingester's (Settle)
	// ConsumerRestarts: the stream ingester's consumer, found stalled,
	// recreated.
	ConsumerRestarts prometheus.Counter
}

// NewMetrics registers the transcript's collectors on reg; a nil reg
// leaves them unregistered.
// Its reason label's every value is exported at zero from the start, so a
// dashboard's query of rejected events matches before the first one.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Events:           metrics.NewCounterVec(reg, metrics.Events),
		EventsRejected:   metrics.NewCounterVec(reg, metrics.EventsRejected),
		ActiveCalls:      metrics.NewGauge(reg, metrics.ActiveCalls),
		CallsEvicted:     metrics.NewCounterVec(reg, metrics.CallsEvicted),
		LimitHits:        metrics.NewCounterVec(reg, metrics.LimitHits),
		GRPCEvents:       metrics.NewCounterVec(reg, metrics.GRPCEvents),
		SettleRequests:   metrics.NewCounter(reg, metrics.SettleRequests),
		ConsumerRestarts: metrics.NewCounter(reg, metrics.ConsumerRestarts),
	}
	for _, r := range rejectReasons {
		m.EventsRejected.WithLabelValues(r)
	}
	for _, r := range []string{WriteStored, WriteDuplicate, WriteRejected, WriteFailed} {
		m.GRPCEvents.WithLabelValues(r)
	}
	return m
}

// rejectReasons are the values of EventsRejected's reason label.
var rejectReasons = []string{
	ReasonBadSubject, ReasonBadJSON, ReasonMissingCallID, ReasonCallIDMismatch, ReasonUnknownType, ReasonUnknownSpeaker,
	ReasonTextTooLong, ReasonBadText, ReasonEmptyText, ReasonBadTimes, ReasonDuplicateSeq, ReasonBadSource, ReasonSeqJump,
	ReasonStreamDiscarded, ReasonStaleSeq, ReasonSeqConflict, ReasonLangTooLong, ReasonResponseIDTooLong, ReasonSourceTooLong,
	ReasonTooManyCalls, ReasonPublisherCalls, ReasonStoreFull, ReasonRateLimited,
}
