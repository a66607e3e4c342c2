package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/auth"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
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
