package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/yesguard/yesguard/internal/natstest"
	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// The regression tests of the red team's state findings (issue 10, part
// 3) that belong to the server: start-up and the data directory. Each
// waits for states, never for time.

// observedLogger is a test logger whose warnings and errors are also kept.
func observedLogger(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.WarnLevel)
	return zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)), logs
}

// Finding 19: three replicas starting together on a fresh three-node
// cluster, with R3 state, all start, each on its first attempt: a
// concurrent create that nats-server leaves unanswered does not make a
// replica wait out its timeout and start over (which, three objects in
// turn, outlasted the start budget).
func TestStartTogetherOnFreshCluster(t *testing.T) {
	c := newJSCluster(t)
	log, logs := observedLogger(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	srvs := make([]*Server, 3)
	for i := range 3 {
		wg.Go(func() {
			cfg := Config{GRPCAddr: "127.0.0.1:0", NATSURL: c.url(i, (i+1)%3, (i+2)%3), JSReplicas: 3, ShutdownTimeout: 10 * time.Second, DataDir: t.TempDir()}
			srv, err := New(cfg, WithDecisionSink(&captureSink{}), WithLogger(log.Named(fmt.Sprint("replica-", i))))
			if err != nil {
				errs[i] = err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), faultWait)
			defer cancel()
			errs[i] = srv.Start(ctx)
			if errs[i] == nil {
				srvs[i] = srv
			}
		})
	}
	wg.Wait()
	for i, srv := range srvs {
		if srv != nil {
			t.Cleanup(func() { stopServer(t, srv) })
		}
		if errs[i] != nil {
			t.Errorf("replica %d did not start: %v", i, errs[i])
		}
	}
	for _, e := range logs.FilterMessageSnippet("not set up yet").All() {
		t.Errorf("a replica had to set up its JetStream state again: %s %v", e.Message, e.ContextMap())
	}
	c.waitStreamsCurrent()
}

