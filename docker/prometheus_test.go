package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
)

// prometheusEnv names the Prometheus binary the test runs.
const prometheusEnv = "YESGUARD_PROMETHEUS_BIN"

// What the dashboard's Grafana variables stand for in the test's queries:
// every instance, and windows that hold the whole drive.
var substitutions = map[string]string{
	"__rate_interval": "1m",
	"__interval":      "15s",
	"__range":         "10m",
	"instance":        ".*",
}

// TestDashboardQueriesInPrometheus runs a guard in-process, drives it with
// the buyer's probes (twice, so that every counter moves between scrapes),
// lets a real Prometheus scrape it every second, and asks that Prometheus
// every query of the dashboard: each must return data, and a number.
//
// Grafana cannot be installed here, so this is the nearest check of the
// dashboard's panels; the Grafana load itself is not tested.
func TestDashboardQueriesInPrometheus(t *testing.T) {
	bin := os.Getenv(prometheusEnv)
	if bin == "" {
		t.Skipf("%s is not set: set it to a Prometheus binary (e.g. %s=/usr/bin/prometheus after "+
			"`apt-get install prometheus`) to check every dashboard query against a real Prometheus", prometheusEnv, prometheusEnv)
	}
	dir := t.TempDir()

	// The Prometheus checked here is the one compose runs: its image is
	// pinned to this binary's version.
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	m := regexp.MustCompile(`prometheus, version (\d+\.\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version says no version: %s", bin, out)
	}
	if image, want := loadCompose(t).Services["prometheus"].Image, "prom/prometheus:v"+string(m[1]); image != want {
		t.Errorf("compose runs %s, but the dashboard is checked here in Prometheus %s: pin compose to %s", image, m[1], want)
	}

	// promtool, where it is, checks compose's Prometheus config.
	if promtool := filepath.Join(filepath.Dir(bin), "promtool"); fileExists(promtool) {
		if out, err := exec.Command(promtool, "check", "config", "prometheus/prometheus.yml").CombinedOutput(); err != nil {
			t.Errorf("promtool check config prometheus/prometheus.yml: %v\n%s", err, out)
		}
	}

	// The guard, with compose's policy and a decision log file.
	srv := servertest.Start(t, servertest.Options{Log: true, Config: func(c *server.Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.PolicyPath = "../policy.example.yaml"
		c.DecisionLog = filepath.Join(dir, "decisions.log")
	}})

	prom := startPrometheus(t, bin, dir, srv.HTTPAddr())
	eventually(t, 30*time.Second, "Prometheus to scrape the guard", func() bool {
		v, ok := prom.scalar(`up{job="yesguard"}`)
		return ok && v == 1
	})

	tg := probeTarget(t, srv)
	for round := 1; round <= 2; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		results := probe.Run(ctx, tg, nil)
		cancel()
		if n := probe.Failed(results); n > 0 {
			t.Fatalf("round %d: %d probes failed: %+v", round, n, results)
		}
		// A rejected event and a refused request, for their panels.
		if err := tg.NATS.Publish(server.DefaultSubjectPrefix+".bad-event", []byte("{not json")); err != nil {
			t.Fatal(err)
		}
		if err := tg.NATS.Flush(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = tg.Guard.Check(ctx, &yesguardv1.CheckRequest{Tool: "submit_appeal"}) // no call_id: InvalidArgument
		cancel()
		// Let Prometheus scrape this round before the next moves the
		// counters again.
		// Each round makes 8 decisions: 5 refusals, then ALLOW and two
		// DUPLICATEs.
		want := float64(round * 8)
		eventually(t, 30*time.Second, fmt.Sprintf("round %d's decisions to be scraped", round), func() bool {
			v, ok := prom.scalar(`sum(yesguard_guard_decisions_total)`)
			return ok && v >= want
		})
		time.Sleep(2500 * time.Millisecond)
	}

	d := loadDashboard(t)
	for _, q := range d.queries() {
		t.Run(q.where, func(t *testing.T) {
			expr := substitute(q.expr)
			res, err := prom.query(expr)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			if len(res) == 0 {
				t.Fatalf("no data: %s", expr)
			}
			numbers := 0
			for _, v := range res {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					numbers++
				}
			}
			if numbers == 0 {
				t.Errorf("only NaN or Inf (%v): %s", res, expr)
			}
			t.Logf("%d series: %s", len(res), expr)
		})
	}
	// The template variable's values.
	labelValuesRE := regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)
	for _, q := range d.variableQueries(t) {
		m := labelValuesRE.FindStringSubmatch(q.expr)
		if m == nil {
			t.Errorf("%s: %q is not label_values(metric, label)", q.where, q.expr)
			continue
		}
		values, err := prom.labelValues(m[2], m[1])
		if err != nil || len(values) == 0 {
			t.Errorf("%s: %q gives %v, %v", q.where, q.expr, values, err)
		}
	}
}

// substitute replaces the dashboard's variables by what the test stands
// them for.
func substitute(expr string) string {
	return variableRE.ReplaceAllStringFunc(expr, func(v string) string {
		m := variableRE.FindStringSubmatch(v)
		if s, ok := substitutions[m[1]+m[2]]; ok {
			return s
		}
		return v
	})
}

func TestSubstitute(t *testing.T) {
	got := substitute(`rate(x{instance=~"$instance"}[$__rate_interval]) / increase(y{instance=~"${instance}"}[$__range])`)
	want := `rate(x{instance=~".*"}[1m]) / increase(y{instance=~".*"}[10m])`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func probeTarget(t *testing.T, srv *server.Server) probe.Target {
	t.Helper()
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	nc, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return probe.Target{Guard: yesguardv1.NewGuardClient(cc), NATS: nc, Prefix: server.DefaultSubjectPrefix}
}

// prometheus is a running Prometheus and a client of its HTTP API.
type prometheus struct {
	base   string
	client *http.Client
}

// startPrometheus runs bin on a free loopback port, scraping target every
// second, with its data in dir. It is stopped (SIGTERM, then SIGKILL) at
// the test's end.
func startPrometheus(t *testing.T, bin, dir, target string) *prometheus {
	t.Helper()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: yesguard
    static_configs:
      - targets: [%q]
`, target)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var logs servertest.Buffer
	cmd := exec.Command(bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})

	p := &prometheus{base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}}
	eventually(t, 30*time.Second, "Prometheus to be ready", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, logs.String())
		default:
		}
		resp, err := p.client.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	Error     string          `json:"error"`
	ErrorType string          `json:"errorType"`
	Data      json.RawMessage `json:"data"`
}

