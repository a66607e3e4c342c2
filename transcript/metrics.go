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
	SettleRequests prometheus.Counter     // the stream ingester's (Settle)
	// ConsumerRestarts: the stream ingester's consumer, found stalled,
	// recreated.
	ConsumerRestarts prometheus.Counter
}

// NewMetrics registers the transcript's collectors on reg; a nil reg
// leaves them unregistered.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		Events:           metrics.NewCounterVec(reg, metrics.Events),
		EventsRejected:   metrics.NewCounterVec(reg, metrics.EventsRejected),
		ActiveCalls:      metrics.NewGauge(reg, metrics.ActiveCalls),
		CallsEvicted:     metrics.NewCounterVec(reg, metrics.CallsEvicted),
		LimitHits:        metrics.NewCounterVec(reg, metrics.LimitHits),
		SettleRequests:   metrics.NewCounter(reg, metrics.SettleRequests),
		ConsumerRestarts: metrics.NewCounter(reg, metrics.ConsumerRestarts),
	}
}