// Finding 12: two single binaries on one --data-dir both ran on one
// JetStream store, and a restart then forgot one's state. The second now
// does not start, saying why; once the first has stopped, the directory
// is free again.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	embedded := func() *Server {
		srv, err := New(Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", DataDir: dir, ShutdownTimeout: 10 * time.Second},
			WithDecisionSink(&captureSink{}), WithLogger(zaptest.NewLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	first := embedded()
	if err := first.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := embedded()
	err := second.Start(t.Context())
	if err == nil {
		stopServer(t, second)
		stopServer(t, first)
		t.Fatal("a second guard started on a data dir in use")
	}
	if want := fmt.Sprintf("in use by another yesguard (pid %d)", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("second start: %v, want it to say %q", err, want)
	}
	stopServer(t, first)
	third := embedded()
	if err := third.Start(t.Context()); err != nil {
		t.Fatalf("the data dir is not free once its guard stopped: %v", err)
	}
	stopServer(t, third)
}

// spoolChildEnv runs TestSpoolChild as a guard process for
// TestRecordsQueuedInOutageSurviveKill9 to kill: its value is
// "<nats url> <data dir> <decision log>".
const spoolChildEnv = "YESGUARD_TEST_SPOOL_CHILD"

// TestSpoolChild is the guard process of
// TestRecordsQueuedInOutageSurviveKill9: it prints its gRPC address and
// serves until killed.
func TestSpoolChild(t *testing.T) {
	args := strings.Fields(os.Getenv(spoolChildEnv))
	if len(args) != 3 {
		t.Skip("the guard process of TestRecordsQueuedInOutageSurviveKill9")
	}
	srv, err := New(Config{GRPCAddr: "127.0.0.1:0", NATSURL: args[0], DataDir: args[1], DecisionLog: args[2]}, WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("GRPC %s\n", srv.GRPCAddr())
	select {} // until kill -9
}

// Finding 14: records queued while NATS is down lived only in memory, and
// a kill -9 of the replica lost them from ListDecisions (they were in its
// decision log only). Now each is in the replica's spool before its Check
// is answered, and the next guard on that data dir stores them.
func TestRecordsQueuedInOutageSurviveKill9(t *testing.T) {
	ns := natstest.StartRestartable(t)
	dataDir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestSpoolChild$")
	child.Env = append(os.Environ(), spoolChildEnv+"="+ns.ClientURL()+" "+dataDir+" "+filepath.Join(t.TempDir(), "decisions.log"))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	addr := ""
	for sc := bufio.NewScanner(out); addr == "" && sc.Scan(); {
		addr, _ = strings.CutPrefix(sc.Text(), "GRPC ")
	}
	if addr == "" {
		t.Fatal("the guard process did not start")
	}
	gc := yesguardv1.NewGuardClient(dial(t, addr))

	ns.Stop()
	const n = 10
	var ids []string
	for i := range n {
		resp, err := gc.Check(t.Context(), &yesguardv1.CheckRequest{CallId: "spooled", Tool: "submit_appeal", ToolCallId: fmt.Sprint("tc-", i)})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE {
			t.Fatalf("Check with NATS down: %v, want a refusal", resp.GetOutcome())
		}
		ids = append(ids, resp.GetDecisionId())
	}
	// Every Check is answered, so every record is on disk: kill -9.
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	ns.Start()
	next := startReplicaCfg(t, Config{GRPCAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), DataDir: dataDir, ShutdownTimeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), faultWait)
	defer cancel()
	missing := n
	for missing > 0 {
		resp, err := next.gc.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: "spooled"})
		if err == nil {
			got := map[string]bool{}
			for _, d := range resp.GetDecisions() {
				got[d.GetDecisionId()] = true
			}
			missing = 0
			for _, id := range ids {
				if !got[id] {
					missing++
				}
			}
		}
		if missing > 0 && ctx.Err() != nil {
			t.Fatalf("%d of the %d records queued before the kill -9 are not listed (last: %v)", missing, n, err)
		}
		if missing > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// Finding 11: an answer's age was its stream timestamp (NATS's clock)
// against the replica's own clock, so a replica 31 s ahead refused every
// fresh yes STALE (and one behind allowed old ones). The engine's clock is
// now NATS's: the replica's corrected by the offset it measures.
func TestReplicaClockAheadOfNATS(t *testing.T) {
	const skew = 31 * time.Second // past the default 30 s answer age
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", DataDir: t.TempDir(), ShutdownTimeout: 10 * time.Second}
	srv, err := New(cfg, WithDecisionSink(&captureSink{}), WithLogger(zaptest.NewLogger(t)),
		withLocalClock(func() time.Time { return time.Now().Add(skew) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, srv) })
	if off := srv.clock.Offset(); off > -skew+5*time.Second || off < -skew-5*time.Second {
		t.Errorf("measured offset %v, want about %v", off, -skew)
	}
	pub, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	for seq, ev := range []struct {
		sp   transcript.Speaker
		text string
	}{{transcript.Agent, "Shall I submit your appeal now?"}, {transcript.Caller, "Yes."}} {
		if err := probe.Publish(pub, DefaultSubjectPrefix, transcript.Event{CallID: "skewed", Seq: uint64(seq + 1), Speaker: ev.sp,
			Type: transcript.TypeTranscript, Text: ev.text, Final: true, Lang: "en"}); err != nil {
			t.Fatal(err)
		}
	}
	gc := yesguardv1.NewGuardClient(dial(t, srv.GRPCAddr()))
	resp, err := gc.Check(t.Context(), &yesguardv1.CheckRequest{CallId: "skewed", Tool: "submit_appeal", WaitMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("a fresh yes on a replica %v ahead of NATS: %v %v %q, want ALLOW", skew, resp.GetOutcome(), resp.GetReason(), resp.GetDetail())
	}
}

// A Stop cut short (a cancelled context, as a crash in-process) returns
// with the data directory free: the restart that follows it in the same
// process takes the lock at once, not "in use by another yesguard".
func TestStopCutShortReleasesTheDataDir(t *testing.T) {
	dir := t.TempDir()
	srv, err := New(Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", DataDir: dir, ShutdownTimeout: 10 * time.Second},
		WithDecisionSink(&captureSink{}), WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	cut, cancel := context.WithCancel(context.Background())
	cancel()
	_ = srv.Stop(cut) // errors of the steps cut short are expected
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("right after Stop returned: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}
