package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
)

// TestReplayReproducesAProbeRun: a probe run recorded with --record and
// replayed under the same policy reproduces every recorded decision; under
// a policy that lets the tool through without a yes, the refusals show as
// changed and replay exits 1.
func TestReplayReproducesAProbeRun(t *testing.T) {
	srv := startGuard(t, "")
	vars := guardEnv(srv)
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	r := runCmd(t, vars, "probe", "--call-prefix", "rp", "--record", rec)
	r.expect(t, exitOK, "all 7 probes passed", "Recorded the run to "+rec)

	r = runCmd(t, nil, "replay", rec)
	r.expect(t, exitOK, "0 changed.")
	if strings.Contains(r.stdout, "CHANGED") {
		t.Fatalf("a decision changed under the same policy:\n%s", r.stdout)
	}
	// Every probe Check was re-judged: five scenarios, three Checks of the
	// two yeses.
	r = runCmd(t, nil, "replay", "--json", rec)
	var rep struct {
		Same, Changed int
		Calls         []struct {
			CallID    string `json:"call_id"`
			Decisions []struct {
				Kind     string
				Same     bool
				Recorded struct{ Outcome, Reason string }
				Now      *struct{ Outcome, Reason string }
				Note     string
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if rep.Changed != 0 || rep.Same != 8 || len(rep.Calls) != 6 {
		t.Fatalf("replay --json: %d same, %d changed, %d calls; want 8, 0, 6:\n%s", rep.Same, rep.Changed, len(rep.Calls), r.stdout)
	}
	kinds := map[string]int{}
	for _, c := range rep.Calls {
		for _, d := range c.Decisions {
			kinds[d.Kind+" "+d.Recorded.Outcome]++
			if d.Kind == "complete" && d.Note != "" {
				t.Errorf("the Complete of %s was not applied: %s", c.CallID, d.Note)
			}
		}
	}
	if kinds["check ALLOW"] != 1 || kinds["check DUPLICATE"] != 2 || kinds["check REFUSE"] != 5 || kinds["complete UNSPECIFIED"] != 1 {
		t.Errorf("recorded decisions by kind: %v", kinds)
	}

	open := filepath.Join(t.TempDir(), "open.yaml")
	if err := os.WriteFile(open, []byte("tools:\n  submit_appeal:\n    confirm: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, nil, "replay", "--policy", open, "--call", "rp-1", rec)
	r.expect(t, exitError, "recorded  REFUSE", "now       ALLOW     not_required", "[CHANGED]", "1 changed.")
}

// replay --call reads the call from the guard over gRPC, as an auditor:
// on the default guard (whose embedded NATS lets no client read its
// streams) and behind tokens, with the auditor's token, it re-judges every
// recorded decision of a probe call the same; with the pipeline's token
// it is refused, saying which role reads.
func TestReplayCallFromTheGuard(t *testing.T) {
	srv := startGuard(t, "")
	vars := guardEnv(srv)
	runCmd(t, vars, "probe", "--call-prefix", "rc").expect(t, exitOK, "all 7 probes passed")
	// rc-6 is the two yeses: an ALLOW, its Complete and two duplicates.
	r := runCmd(t, vars, "replay", "--call", "rc-6")
	r.expect(t, exitOK, "0 changed.")
	if strings.Contains(r.stderr, "warning") || strings.Contains(r.stdout, "CHANGED") {
		t.Fatalf("replay --call rc-6:\n%s\n%s", r.stdout, r.stderr)
	}
	r = runCmd(t, vars, "replay", "--call", "rc-5") // "Yes. Wait, no."
	r.expect(t, exitOK, "REFUSE", "negated", "0 changed.")

	pipeline, auditor := auth.NewToken(), auth.NewToken()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("tokens:\n"+auth.TokenEntry("pipeline", pipeline, []auth.Role{auth.RolePipeline})+
		auth.TokenEntry("auditor", auditor, []auth.Role{auth.RoleAuditor})), 0o600); err != nil {
		t.Fatal(err)
	}
	srv = servertest.Start(t, servertest.Options{Config: func(c *server.Config) { c.GRPCTokens = path }})
	vars = guardEnv(srv)
	vars["YESGUARD_TOKEN"], vars["YESGUARD_AUDITOR_TOKEN"] = pipeline, auditor
	runCmd(t, vars, "probe", "--call-prefix", "rt").expect(t, exitOK, "all 7 probes passed")
	r = runCmd(t, vars, "replay", "--call", "rt-6")
	if r.code != exitError || !strings.Contains(r.stderr, "PermissionDenied") || !strings.Contains(r.stderr, "auditor") {
		t.Errorf("replay --call with the pipeline's token: exit %d, want %d and a PermissionDenied naming the auditor role\n%s", r.code, exitError, r.stderr)
	}
	vars["YESGUARD_TOKEN"] = auditor
	runCmd(t, vars, "replay", "--call", "rt-6").expect(t, exitOK, "0 changed.")
}

// F8 of the security red team: replay --call read the guard's streams
// with the nats clients' default inbox (_INBOX), which the pipeline's user
// may subscribe to, so the pipeline read whatever an auditor replayed.
// The CLI's replies now arrive under a prefix of its own. Against a real
// nats-server with JetStream and one account (the worst case: an auditor
// sharing the pipeline's account), the pipeline's _INBOX.> gets nothing.
func TestReplayRepliesAvoidThePipelineInbox(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoLog: true, NoSigs: true, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	snoop, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer snoop.Close()
	pipelineInbox, err := snoop.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	cliInbox, err := snoop.SubscribeSync(auth.DefaultCLIInbox + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := snoop.Flush(); err != nil {
		t.Fatal(err)
	}
	// The guard's streams, holding the call, so replay's reads (consumer
	// requests, then fetched messages) all go to its inbox.
	setup, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix("_INBOX_setup"))
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	js, err := jetstream.New(setup)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, subject := range map[string]string{"YESGUARD_TRANSCRIPT": "yesguard.transcript.>", "YESGUARD_DECISIONS": "yesguard.decisions.>"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "yesguard.transcript.inb-1", []byte(`{"call_id":"inb-1","seq":1,"speaker":"caller","type":"transcript","final":true,"text":"my account number is 99887766"}`)); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, map[string]string{"YESGUARD_NATS_URL": ns.ClientURL()}, "replay", "--from-streams", "--call", "inb-1", "--timeout", "10s")
	if !strings.Contains(r.stdout+r.stderr, "inb-1") {
		t.Fatalf("replay --call: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The server queued each reply to both subscriptions at once; the
	// flush's PONG comes after them.
	if err := snoop.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := pipelineInbox.Pending(); n != 0 {
		msg, _ := pipelineInbox.NextMsg(time.Second)
		t.Fatalf("the pipeline's _INBOX.> read %d of replay's replies, e.g. %s: %s", n, msg.Subject, msg.Data)
	}
	if n, _, _ := cliInbox.Pending(); n == 0 {
		t.Fatalf("no reply reached %s.>: the test saw none of replay's traffic (stderr: %s)", auth.DefaultCLIInbox, r.stderr)
	}
}
