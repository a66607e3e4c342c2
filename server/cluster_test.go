package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// Helpers for the fault tests, in the spirit of nats-server's
// jetstream_helpers_test.go: a three-node JetStream cluster in process,
// nodes stopped and restarted on their own ports and stores, and guard
// replicas on it. Every wait is for a state (a leader, a consumer caught
// up, a Check in flight), with generous bounds: the machine is small and
// shared.

// faultWait bounds every wait of the fault tests.
const faultWait = 60 * time.Second

// freePorts reserves n free loopback ports (closed again: the nodes bind
// them).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// jsCluster is a JetStream cluster of three nodes.
type jsCluster struct {
	t     *testing.T
	opts  []*natsserver.Options
	mu    sync.Mutex
	nodes []*natsserver.Server
}

func newJSCluster(t *testing.T) *jsCluster {
	t.Helper()
	ports := freePorts(t, 6)
	c := &jsCluster{t: t}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
	}
	for i := range 3 {
		o := &natsserver.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       ports[i],
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			Cluster:    natsserver.ClusterOpts{Name: "yesguard-test", Host: "127.0.0.1", Port: ports[3+i]},
			Routes:     natsserver.RoutesFromStr(strings.Join(routes, ",")),
		}
		c.opts = append(c.opts, o)
	}
	c.nodes = make([]*natsserver.Server, 3)
	for i := range 3 {
		c.start(i)
	}
	c.waitMetaLeader()
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n != nil {
				n.Shutdown()
				n.WaitForShutdown()
			}
		}
	})
	return c
}

// start starts node i on its ports and store.
func (c *jsCluster) start(i int) {
	c.t.Helper()
	o := *c.opts[i]
	ns, err := natsserver.NewServer(&o)
	if err != nil {
		c.t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(faultWait) {
		c.t.Fatalf("node %d not ready", i)
	}
	c.mu.Lock()
	c.nodes[i] = ns
	c.mu.Unlock()
}

// kill stops node i.
func (c *jsCluster) kill(i int) {
	c.mu.Lock()
	ns := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	ns.Shutdown()
	ns.WaitForShutdown()
}

// url is the client URL of the nodes given, or of every node.
func (c *jsCluster) url(nodes ...int) string {
	if len(nodes) == 0 {
		nodes = []int{0, 1, 2}
	}
	var us []string
	for _, i := range nodes {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port))
	}
	return strings.Join(us, ",")
}

// waitMetaLeader waits for the cluster to elect its JetStream meta leader.
func (c *jsCluster) waitMetaLeader() {
	c.t.Helper()
	eventuallyFor(c.t, "a JetStream meta leader", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n != nil && n.JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
}

// waitStreamsCurrent waits until every running node holds a current copy
// of the guard's streams and bucket (their leaders elected, replicas
// caught up).
func (c *jsCluster) waitStreamsCurrent() {
	c.t.Helper()
	eventuallyFor(c.t, "the streams current on every running node", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			for _, name := range []string{TranscriptStream, DecisionStream, "KV_" + StateBucket} {
				if !n.JetStreamIsStreamCurrent("$G", name) {
					return false
				}
			}
		}
		return true
	})
}

func eventuallyFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(faultWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s", what, faultWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replica is one guard of the fault tests.
type replica struct {
	t      *testing.T
	killed bool
	srv    *Server
	reg    *prometheus.Registry
	sink   *captureSink
	cfg    Config
	gc     yesguardv1.GuardClient
}

// startReplica starts a guard on the cluster (or any NATS URL) with three
// copies of its state. Every replica of a test signs with the same
// approval keys (sharedKeyDir), as a replica set must.
func startReplica(t *testing.T, natsURL string, replicas int) *replica {
	t.Helper()
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSURL: natsURL, JSReplicas: replicas, ShutdownTimeout: 10 * time.Second, DataDir: t.TempDir(),
		ApprovalKeyDir: sharedKeyDir(t)}
	return startReplicaCfg(t, cfg)
}

// keyDirs holds each running test's shared approval key directory.
var keyDirs sync.Map // *testing.T → string

// sharedKeyDir is a directory holding one approval key, the same for
// every call of one test: the replica set's mounted secret.
func sharedKeyDir(t *testing.T) string {
	t.Helper()
	if d, ok := keyDirs.Load(t); ok {
		return d.(string)
	}
	d := t.TempDir()
	if _, err := approval.GenerateKeyFile(d, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	keyDirs.Store(t, d)
	t.Cleanup(func() { keyDirs.Delete(t) })
	return d
}

func startReplicaCfg(t *testing.T, cfg Config, opts ...Option) *replica {
	t.Helper()
	r := &replica{t: t, reg: prometheus.NewRegistry(), sink: &captureSink{}, cfg: cfg}
	opts = append([]Option{WithLogger(zaptest.NewLogger(t).Named(fmt.Sprintf("replica-%p", r))), WithRegistry(r.reg), WithDecisionSink(r.sink)}, opts...)
	srv, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), faultWait)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	r.gc = yesguardv1.NewGuardClient(dial(t, srv.GRPCAddr()))
	t.Cleanup(func() {
		if !r.killed {
			stopServer(t, srv)
		}
	})
	return r
}

// kill stops the replica at once, as a crash would: in-flight calls are
// cut, nothing is drained.
func (r *replica) kill() {
	r.killed = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = r.srv.Stop(ctx)
	// A crash ends the process, and the OS frees the data directory's
	// lock with it; in process, the embedded server frees it once its
	// shutdown, which a cancelled Stop does not wait for, is over. A
	// replica started again on the directory needs it free.
	if l := r.srv.dataDirLock; l != nil {
		eventuallyFor(r.t, "the killed replica's data directory lock to be freed", func() bool { return !l.Locked() })
	}
}

