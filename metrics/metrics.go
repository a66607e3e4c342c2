// Package metrics is the catalogue of every Prometheus series yesguard
// exports: each series is declared here once, with its name, type, labels
// and help string. It holds no collectors. Each package builds its own
// collectors from the catalogue's entries on a prometheus.Registerer it is
// given (no globals), as Alertmanager's nflog does, so each test and each
// embedded guard has its own registry.
//
// Names follow yesguard_<subsystem>_<name>_<unit>; counters end in _total and
// durations are in seconds. Labels are bounded: tool names come from the
// policy, or are the first few tools it does not list (the rest are
// labelled "other"), never call ids.
//
// The catalogue is what the dashboard test and the operations guide are
// checked against; a server test registers every entry beside a started
// server's own collectors, so a series the code exports but the catalogue
// lacks (or describes otherwise) fails.
package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every series.
const Namespace = "yesguard"

// OtherTool is the tool label for the tools the policy does not list past
// the first few, so that a model inventing tool names cannot grow the
// label set.
const OtherTool = "other"

// Values of the event label of yesguard_guard_asks_total.
const (
	AskIssued       = "issued"
	AskRecognised   = "recognised"
	AskUnwritten    = "unwritten"
	AskUnremembered = "unremembered"
	AskUnread       = "unread"
)

// AskEvents are every value of the event label of yesguard_guard_asks_total.
var AskEvents = []string{AskIssued, AskRecognised, AskUnwritten, AskUnremembered, AskUnread}

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

func series(t Type, subsystem, name, help string, labels ...string) Series {
	return Series{Name: prometheus.BuildFQName(Namespace, subsystem, name), Type: t, Help: help, Labels: labels}
}