func (p *prometheus) get(path string, params url.Values) (json.RawMessage, error) {
	resp, err := p.client.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// query runs an instant query and returns its values (one per series, or
// the scalar).
func (p *prometheus) query(expr string) ([]float64, error) {
	data, err := p.get("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	parse := func(pair []any) (float64, error) {
		if len(pair) != 2 {
			return 0, fmt.Errorf("bad sample %v", pair)
		}
		s, _ := pair[1].(string)
		return strconv.ParseFloat(s, 64)
	}
	switch d.ResultType {
	case "vector":
		var vec []struct {
			Value []any `json:"value"`
		}
		if err := json.Unmarshal(d.Result, &vec); err != nil {
			return nil, err
		}
		var out []float64
		for _, s := range vec {
			v, err := parse(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case "scalar":
		var pair []any
		if err := json.Unmarshal(d.Result, &pair); err != nil {
			return nil, err
		}
		v, err := parse(pair)
		return []float64{v}, err
	default:
		return nil, fmt.Errorf("result type %q", d.ResultType)
	}
}

// scalar is a query's single value.
func (p *prometheus) scalar(expr string) (float64, bool) {
	vs, err := p.query(expr)
	if err != nil || len(vs) != 1 {
		return 0, false
	}
	return vs[0], true
}

func (p *prometheus) labelValues(label, metric string) ([]string, error) {
	data, err := p.get("/api/v1/label/"+label+"/values", url.Values{"match[]": {metric}})
	if err != nil {
		return nil, err
	}
	var out []string
	err = json.Unmarshal(data, &out)
	return out, err
}
