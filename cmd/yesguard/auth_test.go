package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/auth"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
)

// completeOnly answers Complete for a pipeline token, as the service will.
type completeOnly struct {
	yesguardv1.UnimplementedGuardServer
}

func (completeOnly) Complete(ctx context.Context, _ *yesguardv1.CompleteRequest) (*yesguardv1.CompleteResponse, error) {
	id, _ := auth.FromContext(ctx)
	if !id.Has(auth.RolePipeline) {
		return nil, status.Error(codes.PermissionDenied, "pipeline only")
	}
	return &yesguardv1.CompleteResponse{DecisionId: "completed-by-" + id.TokenName}, nil
}

// The CLI's client commands carry --token / YESGUARD_TOKEN to a guard
// behind auth's interceptors, and refuse to send it in plaintext beyond
// loopback.
func TestClientCommandsSendTheToken(t *testing.T) {
	token := auth.NewToken()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("tokens:\n"+auth.TokenEntry("cli", token, []auth.Role{auth.RolePipeline})), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	authz, err := auth.NewAuthorizer(auth.AuthorizerConfig{Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(authz.ServerOptions()...)
	yesguardv1.RegisterGuardServer(srv, completeOnly{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	addr := lis.Addr().String()

	r := runCmd(t, map[string]string{"YESGUARD_GRPC_ADDR": addr}, "complete", "d1")
	if r.code == exitOK || !strings.Contains(r.stderr, "Unauthenticated") || !strings.Contains(r.stderr, "YESGUARD_TOKEN") {
		t.Fatalf("without a token: exit %d, stderr %s", r.code, r.stderr)
	}
	runCmd(t, map[string]string{"YESGUARD_GRPC_ADDR": addr, "YESGUARD_TOKEN": token}, "complete", "d1").
		expect(t, exitOK, "d1: result reported")
	runCmd(t, map[string]string{"YESGUARD_GRPC_ADDR": addr}, "complete", "d1", "--token", token).
		expect(t, exitOK, "d1: result reported")

	// Not loopback, no TLS: refused before any connection is made.
	r = runCmd(t, map[string]string{"YESGUARD_TOKEN": token}, "complete", "d1", "--grpc-addr", "192.0.2.1:50051")
	if r.code == exitOK || !strings.Contains(r.stderr, "refusing to send the bearer token in plaintext") || strings.Contains(r.stderr, token) {
		t.Fatalf("plaintext to a remote guard: exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestServeReloadsTokensOnSIGHUP runs serve with --grpc-tokens, rewrites
// the token file, and sends this process (where serve runs) a real SIGHUP:
// the revoked token is refused and the new one accepted, through the
// client commands.
func TestServeReloadsTokensOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	old, next := auth.NewToken(), auth.NewToken()
	write := func(name, token string) {
		if err := os.WriteFile(path, []byte("tokens:\n"+auth.TokenEntry(name, token, []auth.Role{auth.RoleAuditor})), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("audit-1", old)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr servertest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runEnv(ctx, []string{"serve", "--grpc-addr=127.0.0.1:0", "--http-addr=", "--nats-listen=127.0.0.1:0",
			"--data-dir=" + filepath.Join(dir, "data"), "--decision-log=" + filepath.Join(dir, "decisions.log"), "--grpc-tokens=" + path},
			&env{stdout: io.Discard, stderr: &stderr, lookupEnv: mapEnv(nil)})
	}()
	addr := waitListening(t, &stderr, done)

	list := func(token string) result {
		return runCmd(t, map[string]string{"YESGUARD_GRPC_ADDR": addr, "YESGUARD_TOKEN": token}, "decisions", "call-x")
	}
	if r := list(old); strings.Contains(r.stderr, "Unauthenticated") {
		t.Fatalf("the first token refused: %s", r.stderr)
	}
	write("audit-2", next)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), `"msg":"gRPC tokens reloaded"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload after SIGHUP:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := list(old); !strings.Contains(r.stderr, "Unauthenticated") {
		t.Errorf("the revoked token after SIGHUP: exit %d, %s; want Unauthenticated", r.code, r.stderr)
	}
	if r := list(next); strings.Contains(r.stderr, "Unauthenticated") || strings.Contains(r.stderr, "PermissionDenied") {
		t.Errorf("the new token after SIGHUP: %s", r.stderr)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("serve exited %d:\n%s", code, stderr.String())
	}
}

// waitListening waits for serve's "yesguard listening" line and returns
// its gRPC address.
func waitListening(t *testing.T, stderr *servertest.Buffer, done <-chan int) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(line, `"msg":"yesguard listening"`) {
				var l struct{ GRPC string }
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatal(err)
				}
				return l.GRPC
			}
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Behind tokens, probe's Checks need the pipeline's role and its reads
// the auditor's. With the pipeline's token alone, the log probe says the
// reads were refused and what reads them, not "0 refusal records"; with
// YESGUARD_AUDITOR_TOKEN as well, all seven pass.
func TestProbeReadsWithTheAuditorToken(t *testing.T) {
	pipeline, auditor := auth.NewToken(), auth.NewToken()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("tokens:\n"+auth.TokenEntry("pipeline", pipeline, []auth.Role{auth.RolePipeline})+
		auth.TokenEntry("auditor", auditor, []auth.Role{auth.RoleAuditor})), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.Options{Config: func(c *server.Config) { c.GRPCTokens = path }})
	vars := guardEnv(srv)
	vars["YESGUARD_TOKEN"] = pipeline

	r := runCmd(t, vars, "probe", "--call-prefix", "tok")
	if r.code != exitError {
		t.Fatalf("probe with the pipeline's token alone: exit %d, want %d\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	for _, want := range []string{"records not readable: PermissionDenied", "ListDecisions refused (PermissionDenied)", "auditor role", "YESGUARD_AUDITOR_TOKEN"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("probe with the pipeline's token alone: stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "0 refusal records") {
		t.Errorf("a refused read shown as no records:\n%s", r.stdout)
	}

	vars["YESGUARD_AUDITOR_TOKEN"] = auditor
	runCmd(t, vars, "probe", "--call-prefix", "tok2").expect(t, exitOK, "all 7 probes passed")
}