// The catalogue. The package that exports each series is named above it.
var (
	// guard (the engine).
	TranscriptWait = series(Histogram, "guard", "transcript_wait_seconds",
		"Time a Check spent waiting for the caller's current turn.")
	ChecksInFlight = series(Gauge, "guard", "checks_in_flight",
		"Check calls being judged or waiting right now.")
	Asks = series(Counter, "guard", "asks_total",
		"The guard's own questions, by event: issued on a refusal, recognised as the question a yes answered, unwritten (no template or verb for the language, or an argument missing or of the wrong kind), unremembered or unread (the shared state did not answer: no ask, or the judge's refusal stands).", "event")

	// service (the gRPC Guard service).
	Decisions = series(Counter, "guard", "decisions_total",
		"Check decisions by tool, outcome and reason.", "tool", "outcome", "reason")
	CheckDuration = series(Histogram, "guard", "check_duration_seconds",
		"Time from a Check's arrival to its decision, waiting included, by outcome.", "outcome")
	CheckErrors = series(Counter, "guard", "check_errors_total",
		"Guard calls (Check, Complete, ListDecisions) answered with an error instead of a result, by gRPC code.", "code")
	Completions = series(Counter, "guard", "completions_total",
		"Complete calls by result: ok, failed, unknown (no such allowed decision), refused (the decision was allowed to another caller), or redeemed (a failure of an approval its backend redeemed, sent without the Redeem's receipt: nothing changed).", "result")
	Redeems = series(Counter, "guard", "redeems_total",
		"Redeem calls by reason: redeemed (execute the action), already_redeemed, approval_expired, approval_mismatch, approval_invalid, or internal (the redeem ledger did not answer).", "reason")
	DedupeHits = series(Counter, "dedupe", "hits_total",
		"Repeats caught, by kind: duplicate (the same action again), evidence (a caller turn already used), quantity (the same item again).", "kind")

	// decisionlog.
	DecisionLogDropped = series(Counter, "decision_log", "dropped_total",
		"Decision records not written to the log because its queue was full.")
	DecisionLogWritten = series(Counter, "decision_log", "written_total",
		"Decision records written to the log.")

	// transcript.
	Events = series(Counter, "transcript", "events_total",
		"Transcript events accepted, by type and speaker.", "type", "speaker")
	EventsRejected = series(Counter, "transcript", "events_rejected_total",
		"Transcript events dropped, by reason.", "reason")
	ActiveCalls = series(Gauge, "transcript", "active_calls",
		"Calls whose transcript state is held.")
	CallsEvicted = series(Counter, "transcript", "calls_evicted_total",
		"Calls whose state was dropped, by cause: idle, ended, pressure (evicted, never having had a Check, to make room for a new call under --max-calls or --max-calls-per-publisher).", "cause")
	LimitHits = series(Counter, "transcript", "limit_hits_total",
		"Times a transcript limit was hit, by limit: text_bytes, lang_bytes, response_id_bytes, source_bytes, calls, publisher_calls, total_bytes, events_per_second (the event was dropped), call_bytes (a call's oldest utterances were dropped), events_per_call (the transcript stream holds a call's bound and refuses its next events) or stream_bytes (the transcript stream is nearly full and refuses events; every Check refuses).", "limit")
	GRPCEvents = series(Counter, "transcript", "grpc_events_total",
		"Transcript events sent over gRPC (PublishTranscript), by result: stored, duplicate (the stream held it already), rejected (not stored: a rule or limit of the ingesters, or bad numbering) or failed (the stream did not acknowledge it).", "result")
	StoreBytes = series(Gauge, "transcript", "store_bytes",
		"What the calls held take, as counted against --max-total-bytes.")

	// server, with the JetStream state.
	TranscriptCaughtUp = series(Gauge, "transcript", "caught_up",
		"1 while the guard has applied every event the transcript stream held at its start or last reconnect, else 0 (every Check is refused).")
	TranscriptPending = series(Gauge, "transcript", "stream_pending",
		"Transcript stream messages not yet applied, as of the last one applied.")
	ConsumerRestarts = series(Counter, "transcript", "consumer_restarts_total",
		"Times the transcript stream's consumer, found stalled or not answering (its node lost), was recreated from the sequence after the last applied.")
	SettleRequests = series(Counter, "transcript", "settle_requests_total",
		"Requests for the transcript stream's last sequence before an ALLOW; one is shared by every Check waiting at that moment.")
	DecisionsQueued = series(Gauge, "decision_store", "queued",
		"Decision records waiting to be stored again on the decision stream.")
	DecisionsDropped = series(Counter, "decision_store", "dropped_total",
		"Decision records the decision stream never took (its queue was full, or the guard stopped first); they are in the decision log.")

	// dedupe.
	Reservations = series(Gauge, "dedupe", "reservations",
		"Allowed actions held for duplicate detection.")
	DedupeUnreadable = series(Counter, "dedupe", "unreadable_records_total",
		"Item records in the state bucket that did not decode (not written by a guard): each counts as a live use for the quantity window, so the same item is not recorded again.")

	// server.
	NATSConnected = series(Gauge, "nats", "connected",
		"1 while the transcript connection to NATS is up, else 0.")
	NATSReconnects = series(Counter, "nats", "reconnects_total",
		"Times the NATS connection was re-established.")
	NATSErrors = series(Counter, "nats", "errors_total",
		"Asynchronous NATS errors (slow consumer, permissions, ...).")
	ReloadErrors = series(Counter, "", "reload_errors_total",
		"Reloads (SIGHUP) that failed, by what: policy (with the locales), tokens, tls, approval_keys. What failed keeps what it had.", "what")
	DecisionsUnencodable = series(Counter, "decision", "unencodable_total",
		"Decision records that held a field no writer can encode (a timestamp outside years 1 to 9999, a string that is not UTF-8): the field was replaced, the record written, and its detail names the field.")
	DecisionsTrimmed = series(Counter, "decision", "records_trimmed_total",
		"Decision records larger than their bound (64 KiB) trimmed before they were logged and stored: recent turns, then long texts, then arguments and result left out; the record's detail says what.")
	RedactionErrors = series(Counter, "decision", "redaction_errors_total",
		"Decision records whose args or result could not be parsed for redaction; the copy written lost them whole.")
	ListenerConnections = series(Gauge, "listener", "connections",
		"Connections open on a listener (grpc, http), bounded by --max-conns.", "listener")
	PagesHostRefused = series(Counter, "http", "pages_host_refused_total",
		"Requests for the /calls pages refused (421) because, without tokens, their Host was not a loopback name: a DNS rebinding attempt or a misaddressed browser.")
	// auth (the gRPC interceptors; package auth builds this collector).
	AuthRefused = series(Counter, "grpc", "auth_refused_total",
		"gRPC calls refused by authentication or authorisation, by method and code (Unauthenticated: no or unknown token; PermissionDenied: a token without the method's role, or a method no role may call).", "method", "code")
	BuildInfo = series(Gauge, "", "build_info",
		"Always 1; labels carry the build's version, revision and Go version.", "version", "revision", "goversion")
)

