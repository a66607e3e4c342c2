package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/metrics"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// sample is one line of the text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape GETs /metrics and parses the text format (no escapes in label
// values: yesguard's values have none).
func scrape(t *testing.T, httpAddr string) []sample {
	t.Helper()
	code, body := httpGet(t, "http://"+httpAddr+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d", code)
	}
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			s.name = line[:i]
			for _, kv := range splitLabels(line[i+1 : j]) {
				k, v, _ := strings.Cut(kv, "=")
				s.labels[k] = strings.Trim(v, `"`)
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			s.name, rest, _ = strings.Cut(line, " ")
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			t.Fatalf("bad sample line %q: %v", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// splitLabels splits a="x",b="y,z" at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// value sums the samples of name whose labels include want; found is false
// when there is none.
func value(samples []sample, name string, want map[string]string) (sum float64, found bool) {
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		sum += s.value
		found = true
	}
	return sum, found
}

// l builds a label set from pairs.
func l(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

type want struct {
	name   string
	labels map[string]string
	value  float64
	// atLeast: value is a lower bound.
	atLeast bool
}

func (w want) String() string { return fmt.Sprintf("%s%v", w.name, w.labels) }

// expectMetrics scrapes until every want holds (decision log lines are
// written asynchronously), then fails with what is off.
func expectMetrics(t *testing.T, httpAddr string, wants ...want) []sample {
	t.Helper()
	var samples []sample
	var problems []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		samples = scrape(t, httpAddr)
		problems = problems[:0]
		for _, w := range wants {
			got, found := value(samples, w.name, w.labels)
			switch {
			case !found:
				problems = append(problems, fmt.Sprintf("%v: absent", w))
			case w.atLeast && got < w.value:
				problems = append(problems, fmt.Sprintf("%v = %v, want at least %v", w, got, w.value))
			case !w.atLeast && got != w.value:
				problems = append(problems, fmt.Sprintf("%v = %v, want %v", w, got, w.value))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
	return samples
}

// TestMetricsMoveWithDecisions runs the guard in-process with a real
// decision log and drives it through NATS and gRPC, scraping /metrics
// after each step as Prometheus would.
func TestMetricsMoveWithDecisions(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t)
	cfg.PolicyPath = writeFile(t, dir, "policy.yaml", `
defaults:
  wait: 2s
tools:
  submit_appeal:
    verbs: {en: [submit]}
    objects: {en: [appeal]}
`)
	cfg.DecisionLog = writeFile(t, dir, "decisions.log", "")
	// No WithRegistry: the registry New builds, as the binary has.
	s, err := New(cfg, WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	httpAddr := s.HTTPAddr()

	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	publish := func(call string, seq int, speaker, text string) {
		t.Helper()
		ev := fmt.Sprintf(`{"call_id":%q,"seq":%d,"speaker":%q,"type":"transcript","text":%q,"final":true}`, call, seq, speaker, text)
		if err := nc.Publish(DefaultSubjectPrefix+"."+call, []byte(ev)); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	guard := yesguardv1.NewGuardClient(dial(t, s.GRPCAddr()))
	check := func(call, tool string) *yesguardv1.CheckResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-1"})
		resp, err := guard.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: tool, Args: args})
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return resp
	}

	// Before any decision: the connection and the build are there, the
	// histograms are empty.
	bi := ReadBuildInfo()
	expectMetrics(t, httpAddr,
		want{name: "yesguard_nats_connected", value: 1},
		want{name: "yesguard_build_info", labels: l("version", bi.Version, "goversion", bi.GoVersion), value: 1},
		want{name: "yesguard_guard_transcript_wait_seconds_count", value: 0},
		want{name: "yesguard_guard_checks_in_flight", value: 0},
		want{name: "yesguard_decision_log_dropped_total", value: 0},
	)

	// A yes that lands while the Check waits: ALLOW, after a wait.
	const call = "metrics-call-7f3a"
	publish(call, 1, "agent", "Shall I submit your appeal now?")
	done := make(chan *yesguardv1.CheckResponse, 1)
	go func() { done <- check(call, "submit_appeal") }()
	time.Sleep(100 * time.Millisecond)
	publish(call, 2, "caller", "Yes.")
	allowed := <-done
	if allowed.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("Check = %v, want ALLOW", allowed)
	}
	samples := expectMetrics(t, httpAddr,
		want{name: "yesguard_guard_decisions_total", labels: l("tool", "submit_appeal", "outcome", "allow", "reason", "confirmed"), value: 1},
		want{name: "yesguard_guard_check_duration_seconds_count", labels: l("outcome", "allow"), value: 1},
		want{name: "yesguard_guard_check_duration_seconds_bucket", labels: l("outcome", "allow", "le", "2"), value: 1},
		want{name: "yesguard_guard_transcript_wait_seconds_count", value: 1},
		want{name: "yesguard_guard_transcript_wait_seconds_sum", value: 0.05, atLeast: true},
		want{name: "yesguard_transcript_events_total", labels: l("type", "transcript", "speaker", "agent"), value: 1},
		want{name: "yesguard_transcript_events_total", labels: l("type", "transcript", "speaker", "caller"), value: 1},
		want{name: "yesguard_transcript_active_calls", value: 1},
		want{name: "yesguard_dedupe_reservations", value: 1},
		want{name: "yesguard_decision_log_written_total", value: 1},
	)
	// The 100µs bucket exists: the buckets resolve 100 µs to 2 s.
	if _, ok := value(samples, "yesguard_guard_transcript_wait_seconds_bucket", l("le", "0.0001")); !ok {
		t.Error("no 100µs bucket")
	}

	// The model calls again at once: a duplicate, caught before any wait.
	if resp := check(call, "submit_appeal"); resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_DUPLICATE {
		t.Fatalf("second Check = %v, want DUPLICATE", resp)
	}
	// Its result is reported.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := guard.Complete(ctx, &yesguardv1.CompleteRequest{DecisionId: allowed.GetDecisionId()}); err != nil {
		t.Fatal(err)
	}
	// A tool the policy does not list is labelled by its name (the first
	// few such tools; then "other": the service's TestMetricLabels).
	if resp := check(call, "frobnicate_widget"); resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE {
		t.Fatalf("frobnicate_widget = %v, want REFUSE", resp)
	}
	// A bad event, a replayed one, and a bad request.
	if err := nc.Publish(DefaultSubjectPrefix+"."+call, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	publish(call, 2, "caller", "Yes.")
	if _, err := guard.Check(ctx, &yesguardv1.CheckRequest{Tool: "submit_appeal"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Check without call_id = %v, want InvalidArgument", err)
	}

	samples = expectMetrics(t, httpAddr,
		want{name: "yesguard_guard_decisions_total", labels: l("tool", "submit_appeal", "outcome", "duplicate", "reason", "duplicate"), value: 1},
		want{name: "yesguard_dedupe_hits_total", labels: l("kind", metrics.HitDuplicate), value: 1},
		want{name: "yesguard_guard_completions_total", labels: l("result", "ok"), value: 1},
		want{name: "yesguard_guard_decisions_total", labels: l("tool", "frobnicate_widget", "outcome", "refuse"), value: 1},
		want{name: "yesguard_transcript_events_rejected_total", labels: l("reason", "bad_json"), value: 1},
		want{name: "yesguard_transcript_events_rejected_total", labels: l("reason", "duplicate_seq"), value: 1},
		want{name: "yesguard_guard_check_errors_total", labels: l("code", codes.InvalidArgument.String()), value: 1},
		want{name: "yesguard_guard_decisions_total", value: 3},
		want{name: "yesguard_guard_check_duration_seconds_count", value: 3},
		want{name: "yesguard_decision_log_written_total", value: 4}, // three Checks and a Complete
		want{name: "yesguard_guard_checks_in_flight", value: 0},
	)
	// Labels stay bounded: the call id is never a label value.
	for _, smp := range samples {
		for k, v := range smp.labels {
			if strings.Contains(v, "metrics-call") {
				t.Errorf("%s has label %s=%q", smp.name, k, v)
			}
		}
	}
	// Every series the server exports under yesguard_ is in the catalogue.
	for _, smp := range samples {
		if strings.HasPrefix(smp.name, metrics.Namespace+"_") {
			if _, ok := metrics.Lookup(smp.name); !ok {
				t.Errorf("%s is exported but not in the catalogue", smp.name)
			}
		}
	}
}

// TestMetricsNATSState follows the connection gauge and the reconnect
// counter through an external NATS server's restart.
func TestMetricsNATSState(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	store := t.TempDir() // kept across the restart
	startNATS := func() *natsserver.Server {
		t.Helper()
		ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true, JetStream: true, StoreDir: store})
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		if !ns.ReadyForConnections(5 * time.Second) {
			t.Fatal("test NATS server not ready")
		}
		return ns
	}
	ns := startNATS()

	cfg := testConfig(t)
	cfg.NATSURL = ns.ClientURL()
	ts := startServer(t, cfg)
	expectMetrics(t, ts.HTTPAddr(),
		want{name: "yesguard_nats_connected", value: 1},
		want{name: "yesguard_nats_reconnects_total", value: 0})

	ns.Shutdown()
	ns.WaitForShutdown()
	expectMetrics(t, ts.HTTPAddr(), want{name: "yesguard_nats_connected", value: 0})

	ns = startNATS()
	defer ns.Shutdown()
	expectMetrics(t, ts.HTTPAddr(),
		want{name: "yesguard_nats_connected", value: 1},
		want{name: "yesguard_nats_reconnects_total", value: 1})
	stopServer(t, ts.Server)
}

// TestServerExportsTheCatalogue holds the catalogue (metrics/, which the
// operations guide and the dashboard are checked against) to a started
// server: each entry, registered again beside the server's own
// collectors, is refused as already registered (same name, help, type and
// labels), and every yesguard_ family the server gathers is an entry.
func TestServerExportsTheCatalogue(t *testing.T) {
	cfg := testConfig(t)
	cfg.DecisionLog = filepath.Join(t.TempDir(), "decisions.log") // the log's own series
	reg := prometheus.NewRegistry()
	srv, err := New(cfg, WithLogger(zaptest.NewLogger(t)), WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, srv) })
	for _, s := range metrics.Catalogue() {
		err := reg.Register(s.Collector())
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			t.Errorf("%s: the server does not export it as the catalogue describes it (Register = %v)", s.Name, err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, ok := metrics.Lookup(mf.GetName()); strings.HasPrefix(mf.GetName(), metrics.Namespace+"_") && !ok {
			t.Errorf("%s is exported but not in the catalogue", mf.GetName())
		}
	}
}
