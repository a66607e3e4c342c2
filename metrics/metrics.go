// Package metrics is the catalogue of every Prometheus series yesguard
// exports. Each series is declared here once, with its help string, and
// registered on an injected prometheus.Registerer (no globals), so each test
// and each embedded guard has its own registry.
//
// Names follow yesguard_<subsystem>_<name>_<unit>; counters end in _total and
// durations are in seconds. Labels are bounded: tool names come only from the
// policy (an unlisted tool is labelled "other"), never call ids.
//
// Catalogue lists every series, so that the dashboard and the operations
// guide can be checked against it; a series added to Metrics but not to the
// catalogue fails this package's tests.
package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every series.
const Namespace = "yesguard"

// OtherTool is the tool label for tools the policy does not list, so that a
// model inventing tool names cannot grow the label set.
const OtherTool = "other"

// Values of the kind label of yesguard_dedupe_hits_total.
const (
	HitDuplicate = "duplicate"
	HitEvidence  = "evidence"
	HitQuantity  = "quantity"
)

// LatencyBuckets resolve 100 µs to 2 s.
var LatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.5, 2,
}

// Type is a series' Prometheus type.
type Type string

// Types.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Series describes one metric family of the catalogue.
type Series struct {
	// Name is the full name, yesguard_<subsystem>_<name>_<unit>. A
	// histogram also exports Name_bucket, Name_sum and Name_count.
	Name   string
	Type   Type
	Help   string
	Labels []string
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

	series     []Series
	collectors []prometheus.Collector
}

// builder declares series: each constructor records the series in the
// catalogue and keeps the collector for registration.
type builder struct{ m *Metrics }

func (b builder) add(s Series, c prometheus.Collector) {
	b.m.series = append(b.m.series, s)
	b.m.collectors = append(b.m.collectors, c)
}

func fqName(subsystem, name string) string {
	return prometheus.BuildFQName(Namespace, subsystem, name)
}

func (b builder) counter(subsystem, name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
	b.add(Series{Name: fqName(subsystem, name), Type: Counter, Help: help}, c)
	return c
}

func (b builder) counterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	b.add(Series{Name: fqName(subsystem, name), Type: Counter, Help: help, Labels: labels}, c)
	return c
}

func (b builder) gauge(subsystem, name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
	b.add(Series{Name: fqName(subsystem, name), Type: Gauge, Help: help}, g)
	return g
}

func (b builder) gaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	b.add(Series{Name: fqName(subsystem, name), Type: Gauge, Help: help, Labels: labels}, g)
	return g
}

func (b builder) histogram(subsystem, name, help string) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: LatencyBuckets})
	b.add(Series{Name: fqName(subsystem, name), Type: Histogram, Help: help}, h)
	return h
}

func (b builder) histogramVec(subsystem, name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: LatencyBuckets}, labels)
	b.add(Series{Name: fqName(subsystem, name), Type: Histogram, Help: help, Labels: labels}, h)
	return h
}

// New builds the catalogue and registers it on reg. A nil reg builds
// unregistered collectors (benchmarks, tools).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	b := builder{m}

	m.Decisions = b.counterVec("guard", "decisions_total",
		"Check decisions by tool, outcome and reason.", "tool", "outcome", "reason")
	m.CheckDuration = b.histogramVec("guard", "check_duration_seconds",
		"Time from a Check's arrival to its decision, waiting included, by outcome.", "outcome")
	m.TranscriptWait = b.histogram("guard", "transcript_wait_seconds",
		"Time a Check spent waiting for the caller's current turn.")
	m.CheckErrors = b.counterVec("guard", "check_errors_total",
		"Guard calls (Check, Complete, ListDecisions) answered with an error instead of a result, by gRPC code.", "code")
	m.ChecksInFlight = b.gauge("guard", "checks_in_flight",
		"Check calls being judged or waiting right now.")
	m.Completions = b.counterVec("guard", "completions_total",
		"Complete calls by result: ok, failed, or unknown (no such allowed decision).", "result")
	m.DecisionLogDrop = b.counter("decision_log", "dropped_total",
		"Decision records not written to the log because its queue was full.")
	m.DecisionLogLine = b.counter("decision_log", "written_total",
		"Decision records written to the log.")

	m.Events = b.counterVec("transcript", "events_total",
		"Transcript events accepted, by type and speaker.", "type", "speaker")
	m.EventsRejected = b.counterVec("transcript", "events_rejected_total",
		"Transcript events dropped, by reason.", "reason")
	m.ActiveCalls = b.gauge("transcript", "active_calls",
		"Calls whose transcript state is held.")
	m.CallsEvicted = b.counterVec("transcript", "calls_evicted_total",
		"Calls whose state was dropped, by cause: idle, ended, capacity.", "cause")

	m.DedupeHits = b.counterVec("dedupe", "hits_total",
		"Repeats caught, by kind: duplicate (the same action again), evidence (a caller turn already used), quantity (the same item again).", "kind")
	m.Reservations = b.gauge("dedupe", "reservations",
		"Allowed actions held for duplicate detection.")

	m.NATSConnected = b.gauge("nats", "connected",
		"1 while the transcript connection to NATS is up, else 0.")
	m.NATSReconnects = b.counter("nats", "reconnects_total",
		"Times the NATS connection was re-established.")
	m.NATSErrors = b.counter("nats", "errors_total",
		"Asynchronous NATS errors (slow consumer, permissions, ...).")

	m.BuildInfo = b.gaugeVec("", "build_info",
		"Always 1; labels carry the build's version, revision and Go version.", "version", "revision", "goversion")

	if reg != nil {
		reg.MustRegister(m.collectors...)
	}
	return m
}

// Catalogue lists every series New declares, in declaration order.
func Catalogue() []Series {
	return New(nil).series
}

// Lookup finds the series of the catalogue that exports name: a family
// name, or one of a histogram's name_bucket, name_sum and name_count.
func Lookup(name string) (Series, bool) {
	cat := Catalogue()
	for _, s := range cat {
		if s.Name == name {
			return s, true
		}
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		for _, s := range cat {
			if s.Name == base && s.Type == Histogram {
				return s, true
			}
		}
	}
	return Series{}, false
}

// NewRegistry returns a registry with the Go runtime and process collectors
// and yesguard's catalogue on it.
func NewRegistry() (*prometheus.Registry, *Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, New(reg)
}