// catalogue lists every series, in the order of the operations guide.
var catalogue = []Series{
	Decisions, CheckDuration, TranscriptWait, CheckErrors, ChecksInFlight, Asks, Completions, Redeems,
	DecisionLogDropped, DecisionLogWritten,
	Events, EventsRejected, LimitHits, GRPCEvents, ActiveCalls, CallsEvicted, StoreBytes, TranscriptCaughtUp, TranscriptPending,
	SettleRequests, ConsumerRestarts,
	DecisionsQueued, DecisionsDropped,
	DedupeHits, Reservations, DedupeUnreadable,
	NATSConnected, NATSReconnects, NATSErrors, ListenerConnections,
	AuthRefused, ReloadErrors, RedactionErrors, DecisionsUnencodable, DecisionsTrimmed, PagesHostRefused,
	BuildInfo,
}

// Catalogue lists every series yesguard exports.
func Catalogue() []Series {
	return append([]Series(nil), catalogue...)
}

// Lookup finds the series of the catalogue that exports name: a family
// name, or one of a histogram's name_bucket, name_sum and name_count.
func Lookup(name string) (Series, bool) {
	for _, s := range catalogue {
		if s.Name == name {
			return s, true
		}
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		for _, s := range catalogue {
			if s.Name == base && s.Type == Histogram {
				return s, true
			}
		}
	}
	return Series{}, false
}

// register registers c on reg; a nil reg leaves c unregistered
// (benchmarks, tools, the in-process engine of `yesguard test`).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// Collector builds the collector s describes, unregistered, with no
// labels filled in: a CounterVec, GaugeVec or HistogramVec when s has
// labels, else a Counter, Gauge or Histogram. Tests register it beside a
// server's own to check that the server exports s as described.
func (s Series) Collector() prometheus.Collector {
	opts := prometheus.Opts{Name: s.Name, Help: s.Help}
	switch {
	case s.Type == Counter && len(s.Labels) > 0:
		return prometheus.NewCounterVec(prometheus.CounterOpts(opts), s.Labels)
	case s.Type == Counter:
		return prometheus.NewCounter(prometheus.CounterOpts(opts))
	case s.Type == Gauge && len(s.Labels) > 0:
		return prometheus.NewGaugeVec(prometheus.GaugeOpts(opts), s.Labels)
	case s.Type == Gauge:
		return prometheus.NewGauge(prometheus.GaugeOpts(opts))
	case len(s.Labels) > 0:
		return prometheus.NewHistogramVec(s.histogramOpts(), s.Labels)
	default:
		return prometheus.NewHistogram(s.histogramOpts())
	}
}

func (s Series) histogramOpts() prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Name: s.Name, Help: s.Help, Buckets: LatencyBuckets}
}

// NewCounter registers the counter s describes on reg (nil: unregistered).
func NewCounter(reg prometheus.Registerer, s Series) prometheus.Counter {
	return register(reg, s.Collector().(prometheus.Counter))
}

// NewCounterVec registers the counter vector s describes on reg.
func NewCounterVec(reg prometheus.Registerer, s Series) *prometheus.CounterVec {
	return register(reg, s.Collector().(*prometheus.CounterVec))
}

// NewGauge registers the gauge s describes on reg.
func NewGauge(reg prometheus.Registerer, s Series) prometheus.Gauge {
	return register(reg, s.Collector().(prometheus.Gauge))
}

// NewGaugeVec registers the gauge vector s describes on reg.
func NewGaugeVec(reg prometheus.Registerer, s Series) *prometheus.GaugeVec {
	return register(reg, s.Collector().(*prometheus.GaugeVec))
}

// NewGaugeFunc registers a gauge s describes whose value f gives when
// scraped.
func NewGaugeFunc(reg prometheus.Registerer, s Series, f func() float64) prometheus.GaugeFunc {
	return register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: s.Name, Help: s.Help}, f))
}

// NewHistogram registers the histogram s describes on reg.
func NewHistogram(reg prometheus.Registerer, s Series) prometheus.Histogram {
	return register(reg, s.Collector().(prometheus.Histogram))
}

// NewHistogramVec registers the histogram vector s describes on reg.
func NewHistogramVec(reg prometheus.Registerer, s Series) *prometheus.HistogramVec {
	return register(reg, s.Collector().(*prometheus.HistogramVec))
}
