package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// e2e is a running guard driven only through its public contract: JSON
// events published to NATS over TCP and gRPC over a loopback listener.
type e2e struct {
	t      *testing.T
	srv    *Server
	reg    *prometheus.Registry
	pub    *nats.Conn
	client yesguardv1.GuardClient
	log    string
	mu     sync.Mutex
	seq    map[string]uint64
}

type e2eOpt func(*Config)

func withPolicy(yaml string) e2eOpt {
	return func(c *Config) {
		p := filepath.Join(os.TempDir(), fmt.Sprintf("yesguard-policy-%d.yaml", time.Now().UnixNano()))
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			panic(err)
		}
		c.PolicyPath = p
	}
}

func withNATSURL(u string) e2eOpt { return func(c *Config) { c.NATSURL = u } }

func startE2E(t *testing.T, opts ...e2eOpt) *e2e {
	t.Helper()
	e := &e2e{t: t, reg: prometheus.NewRegistry(), seq: map[string]uint64{}, log: filepath.Join(t.TempDir(), "decisions.log")}
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", DecisionLog: e.log, DataDir: t.TempDir()}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg, WithRegistry(e.reg), WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	e.pub, err = nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pub.Close)
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = yesguardv1.NewGuardClient(conn)
	return e
}

// say publishes a final transcript event, as a pipeline does.
func (e *e2e) say(call string, sp transcript.Speaker, text string) {
	e.t.Helper()
	e.mu.Lock()
	e.seq[call]++
	seq := e.seq[call]
	e.mu.Unlock()
	if err := probe.Publish(e.pub, DefaultSubjectPrefix, transcript.Event{
		CallID: call, Seq: seq, Speaker: sp, Type: transcript.TypeTranscript, Text: text, Final: true, Lang: "en",
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) raw(subject string, data string) {
	e.t.Helper()
	if err := e.pub.Publish(subject, []byte(data)); err != nil {
		e.t.Fatal(err)
	}
	if err := e.pub.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) check(ctx context.Context, call, tool string, args map[string]any) (*yesguardv1.CheckResponse, error) {
	st, err := structpb.NewStruct(args)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.client.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: tool, Args: st, IncludeEvidence: true})
}

