package auth

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// whoGuard is a Guard service that answers with the caller's Identity, so
// a test sees what the interceptors passed on. Its Complete enforces the
// pipeline role itself, as the real service does behind the interceptor.
type whoGuard struct {
	yesguardv1.UnimplementedGuardServer
}

func (whoGuard) Check(ctx context.Context, _ *yesguardv1.CheckRequest) (*yesguardv1.CheckResponse, error) {
	id, ok := FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no identity in the context")
	}
	return &yesguardv1.CheckResponse{Message: id.String(), Detail: id.TokenName}, nil
}

func (whoGuard) Complete(ctx context.Context, _ *yesguardv1.CompleteRequest) (*yesguardv1.CompleteResponse, error) {
	if err := RequireRole(ctx, RolePipeline); err != nil {
		return nil, err
	}
	return &yesguardv1.CompleteResponse{DecisionId: "done"}, nil
}

func (whoGuard) ListDecisions(ctx context.Context, _ *yesguardv1.ListDecisionsRequest) (*yesguardv1.ListDecisionsResponse, error) {
	id, _ := FromContext(ctx)
	return &yesguardv1.ListDecisionsResponse{NextPageToken: id.String()}, nil
}

// startGRPC serves whoGuard, health and reflection on 127.0.0.1:0 behind
// authz's interceptors, and returns the address.
func startGRPC(t *testing.T, authz *Authorizer, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(authz.ServerOptions(), opts...)...)
	yesguardv1.RegisterGuardServer(srv, whoGuard{})
	hs := health.NewServer()
	healthgrpc.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// dial connects with ClientConfig, the CLI's own client side.
