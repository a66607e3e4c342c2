package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// captureSink keeps every decision record.
type captureSink struct {
	mu sync.Mutex
	ds []*yesguardv1.Decision
}

func (s *captureSink) Write(d *yesguardv1.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, d)
}

func (s *captureSink) all() []*yesguardv1.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*yesguardv1.Decision(nil), s.ds...)
}

type testServer struct {
	*Server
	reg  *prometheus.Registry
	sink *captureSink
}

// testConfig listens on free loopback ports only, with the default policy
// and locales, and keeps the embedded JetStream store in the test's
// temporary directory.
func testConfig(t testing.TB) Config {
	return Config{
		GRPCAddr:        "127.0.0.1:0",
		NATSListen:      "127.0.0.1:0",
		HTTPAddr:        "127.0.0.1:0",
		ShutdownTimeout: 5 * time.Second,
		DataDir:         t.TempDir(),
	}
}

// newServer builds a server on free loopback ports, with its own registry
// and a captured decision log.
func newServer(t *testing.T, cfg Config, extra ...Option) *testServer {
	t.Helper()
	ts := &testServer{reg: prometheus.NewRegistry(), sink: &captureSink{}}
	opts := append([]Option{WithLogger(zaptest.NewLogger(t)), WithRegistry(ts.reg), WithDecisionSink(ts.sink)}, extra...)
	s, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts.Server = s
	return ts
}

// startServer is newServer, started, and stopped at the test's end.
func startServer(t *testing.T, cfg Config, extra ...Option) *testServer {
	t.Helper()
	ts := newServer(t, cfg, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopServer(t, ts.Server) })
	return ts
}

func stopServer(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func healthStatus(t *testing.T, cc *grpc.ClientConn, service string) healthgrpc.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthgrpc.NewHealthClient(cc).Check(ctx, &healthgrpc.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health check %q: %v", service, err)
	}
	return resp.GetStatus()
}

// eventually retries cond until it holds or 5s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func counterSum(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	return sumWhere(t, reg, name, func(*dto.Metric) bool { return true })
}

// labelled sums name's series whose label has value.
func labelled(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	return sumWhere(t, reg, name, func(m *dto.Metric) bool {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return true
			}
		}
		return false
	})
}