// waitApplied waits until the guard has taken n more transcript events.
func (e *e2e) waitApplied(before float64, n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.eventsSeen() < before+float64(n) {
		if time.Now().After(deadline) {
			e.t.Fatalf("the guard took %v events, want %v", e.eventsSeen()-before, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *e2e) eventsSeen() float64 {
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "yesguard_transcript_events_total" || mf.GetName() == "yesguard_transcript_events_rejected_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// logLines reads the decision log's records by decision id.
func (e *e2e) logLines() map[string]map[string]any {
	e.t.Helper()
	f, err := os.Open(e.log)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg      string         `json:"msg"`
			Decision map[string]any `json:"decision"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			e.t.Fatalf("decision log line is not JSON: %v: %s", err, sc.Text())
		}
		if id, _ := line.Decision["decision_id"].(string); id != "" {
			out[id] = line.Decision
		}
	}
	return out
}

func (e *e2e) waitLogged(id string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if d, ok := e.logLines()[id]; ok {
			return d
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("decision %s never reached the log", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The seven buyer probes, through NATS and gRPC with the caller's answer
// landing 600 ms after the Check, each leaving its decision record in the
// log with its reason.
func TestE2EBuyerProbes(t *testing.T) {
	e := startE2E(t)
	results := probe.Run(t.Context(), probe.Target{Guard: e.client, NATS: e.pub, Lag: 600 * time.Millisecond}, nil)
	if len(results) != 7 {
		t.Fatalf("%d probes ran, want 7", len(results))
	}
	for _, r := range results {
		if !r.Pass {
			t.Errorf("probe %q failed: want %s, got %s: %s", r.Name, r.Want, r.Got, r.Detail)
			continue
		}
		for _, d := range r.Decisions {
			line := e.waitLogged(d.GetDecisionId())
			if line["reason"] != d.GetReason().String() || line["outcome"] != d.GetOutcome().String() || line["call_id"] != d.GetCallId() {
				t.Errorf("log line %v does not match record %v", line, d)
			}
			if d.GetOutcome() == yesguardv1.Outcome_OUTCOME_REFUSE && (line["message"] == "" || line["evidence"] == nil) {
				t.Errorf("refusal logged without message or evidence: %v", line)
			}
		}
		t.Logf("%-50s %s", r.Name, r.Got)
	}
}

// A transcript that lands 850 ms after the Check (default wait 900 ms) is
// judged on that transcript, not on the caller's previous line.
func TestE2ETranscriptRacesTheCheck(t *testing.T) {
	// The wait is wide (3 s) so that a loaded machine cannot end it before
	// the yes lands; the yes lands 600 ms into the Check, as a real
	// transcript lags a tool call.
	e := startE2E(t, withPolicy("defaults:\n  wait: 3s\n"))
	e.say("race", transcript.Caller, "I'd like to appeal the decision.")
	e.say("race", transcript.Agent, "Shall I submit the appeal now?")
	got := make(chan *yesguardv1.CheckResponse, 1)
	go func() {
		resp, err := e.check(context.Background(), "race", "submit_appeal", nil)
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(gaugeOf(t, e.reg, "yesguard_guard_checks_in_flight")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the check never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond) // the transcript lags the tool call
	e.say("race", transcript.Caller, "Yes, go ahead.")
	resp := <-got
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW || resp.GetEvidence().GetAnswer().GetText() != "Yes, go ahead." {
		t.Fatalf("got %s/%s on %q", resp.GetOutcome(), resp.GetReason(), resp.GetEvidence().GetAnswer().GetText())
	}
}

// The answer is woken by the event, not by the wait running out: with a
// 5 s wait and the yes published 300 ms in, the Check answers long before
// the wait ends.
func TestE2EWokenByTheEvent(t *testing.T) {
	e := startE2E(t, withPolicy("defaults:\n  wait: 5s\n"))
	e.say("wake", transcript.Agent, "Shall I submit the appeal now?")
	got := make(chan *yesguardv1.CheckResponse, 1)
	go func() {
		resp, err := e.check(context.Background(), "wake", "submit_appeal", nil)
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	time.Sleep(300 * time.Millisecond)
	e.say("wake", transcript.Caller, "Yes.")
	resp := <-got
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("got %s/%s", resp.GetOutcome(), resp.GetReason())
	}
	if resp.GetWaitedMs() >= 4000 {
		t.Fatalf("waited %d ms of a 5 s wait: not woken by the event", resp.GetWaitedMs())
	}
}

// Malformed events are dropped and counted, change no state, and do not
// stop the guard from judging the next call.
func TestE2EMalformedEvents(t *testing.T) {
	e := startE2E(t)
	before := e.eventsSeen()
	e.raw("yesguard.transcript.bad", "{not json")
	e.raw("yesguard.transcript.bad", `{"call_id":"bad","type":"transcript","speaker":"robot","text":"yes","final":true}`)
	e.raw("yesguard.transcript.bad", `{"call_id":"other","type":"transcript","speaker":"caller","text":"yes","final":true}`)
	e.raw("yesguard.transcript.bad", `{"call_id":"bad","type":"shout","speaker":"caller"}`)
	e.raw("yesguard.transcript.bad", `{"call_id":"bad","type":"transcript","speaker":"caller","final":true,"text":"`+strings.Repeat("yes ", 5000)+`"}`)
	e.waitApplied(before, 5)
	rejected := e.reg
	for reason, want := range map[string]float64{"bad_json": 1, "unknown_speaker": 1, "call_id_mismatch": 1, "unknown_type": 1, "text_too_long": 1} {
		c, err := rejectedCounter(rejected, reason)
		if err != nil || c != want {
			t.Errorf("rejected{reason=%s} = %v (%v), want %v", reason, c, err, want)
		}
	}
	resp, err := e.check(t.Context(), "bad", "submit_appeal", nil)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_UNKNOWN_CALL {
		t.Fatalf("malformed events changed state: %v %v", resp, err)
	}
	e.say("good", transcript.Agent, "Shall I submit the appeal?")
	e.say("good", transcript.Caller, "Yes please.")
	resp, err = e.check(t.Context(), "good", "submit_appeal", nil)
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("after bad input: %v %v", resp, err)
	}
}

func rejectedCounter(reg *prometheus.Registry, reason string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "yesguard_transcript_events_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue(), nil
				}
			}
		}
	}
	return 0, nil
}

// A malformed Check gets InvalidArgument naming the field, over the wire.
func TestE2EMalformedCheck(t *testing.T) {
	e := startE2E(t)
	_, err := e.client.Check(t.Context(), &yesguardv1.CheckRequest{Tool: "submit_appeal"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "call_id") {
		t.Fatalf("err = %v", err)
	}
	_, err = e.client.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Complete of an unknown decision: %v", err)
	}
}

// With NATS down the guard cannot see the caller, so it refuses.
func TestE2ENATSDownRefuses(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	e := startE2E(t, withNATSURL(ns.ClientURL()))
	e.say("down", transcript.Agent, "Shall I submit the appeal?")
	e.say("down", transcript.Caller, "Yes.")
	resp, err := e.check(t.Context(), "down", "submit_appeal", map[string]any{"n": 1})
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("before the outage: %v %v", resp, err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err = e.check(t.Context(), "down", "submit_appeal", map[string]any{"n": 2})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() == yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s/%s with NATS down", resp.GetOutcome(), resp.GetReason())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || resp.GetMessage() == "" {
		t.Fatalf("got %v", resp)
	}
}

// Shutdown finishes a Check that is waiting for the caller, and its
// decision reaches the log.
func TestE2EShutdownFinishesInFlightChecks(t *testing.T) {
	e := startE2E(t)
	e.say("bye", transcript.Agent, "Shall I submit the appeal?")
	got := make(chan *yesguardv1.CheckResponse, 1)
	go func() {
		resp, err := e.check(context.Background(), "bye", "submit_appeal", nil)
		if err != nil {
			t.Errorf("in-flight check failed at shutdown: %v", err)
		}
		got <- resp
	}()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(gaugeOf(t, e.reg, "yesguard_guard_checks_in_flight")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the check never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := e.srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	resp := <-got
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || resp.GetReason() != yesguardv1.Reason_REASON_NO_ANSWER {
		t.Fatalf("got %v", resp)
	}
	if _, ok := e.logLines()[resp.GetDecisionId()]; !ok {
		t.Fatal("the in-flight decision was not flushed to the log at shutdown")
	}
}

// gaugeOf finds a gauge by name in reg.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Gauge {
	t.Helper()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "probe_copy"})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			g.Set(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return g
}
