package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/yesguard/yesguard/auth"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
)

// benchPolicy is the in-process guard's policy: a contact centre's tools,
// as policy.example.yaml lists them.
const benchPolicy = `defaults:
  wait: 900ms
  duplicate_window: 15s
  quantity_window: 8s
  max_answer_age: 30s
  default_lang: en
tools:
  submit_appeal:
    verbs: {en: [submit, file, send in, lodge]}
    objects: {en: [appeal, submission, request, dispute]}
  book_appointment:
    verbs: {en: [book, schedule, reserve, set up]}
    objects: {en: [appointment, booking, reservation, slot, visit]}
  cancel_appointment:
    verbs: {en: [cancel, call off]}
    objects: {en: [appointment, booking, reservation]}
  pay_bill:
    verbs: {en: [pay, charge, process the payment]}
    objects: {en: [bill, payment, invoice, balance]}
    bind: [amount]
  add_item:
    confirm: false
    record: {item: [sku], quantity: qty}
  lookup_order:
    confirm: false
`

// The bench's NATS user on the in-process guard's embedded server: in the
// guard's account, with no permissions set, so it may publish and
// subscribe anywhere there.
const (
	benchUser     = "bench"
	benchPassword = "bench-only-password-not-a-secret"
)

// target is the guard under test.
type target struct {
	grpcAddr, natsURL, prefix string
	// natsOpts authenticate the bench's connections (the in-process
	// guard's bench user).
	natsOpts []nats.Option
	embedded bool
	// absorbed returns how many transcript events the guard has taken in
	// (applied or rejected); ok is false when it cannot tell.
	absorbed func(ctx context.Context) (n float64, ok bool, err error)
	stop     func() error
	// timer times the in-process guard's handlers; nil for an external
	// guard.
	timer *handlerTimer
}

// discardSink drops decision records: the bench measures the guard, not
// the decision log's output.
type discardSink struct{}

func (discardSink) Write(*yesguardv1.Decision) {}

// startTarget starts the in-process guard, or describes the external one.
func startTarget(ctx context.Context, cfg config) (*target, error) {
	if cfg.GRPCAddr != "" {
		t := &target{grpcAddr: cfg.GRPCAddr, natsURL: cfg.NATSURL, prefix: cfg.SubjectPrefix, stop: func() error { return nil }}
		t.absorbed = func(context.Context) (float64, bool, error) { return 0, false, nil }
		if cfg.MetricsURL != "" {
			client := &http.Client{Timeout: 5 * time.Second}
			t.absorbed = func(ctx context.Context) (float64, bool, error) {
				n, err := scrapeAbsorbed(ctx, client, cfg.MetricsURL)
				return n, err == nil, err
			}
		}
		return t, nil
	}

	dir, err := os.MkdirTemp("", "yesguard-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	policy := cfg.PolicyPath
	if policy == "" {
		policy = filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(policy, []byte(benchPolicy), 0o600); err != nil {
			return nil, fmt.Errorf("write bench policy: %w", err)
		}
	}
	reg := prometheus.NewRegistry()
	timer := newHandlerTimer(cfg.State, cfg.CPUProfile != "")
	srv, err := server.New(server.Config{
		GRPCAddr:        "127.0.0.1:0",
		NATSListen:      "127.0.0.1:0",
		PolicyPath:      policy,
		SubjectPrefix:   cfg.SubjectPrefix,
		ShutdownTimeout: 10 * time.Second,
		State:           cfg.State,
		DataDir:         filepath.Join(dir, "data"),
	}, server.WithRegistry(reg), server.WithDecisionSink(discardSink{}), server.WithLogger(zap.NewNop()),
		server.WithGRPCServerOptions(grpc.ChainUnaryInterceptor(timer.intercept)),
		// The bench's own NATS user: the pipeline may not subscribe, and
		// the bare subscriber (the floor) must.
		server.WithEmbeddedNATSOptions(func(o *natsserver.Options) {
			// In the guard's account, where the transcripts are.
			u := &natsserver.User{Username: benchUser, Password: benchPassword}
			for _, a := range o.Accounts {
				if a.Name == auth.GuardAccount {
					u.Account = a
				}
			}
			o.Users = append(o.Users, u)
		}))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("new guard: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start guard: %w", err)
	}
	return &target{
		grpcAddr: srv.GRPCAddr(),
		natsURL:  srv.NATSURL(),
		prefix:   cfg.SubjectPrefix,
		embedded: true,
		natsOpts: []nats.Option{nats.UserInfo(benchUser, benchPassword)},
		timer:    timer,
		absorbed: func(context.Context) (float64, bool, error) {
			n, err := gatherAbsorbed(reg)
			return n, err == nil, err
		},
		stop: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err := srv.Stop(ctx)
			_ = os.RemoveAll(dir)
			return err
		},
	}, nil
}

// Series counting the events a guard has taken in.
const (
	eventsMetric   = "yesguard_transcript_events_total"
	rejectedMetric = "yesguard_transcript_events_rejected_total"
)

func gatherAbsorbed(reg *prometheus.Registry) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != eventsMetric && mf.GetName() != rejectedMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n, nil
}

// scrapeAbsorbed reads the two counters from a /metrics page in the text
// format.
func scrapeAbsorbed(ctx context.Context, client *http.Client, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("-metrics-url: %w", err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("-metrics-url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("-metrics-url: %s", resp.Status)
	}
	var n float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, eventsMetric) && !strings.HasPrefix(line, rejectedMetric) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		n += v
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("-metrics-url: %w", err)
	}
	return n, nil
}

// waitAbsorbed polls until the guard has taken in want events, every step.
func (t *target) waitAbsorbed(ctx context.Context, want float64, step, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		n, ok, err := t.absorbed(ctx)
		if err != nil || !ok {
			return false, err
		}
		if n >= want {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("the guard took in %.0f of %.0f events within %s", n, want, timeout)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(step):
		}
	}
}

// Quiet: the guard's intake has not moved for quietFor, polled every
// quietStep, within quietWait.
const (
	quietStep = 20 * time.Millisecond
	quietFor  = 250 * time.Millisecond
	quietWait = time.Minute
)

// waitQuiet waits until the guard has stopped taking events in: its
// queue is drained (or, for what a slow consumer dropped, will never come).
// It reports false when the guard was still taking events in after
// quietWait, and returns at once without a count of the guard's intake.
func (t *target) waitQuiet(ctx context.Context) (bool, error) {
	deadline := time.Now().Add(quietWait)
	last, ok, err := t.absorbed(ctx)
	if err != nil || !ok {
		return ok, err
	}
	still := time.Now()
	for time.Since(still) < quietFor {
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(quietStep):
		}
		n, _, err := t.absorbed(ctx)
		if err != nil {
			return false, err
		}
		if n != last {
			last, still = n, time.Now()
		}
	}
	return true, nil
}
