// Package metrics is the catalogue of every Prometheus series yesguard
// exports. Each series is declared here once, with its help string, and
// registered on an injected prometheus.Registerer (no globals), so each test
// and each embedded guard has its own registry.
//
// Names follow yesguard_<subsystem>_<name>_<unit>; counters end in _total and
// durations are in seconds. Labels are bounded: tool names come only from the
// policy (an unlisted tool is labelled "other"), never call ids.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every series.
const Namespace = "yesguard"

// OtherTool is the tool label for tools the policy does not list, so that a
// model inventing tool names cannot grow the label set.
const OtherTool = "other"

// LatencyBuckets resolve 100 µs to 2 s.
var LatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.5, 2,
}

// Metrics holds every collector. The zero value is not usable; use New.
type Metrics struct {
	// Guard.
	Decisions       *prometheus.CounterVec   // tool, outcome, reason
	CheckDuration   *prometheus.HistogramVec // outcome
	TranscriptWait  prometheus.Histogram
	CheckErrors     *prometheus.CounterVec // code
	ChecksInFlight  prometheus.Gauge
	Completions     *prometheus.CounterVec // result: ok, failed, unknown
	DecisionLogDrop prometheus.Counter
	DecisionLogLine prometheus.Counter

	// Transcript.
	Events         *prometheus.CounterVec // type, speaker
	EventsRejected *prometheus.CounterVec // reason
	ActiveCalls    prometheus.Gauge
	CallsEvicted   *prometheus.CounterVec // cause: idle, ended, capacity

	// Dedupe.
	DedupeHits   *prometheus.CounterVec // kind: duplicate, quantity, evidence
	Reservations prometheus.Gauge

	// NATS.
	NATSConnected  prometheus.Gauge
	NATSReconnects prometheus.Counter
	NATSErrors     prometheus.Counter

	// BuildInfo is set once at start-up.
	BuildInfo *prometheus.GaugeVec // version, revision, goversion
}

// New builds the catalogue and registers it on reg. A nil reg builds
// unregistered collectors (benchmarks, tools).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "guard", Name: "decisions_total",
			Help: "Check decisions by tool, outcome and reason.",
		}, []string{"tool", "outcome", "reason"}),
		CheckDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "guard", Name: "check_duration_seconds",
			Help:    "Time from a Check's arrival to its decision, waiting included, by outcome.",
			Buckets: LatencyBuckets,
		}, []string{"outcome"}),
		TranscriptWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "guard", Name: "transcript_wait_seconds",
			Help:    "Time a Check spent waiting for the caller's current turn.",
			Buckets: LatencyBuckets,
		}),
		CheckErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "guard", Name: "check_errors_total",
			Help: "Check calls answered with an error instead of a decision, by gRPC code.",
		}, []string{"code"}),
		ChecksInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "guard", Name: "checks_in_flight",
			Help: "Check calls being judged or waiting right now.",
		}),
		Completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "guard", Name: "completions_total",
			Help: "Complete calls by result: ok, failed, or unknown (no such allowed decision).",
		}, []string{"result"}),
		DecisionLogDrop: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "decision_log", Name: "dropped_total",
			Help: "Decision records not written to the log because its queue was full.",
		}),
		DecisionLogLine: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "decision_log", Name: "written_total",
			Help: "Decision records written to the log.",
		}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "transcript", Name: "events_total",
			Help: "Transcript events accepted, by type and speaker.",
		}, []string{"type", "speaker"}),
		EventsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "transcript", Name: "events_rejected_total",
			Help: "Transcript events dropped, by reason.",
		}, []string{"reason"}),
		ActiveCalls: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "transcript", Name: "active_calls",
			Help: "Calls whose transcript state is held.",
		}),
		CallsEvicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "transcript", Name: "calls_evicted_total",
			Help: "Calls whose state was dropped, by cause: idle, ended, capacity.",
		}, []string{"cause"}),
		DedupeHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "dedupe", Name: "hits_total",
			Help: "Repeats caught, by kind: duplicate, quantity, evidence.",
		}, []string{"kind"}),
		Reservations: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "dedupe", Name: "reservations",
			Help: "Allowed actions held for duplicate detection.",
		}),
		NATSConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "nats", Name: "connected",
			Help: "1 while the transcript connection to NATS is up, else 0.",
		}),
		NATSReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nats", Name: "reconnects_total",
			Help: "Times the NATS connection was re-established.",
		}),
		NATSErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nats", Name: "errors_total",
			Help: "Asynchronous NATS errors (slow consumer, permissions, ...).",
		}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "build_info",
			Help: "Always 1; labels carry the build's version, revision and Go version.",
		}, []string{"version", "revision", "goversion"}),
	}
	if reg != nil {
		reg.MustRegister(
			m.Decisions, m.CheckDuration, m.TranscriptWait, m.CheckErrors, m.ChecksInFlight,
			m.Completions, m.DecisionLogDrop, m.DecisionLogLine,
			m.Events, m.EventsRejected, m.ActiveCalls, m.CallsEvicted,
			m.DedupeHits, m.Reservations,
			m.NATSConnected, m.NATSReconnects, m.NATSErrors, m.BuildInfo,
		)
	}
	return m
}

// NewRegistry returns a registry with the Go runtime and process collectors
// and yesguard's catalogue on it.
func NewRegistry() (*prometheus.Registry, *Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, New(reg)
}