// inFlight is how many Checks the replica is judging or waiting on.
func (r *replica) inFlight() int {
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "yesguard_guard_checks_in_flight" {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return 0
}

// serving reports whether the replica's guard is caught up and connected.
func (r *replica) serving() bool { return r.srv.serving() }

func (r *replica) check(ctx context.Context, call, tool string, args map[string]any) (*yesguardv1.CheckResponse, error) {
	st, err := structpb.NewStruct(args)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.gc.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: tool, Args: st, IncludeEvidence: true})
}

// publisher publishes transcript events to the stream as an at-least-once
// pipeline does: JetStream publishes with a Nats-Msg-Id, retried until
// acknowledged.
type publisher struct {
	t  *testing.T
	js jetstream.JetStream
}

func newPublisher(t *testing.T, url string) *publisher {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	return &publisher{t: t, js: js}
}

// event is one final event of a publisher run.
func event(call string, sp transcript.Speaker, source string, epoch, seq uint64, text string) transcript.Event {
	return transcript.Event{CallID: call, Speaker: sp, Type: transcript.TypeTranscript, Final: true, Text: text, Source: source, Epoch: epoch, Seq: seq}
}

// publish stores ev, retrying until the stream acknowledges it; its
// Nats-Msg-Id is its run and seq, so a retry is stored once.
func (p *publisher) publish(ev transcript.Event) {
	p.t.Helper()
	b, _ := json.Marshal(ev)
	id := fmt.Sprintf("%s/%s/%d/%d", ev.CallID, ev.Source, ev.Epoch, ev.Seq)
	deadline := time.Now().Add(faultWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := p.js.Publish(ctx, DefaultSubjectPrefix+"."+ev.CallID, b, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("publish %s: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishAs stores ev under another Nats-Msg-Id (a new message with the
// same run and seq, as a publisher that lost its acks resends it).
func (p *publisher) publishAs(ev transcript.Event, id string) {
	p.t.Helper()
	b, _ := json.Marshal(ev)
	if _, err := p.js.Publish(p.t.Context(), DefaultSubjectPrefix+"."+ev.CallID, b, jetstream.WithMsgID(id)); err != nil {
		p.t.Fatal(err)
	}
}

type jetstreamAck = jetstream.PubAckFuture

// publishAsync stores ev without waiting for its ack.
func (p *publisher) publishAsync(ev transcript.Event) jetstreamAck {
	p.t.Helper()
	b, _ := json.Marshal(ev)
	f, err := p.js.PublishAsync(DefaultSubjectPrefix+"."+ev.CallID, b)
	if err != nil {
		p.t.Fatal(err)
	}
	return f
}

// waitAcks waits for every ack.
func waitAcks(t *testing.T, acks []jetstreamAck) {
	t.Helper()
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			t.Fatalf("flood publish: %v", err)
		case <-time.After(faultWait):
			t.Fatal("flood publish: no ack")
		}
	}
}

// conversation publishes a question and a yes on call, as tts and stt.
func (p *publisher) conversation(call string) {
	p.t.Helper()
	p.publish(event(call, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	p.publish(event(call, transcript.Caller, "stt", 1, 1, "Yes."))
}

// ledger checks what every fault test promises: no ALLOW without a yes in
// evidence, no decision record lost, no action allowed twice.
type ledger struct {
	mu        sync.Mutex
	answered  map[string]*yesguardv1.CheckResponse // by decision id
	allowed   map[string][]string                  // action → ALLOW decision ids
	wantYeses map[string]bool                      // caller words that are a yes
}

func newLedger(yeses ...string) *ledger {
	l := &ledger{answered: map[string]*yesguardv1.CheckResponse{}, allowed: map[string][]string{}, wantYeses: map[string]bool{}}
	for _, y := range yeses {
		l.wantYeses[y] = true
	}
	return l
}

// add records an answer of a Check of action.
func (l *ledger) add(action string, resp *yesguardv1.CheckResponse) {
	if resp == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answered[resp.GetDecisionId()] = resp
	if resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW {
		l.allowed[action] = append(l.allowed[action], resp.GetDecisionId())
	}
}

// verify asserts the three promises; every answered decision must be
// listed by r (any replica) once the faults are over.
func (l *ledger) verify(t *testing.T, r *replica, calls ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for action, ids := range l.allowed {
		if len(ids) > 1 {
			t.Errorf("action %s allowed %d times: %v", action, len(ids), ids)
		}
	}
	for id, resp := range l.answered {
		if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			continue
		}
		if ans := resp.GetEvidence().GetAnswer().GetText(); !l.wantYeses[ans] || resp.GetEvidence().GetQuestion() == nil {
			t.Errorf("ALLOW %s rests on %q (question %v): not a yes to a question", id, ans, resp.GetEvidence().GetQuestion())
		}
	}
	// A record queued while the stream was unreachable is stored soon
	// after: wait for that, then count what is missing.
	var missing []string
	deadline := time.Now().Add(faultWait)
	for {
		listed := map[string]bool{}
		listErr := error(nil)
		for _, call := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := r.gc.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: call})
			cancel()
			if err != nil {
				listErr = err // the cluster may still be settling: again
			}
			for _, d := range resp.GetDecisions() {
				listed[d.GetDecisionId()] = true
			}
		}
		if listErr != nil && time.Now().After(deadline) {
			t.Fatalf("ListDecisions: %v", listErr)
		}
		missing = missing[:0]
		for id := range l.answered {
			if !listed[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	lost := len(missing)
	for _, id := range missing {
		t.Errorf("decision %s was answered but its record is lost", id)
	}
	t.Logf("ledger: %d decisions answered, %d actions allowed, %d records lost", len(l.answered), len(l.allowed), lost)
}