func dial(t *testing.T, cfg ClientConfig) *grpc.ClientConn {
	t.Helper()
	opts, err := cfg.DialOptions()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(cfg.Target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails unless err is a status with code, and its message holds
// each of hints.
func wantCode(t *testing.T, err error, code codes.Code, hints ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	for _, h := range hints {
		if !strings.Contains(st.Message(), h) {
			t.Errorf("message %q lacks %q", st.Message(), h)
		}
	}
}

func newAuthorizer(t *testing.T, toks *Tokens, methods Methods, reg prometheus.Registerer) *Authorizer {
	t.Helper()
	a, err := NewAuthorizer(AuthorizerConfig{Tokens: toks, Methods: methods, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGRPCTokensAndRoles(t *testing.T) {
	dir := t.TempDir()
	pipe, audit := NewToken(), NewToken()
	toks, err := LoadTokens(tokenFile(t, dir,
		testToken{"pipeline-eu", pipe, []Role{RolePipeline}},
		testToken{"audit", audit, []Role{RoleAuditor}},
	))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	authz := newAuthorizer(t, toks, DefaultMethods(MethodOptions{Reflection: true}), reg)
	addr := startGRPC(t, authz)
	ctx := callCtx(t)

	anon := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr}))
	_, err = anon.Check(ctx, &yesguardv1.CheckRequest{})
	wantCode(t, err, codes.Unauthenticated, "authorization: Bearer", "--token")
	_, err = anon.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{})
	wantCode(t, err, codes.Unauthenticated)

	stranger := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr, Token: NewToken()}))
	_, err = stranger.Check(ctx, &yesguardv1.CheckRequest{})
	wantCode(t, err, codes.Unauthenticated, "not one this guard knows")

	pipeline := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr, Token: pipe}))
	resp, err := pipeline.Check(ctx, &yesguardv1.CheckRequest{})
	if err != nil {
		t.Fatalf("pipeline Check: %v", err)
	}
	if resp.GetDetail() != "pipeline-eu" || resp.GetMessage() != "token pipeline-eu [pipeline]" {
		t.Fatalf("the service saw %q (%q), want the pipeline-eu token", resp.GetMessage(), resp.GetDetail())
	}
	if _, err := pipeline.Complete(ctx, &yesguardv1.CompleteRequest{}); err != nil {
		t.Fatalf("pipeline Complete: %v", err)
	}
	_, err = pipeline.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{})
	wantCode(t, err, codes.PermissionDenied, `token "pipeline-eu" has roles [pipeline]`, "needs the auditor role")

	auditor := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr, Token: audit}))
	list, err := auditor.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{})
	if err != nil || list.GetNextPageToken() != "token audit [auditor]" {
		t.Fatalf("auditor ListDecisions: %v, %v", list, err)
	}
	for name, call := range map[string]func() error{
		"Check":    func() error { _, err := auditor.Check(ctx, &yesguardv1.CheckRequest{}); return err },
		"Complete": func() error { _, err := auditor.Complete(ctx, &yesguardv1.CompleteRequest{}); return err },
		"Redeem":   func() error { _, err := auditor.Redeem(ctx, &yesguardv1.RedeemRequest{}); return err },
	} {
		t.Run("auditor may not "+name, func(t *testing.T) {
			wantCode(t, call(), codes.PermissionDenied, "needs the pipeline role")
		})
	}

	// Health is open to all: container health checks carry no secret.
	hresp, err := healthgrpc.NewHealthClient(dial(t, ClientConfig{Target: addr})).Check(ctx, &healthgrpc.HealthCheckRequest{})
	if err != nil || hresp.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v, %v", hresp, err)
	}

	// Every refusal is counted by method and code.
	for _, tc := range []struct {
		method, code string
		want         float64
	}{
		{yesguardv1.Guard_Check_FullMethodName, "Unauthenticated", 2},
		{yesguardv1.Guard_ListDecisions_FullMethodName, "Unauthenticated", 1},
		{yesguardv1.Guard_ListDecisions_FullMethodName, "PermissionDenied", 1},
		{yesguardv1.Guard_Check_FullMethodName, "PermissionDenied", 1},
		{yesguardv1.Guard_Complete_FullMethodName, "PermissionDenied", 1},
		{yesguardv1.Guard_Redeem_FullMethodName, "PermissionDenied", 1},
	} {
		if got := testutil.ToFloat64(authz.refused.WithLabelValues(tc.method, tc.code)); got != tc.want {
			t.Errorf("refused{%s,%s} = %v, want %v", tc.method, tc.code, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "yesguard_grpc_auth_refused_total"); n != 6 {
		t.Errorf("%d refusal series registered, want 6", n)
	}
}

func TestGRPCMalformedAuthorization(t *testing.T) {
	dir := t.TempDir()
	pipe := NewToken()
	toks, err := LoadTokens(tokenFile(t, dir, testToken{"p", pipe, []Role{RolePipeline}}))
	if err != nil {
		t.Fatal(err)
	}
	addr := startGRPC(t, newAuthorizer(t, toks, nil, nil))
	client := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr}))
	for _, tc := range []struct {
		name string
		md   []string
		want string
	}{
		{"basic scheme", []string{"authorization", "Basic " + pipe}, "not a bearer token"},
		{"empty bearer", []string{"authorization", "Bearer  "}, "empty"},
		{"two headers", []string{"authorization", "Bearer " + pipe, "authorization", "Bearer " + pipe}, "more than one"},
		{"too long", []string{"authorization", "Bearer " + strings.Repeat("a", maxTokenBytes+1)}, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.AppendToOutgoingContext(callCtx(t), tc.md...)
			_, err := client.Check(ctx, &yesguardv1.CheckRequest{})
			wantCode(t, err, codes.Unauthenticated, tc.want)
		})
	}
	// The scheme is case-insensitive (RFC 9110).
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "authorization", "bearer "+pipe)
	if _, err := client.Check(ctx, &yesguardv1.CheckRequest{}); err != nil {
		t.Fatalf("lower-case bearer: %v", err)
	}
}