func sumWhere(t *testing.T, reg prometheus.Gatherer, name string, keep func(*dto.Metric) bool) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if keep(m) {
				sum += metricValue(m)
			}
		}
	}
	return sum
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNewRejectsBadRules(t *testing.T) {
	dir := t.TempDir()
	badPolicy := writeFile(t, dir, "policy.yaml", "defaults:\n  wait: -1s\n  default_lang: EN!\n")
	unknownField := writeFile(t, dir, "unknown.yaml", "defaults:\n  waitt: 1s\n")
	localesDir := filepath.Join(dir, "locales")
	if err := os.Mkdir(localesDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, localesDir, "en.yaml", "this: [is not\n")

	for _, tc := range []struct {
		name    string
		mutate  func(*Config)
		wantErr []string
	}{
		{"policy fields", func(c *Config) { c.PolicyPath = badPolicy },
			[]string{"policy: ", badPolicy, "defaults.wait", "defaults.default_lang"}},
		{"policy unknown field", func(c *Config) { c.PolicyPath = unknownField }, []string{"policy: ", "waitt"}},
		{"policy missing", func(c *Config) { c.PolicyPath = filepath.Join(dir, "nope.yaml") }, []string{"policy: ", "nope.yaml"}},
		{"locales", func(c *Config) { c.LocalesDir = localesDir }, []string{"locales_dir: ", "en.yaml"}},
		{"both", func(c *Config) { c.PolicyPath, c.LocalesDir = badPolicy, localesDir }, []string{"policy: ", "locales_dir: "}},
		{"config", func(c *Config) { c.GRPCAddr, c.SubjectPrefix = "nope", "a..b" },
			[]string{"invalid config", "grpc_addr: ", "subject_prefix: "}},
		{"decision log", func(c *Config) { c.DecisionLog = filepath.Join(dir, "missing", "d.log") }, []string{"decision_log: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.mutate(&cfg)
			opts := []Option{WithLogger(zaptest.NewLogger(t)), WithRegistry(prometheus.NewRegistry())}
			s, err := New(cfg, opts...)
			if err == nil {
				stopServer(t, s)
				t.Fatal("New succeeded")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

func TestStartStop(t *testing.T) {
	ts := startServer(t, testConfig(t))

	for name, addr := range map[string]string{"grpc": ts.GRPCAddr(), "http": ts.HTTPAddr()} {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
			t.Errorf("%s address %q: want the bound port (%v)", name, addr, err)
		}
	}
	if !strings.HasPrefix(ts.NATSURL(), "nats://127.0.0.1:") || strings.HasSuffix(ts.NATSURL(), ":0") {
		t.Errorf("NATSURL() = %q, want the embedded server's bound client URL", ts.NATSURL())
	}

	cc := dial(t, ts.GRPCAddr())
	for _, svc := range []string{"", GuardService} {
		if got := healthStatus(t, cc, svc); got != healthgrpc.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, want SERVING", svc, got)
		}
	}

	base := "http://" + ts.HTTPAddr()
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/nope": 404} {
		if code, _ := httpGet(t, base+path); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
	_, body := httpGet(t, base+"/metrics")
	for _, want := range []string{"yesguard_build_info{", "yesguard_nats_connected 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	stopServer(t, ts.Server)
	// A second Stop returns the first's result at once.
	stopServer(t, ts.Server)
	if err := ts.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Errorf("Start after Stop = %v, want ErrStarted", err)
	}
	if _, err := net.DialTimeout("tcp", ts.HTTPAddr(), time.Second); err == nil {
		t.Error("HTTP still accepts connections after Stop")
	}
}

func TestReflectionListsGuard(t *testing.T) {
	if GuardService != yesguardv1.Guard_ServiceDesc.ServiceName {
		t.Fatalf("GuardService = %q, want %q", GuardService, yesguardv1.Guard_ServiceDesc.ServiceName)
	}
	ts := startServer(t, testConfig(t))
	cc := dial(t, ts.GRPCAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	for _, want := range []string{GuardService, "grpc.health.v1.Health"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("reflection lists %v, lacks %s", names, want)
		}
	}
}

// TestWiring checks that transcripts published to NATSURL reach the store
// and that a Check is answered and logged; the guard's rules are tested in
// package guard.
func TestWiring(t *testing.T) {
	ts := startServer(t, testConfig(t))

	nc, err := nats.Connect(ts.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ev := `{"call_id":"c1","seq":1,"speaker":"caller","type":"transcript","text":"hello","final":true}`
	if err := nc.Publish(DefaultSubjectPrefix+".c1", []byte(ev)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the event to be counted", func() bool {
		return counterSum(t, ts.reg, "yesguard_transcript_events_total") >= 1
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := yesguardv1.NewGuardClient(dial(t, ts.GRPCAddr())).Check(ctx, &yesguardv1.CheckRequest{CallId: "c1", Tool: "lookup"})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if resp.GetDecisionId() == "" || resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_UNSPECIFIED {
		t.Errorf("Check answered %v", resp)
	}
	eventually(t, "the decision to reach the sink", func() bool {
		ds := ts.sink.all()
		return len(ds) == 1 && ds[0].GetDecisionId() == resp.GetDecisionId()
	})
}

func TestDecisionLogFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t)
	cfg.DecisionLog = filepath.Join(dir, "decisions.log")
	// The call is unknown: do not wait long for its transcript.
	cfg.PolicyPath = writeFile(t, dir, "policy.yaml", "defaults:\n  wait: 20ms\n")
	s, err := New(cfg, WithLogger(zaptest.NewLogger(t)), WithRegistry(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := yesguardv1.NewGuardClient(dial(t, s.GRPCAddr())).Check(ctx, &yesguardv1.CheckRequest{CallId: "c9", Tool: "refund"}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	stopServer(t, s)
	data, err := os.ReadFile(cfg.DecisionLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"logger":"yesguard.decisions"`) || !strings.Contains(string(data), `"call_id":"c9"`) {
		t.Errorf("decision log holds %q", data)
	}
}

func TestExternalNATSDown(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("test NATS server not ready")
	}

	cfg := testConfig(t)
	cfg.NATSURL = ns.ClientURL()
	ts := startServer(t, cfg)
	if ts.NATSURL() != cfg.NATSURL {
		t.Errorf("NATSURL() = %q, want %q", ts.NATSURL(), cfg.NATSURL)
	}
	cc := dial(t, ts.GRPCAddr())
	readyz := "http://" + ts.HTTPAddr() + "/readyz"
	eventually(t, "ready", func() bool {
		code, _ := httpGet(t, readyz)
		return code == 200 && healthStatus(t, cc, GuardService) == healthgrpc.HealthCheckResponse_SERVING
	})

	ns.Shutdown()
	ns.WaitForShutdown()
	eventually(t, "not ready once NATS is gone", func() bool {
		code, _ := httpGet(t, readyz)
		return code == 503 && healthStatus(t, cc, GuardService) == healthgrpc.HealthCheckResponse_NOT_SERVING
	})
	if got := healthStatus(t, cc, ""); got != healthgrpc.HealthCheckResponse_SERVING {
		t.Errorf("overall health = %v, want SERVING while the process serves", got)
	}
	if code, _ := httpGet(t, "http://"+ts.HTTPAddr()+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d, want 200", code)
	}
}

func TestExternalNATSUnreachableAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	cfg := testConfig(t)
	cfg.NATSURL = "nats://" + addr
	ts := startServer(t, cfg)
	if code, _ := httpGet(t, "http://"+ts.HTTPAddr()+"/readyz"); code != 503 {
		t.Errorf("/readyz = %d, want 503", code)
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"grpc", func(c *Config) { c.GRPCAddr = ln.Addr().String() }, "grpc_addr: "},
		{"http", func(c *Config) { c.HTTPAddr = ln.Addr().String() }, "http_addr: "},
		{"nats", func(c *Config) { c.NATSListen = ln.Addr().String() }, "nats_listen: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.mutate(&cfg)
			ts := newServer(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := ts.Start(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want an error naming %s", err, tc.want)
			}
			// Stopped already; Stop again is fine.
			stopServer(t, ts.Server)
		})
	}
}

func TestStopBeforeStart(t *testing.T) {
	ts := newServer(t, testConfig(t))
	stopServer(t, ts.Server)
	if err := ts.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Errorf("Start after Stop = %v, want ErrStarted", err)
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	policy := writeFile(t, dir, "policy.yaml", "defaults:\n  wait: 200ms\n")
	cfg := testConfig(t)
	cfg.PolicyPath = policy
	ts := newServer(t, cfg)
	defer stopServer(t, ts.Server)

	if err := ts.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	writeFile(t, dir, "policy.yaml", "defaults:\n  wait: never\n")
	err := ts.Reload()
	if err == nil || !strings.Contains(err.Error(), "policy: ") {
		t.Fatalf("Reload of a bad policy = %v, want an error naming policy", err)
	}
}

func TestPanicBecomesInternal(t *testing.T) {
	ts := newServer(t, testConfig(t))
	defer stopServer(t, ts.Server)

	info := &grpc.UnaryServerInfo{FullMethod: yesguardv1.Guard_Check_FullMethodName}
	resp, err := ts.recoverUnary(context.Background(), nil, info, func(context.Context, any) (any, error) {
		panic("boom")
	})
	if resp != nil || status.Code(err) != codes.Internal {
		t.Fatalf("recoverUnary = %v, %v; want codes.Internal", resp, err)
	}
	if got := counterSum(t, ts.reg, "yesguard_guard_check_errors_total"); got != 1 {
		t.Errorf("check errors = %v, want 1", got)
	}

	serr := ts.recoverStream(nil, nil, &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"},
		func(any, grpc.ServerStream) error { panic(errors.New("boom")) })
	if status.Code(serr) != codes.Internal {
		t.Errorf("recoverStream = %v, want codes.Internal", serr)
	}
}

// TestGRPCServerOptions checks that options given with
// WithGRPCServerOptions reach the gRPC server, after its own: an
// interceptor added there sees the Check, and the Check is answered.
func TestGRPCServerOptions(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		mu.Lock()
		seen = append(seen, info.FullMethod)
		mu.Unlock()
		return handler(ctx, req)
	}
	ts := startServer(t, testConfig(t), WithGRPCServerOptions(grpc.ChainUnaryInterceptor(record)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := yesguardv1.NewGuardClient(dial(t, ts.GRPCAddr())).Check(ctx, &yesguardv1.CheckRequest{CallId: "c1", Tool: "lookup"})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE {
		t.Errorf("Check on an unknown call answered %s/%s, want a refusal", resp.GetOutcome(), resp.GetReason())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != yesguardv1.Guard_Check_FullMethodName {
		t.Errorf("the added interceptor saw %q, want one %s", seen, yesguardv1.Guard_Check_FullMethodName)
	}
}