func TestGRPCTokenFileReload(t *testing.T) {
	dir := t.TempDir()
	old, fresh := NewToken(), NewToken()
	path := tokenFile(t, dir, testToken{"old", old, []Role{RolePipeline}})
	toks, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	addr := startGRPC(t, newAuthorizer(t, toks, nil, nil))
	ctx := callCtx(t)
	oldClient := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr, Token: old}))
	freshClient := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr, Token: fresh}))

	if _, err := oldClient.Check(ctx, &yesguardv1.CheckRequest{}); err != nil {
		t.Fatalf("old token before reload: %v", err)
	}
	_, err = freshClient.Check(ctx, &yesguardv1.CheckRequest{})
	wantCode(t, err, codes.Unauthenticated)

	// Rotate: the fresh token in, the old one out.
	tokenFile(t, dir, testToken{"fresh", fresh, []Role{RolePipeline}})
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if resp, err := freshClient.Check(ctx, &yesguardv1.CheckRequest{}); err != nil || resp.GetDetail() != "fresh" {
		t.Fatalf("fresh token after reload: %v, %v", resp, err)
	}
	_, err = oldClient.Check(ctx, &yesguardv1.CheckRequest{})
	wantCode(t, err, codes.Unauthenticated)

	// A broken file keeps the tokens in force.
	writeFile(t, path, []byte("tokens: [\n"))
	if err := toks.Reload(); err == nil {
		t.Fatal("reload of a broken file: no error")
	}
	if _, err := freshClient.Check(ctx, &yesguardv1.CheckRequest{}); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}
}

func TestGRPCReflection(t *testing.T) {
	dir := t.TempDir()
	audit := NewToken()
	toks, err := LoadTokens(tokenFile(t, dir, testToken{"audit", audit, []Role{RoleAuditor}}))
	if err != nil {
		t.Fatal(err)
	}
	listServices := func(t *testing.T, cc *grpc.ClientConn) error {
		t.Helper()
		stream, err := reflectionv1.NewServerReflectionClient(cc).ServerReflectionInfo(callCtx(t))
		if err != nil {
			return err
		}
		// A refused stream's Send may see only io.EOF; Recv has the status.
		_ = stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if len(resp.GetListServicesResponse().GetService()) == 0 {
			t.Fatal("reflection listed no services")
		}
		return nil
	}
	on := startGRPC(t, newAuthorizer(t, toks, DefaultMethods(MethodOptions{Reflection: true}), nil))
	wantCode(t, listServices(t, dial(t, ClientConfig{Target: on})), codes.Unauthenticated)
	if err := listServices(t, dial(t, ClientConfig{Target: on, Token: audit})); err != nil {
		t.Fatalf("reflection with a token: %v", err)
	}
	off := startGRPC(t, newAuthorizer(t, toks, DefaultMethods(MethodOptions{}), nil))
	wantCode(t, listServices(t, dial(t, ClientConfig{Target: off, Token: audit})), codes.PermissionDenied, "reflection is off")

	// Health's stream (Watch) passes the stream interceptor without a token.
	w, err := healthgrpc.NewHealthClient(dial(t, ClientConfig{Target: off})).Watch(callCtx(t), &healthgrpc.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := w.Recv(); err != nil || resp.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
		t.Fatalf("health Watch: %v, %v", resp, err)
	}
}

func TestWithoutTokensEveryRoleIsGranted(t *testing.T) {
	addr := startGRPC(t, newAuthorizer(t, nil, nil, nil))
	client := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr}))
	ctx := callCtx(t)
	resp, err := client.Check(ctx, &yesguardv1.CheckRequest{})
	if err != nil || resp.GetMessage() != "no tokens configured" {
		t.Fatalf("Check without tokens: %v, %v", resp, err)
	}
	if _, err := client.Complete(ctx, &yesguardv1.CompleteRequest{}); err != nil {
		t.Fatalf("Complete without tokens: %v", err)
	}
}

func TestAuthorizeUnknownMethodIsDenied(t *testing.T) {
	a := newAuthorizer(t, nil, nil, nil)
	_, err := a.Authorize(context.Background(), "/yesguard.v1.Guard/Everything")
	wantCode(t, err, codes.PermissionDenied, "not in yesguard's method table")
	// A service that finds no Identity (no interceptor) grants nothing.
	id, ok := FromContext(context.Background())
	if ok || id.Has(RolePipeline) || id.Has(RoleAuditor) {
		t.Fatalf("FromContext of a bare context: %+v, %v", id, ok)
	}
	wantCode(t, RequireRole(context.Background(), RolePipeline), codes.PermissionDenied, "not installed")
	auditor := NewContext(context.Background(), Identity{TokenName: "audit", Roles: []Role{RoleAuditor}})
	wantCode(t, RequireRole(auditor, RolePipeline), codes.PermissionDenied, "token audit [auditor]: only the pipeline role")
	if err := RequireRole(auditor, RoleAuditor); err != nil {
		t.Fatal(err)
	}
}
