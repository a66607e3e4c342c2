package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// startConfigured starts a server of cfg (edited by mut) on loopback with
// its own registry and a decision log file, stopped at the test's end.
func startConfigured(t *testing.T, mut func(*Config)) (*Server, *prometheus.Registry, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logPath := filepath.Join(t.TempDir(), "decisions.log")
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DecisionLog: logPath, DataDir: t.TempDir()}
	if mut != nil {
		mut(&cfg)
	}
	srv, err := New(cfg, WithRegistry(reg), WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return srv, reg, logPath
}

// violations connects to NATS with opts and returns the connection and
// the permission violations the server reports to it.
func violations(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, <-chan error) {
	t.Helper()
	errc := make(chan error, 16)
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			errc <- err
		}
	}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errc
}

func wantViolation(t *testing.T, errc <-chan error, what, subject string) {
	t.Helper()
	select {
	case err := <-errc:
		if !strings.Contains(err.Error(), subject) {
			t.Errorf("%s: violation %v, want one on %s", what, err, subject)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s: the server reported no permission violation", what)
	}
}

// askYes publishes a question and a yes on call through pub and Checks it
// through client.
func askYes(t *testing.T, pub *nats.Conn, client yesguardv1.GuardClient, ctx context.Context, call string) (*yesguardv1.CheckResponse, error) {
	t.Helper()
	for i, ev := range []transcript.Event{
		{CallID: call, Seq: 1, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Shall I submit your appeal A-17 now?"},
		{CallID: call, Seq: 2, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Yes, please."},
	} {
		if err := probe.Publish(pub, DefaultSubjectPrefix, ev); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-17"})
	return client.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: "submit_appeal", Args: args, WaitMs: 2000})
}

func plainClient(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestEmbeddedNATSPermissions: through the real server wiring, only the
// pipeline speaks for the caller and nobody but the guard reads a call.
// With a pipeline password, an anonymous client cannot even connect; the
// pipeline may publish transcripts (and a Check allows on them) but not
// read them, nor publish decision records. On a loopback server without a
// credential, a local client is the pipeline and no more.
func TestEmbeddedNATSPermissions(t *testing.T) {
	const password = "a-long-random-pipeline-password"
	srv, _, _ := startConfigured(t, func(c *Config) { c.NATSPipelinePassword = password })

	if nc, err := nats.Connect(srv.NATSURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("an anonymous client connected to a server with a pipeline credential")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("anonymous connect: %v, want an authorization violation", err)
	}
	if nc, err := nats.Connect(srv.NATSURL(), nats.UserInfo(auth.DefaultPipelineUser, "wrong-password-0123456"), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a wrong pipeline password connected")
	}

	pipe, errc := violations(t, srv.NATSURL(), nats.UserInfo(auth.DefaultPipelineUser, password))
	client := yesguardv1.NewGuardClient(plainClient(t, srv.GRPCAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := askYes(t, pipe, client, ctx, "perm-1")
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("the pipeline's transcript: Check = %v, %v; want ALLOW", resp, err)
	}

	if _, err := pipe.Subscribe(DefaultSubjectPrefix+".>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, errc, "the pipeline subscribing to transcripts", DefaultSubjectPrefix+".>")
	if _, err := pipe.Subscribe(">", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, errc, "the pipeline subscribing to everything", ">")
	if err := pipe.Publish("yesguard.decisions.perm-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, errc, "the pipeline publishing a decision record", "yesguard.decisions.perm-1")

	// Loopback without a credential: the anonymous client is the pipeline.
	open, _, _ := startConfigured(t, nil)
	anon, aerrc := violations(t, open.NATSURL())
	resp, err = askYes(t, anon, yesguardv1.NewGuardClient(plainClient(t, open.GRPCAddr())), ctx, "perm-2")
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("a local anonymous pipeline: Check = %v, %v; want ALLOW", resp, err)
	}
	if _, err := anon.Subscribe(">", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, aerrc, "an anonymous client reading every subject", ">")
}

// TestEmbeddedNATSRefusesExposureWithoutAuth: listening beyond the
// loopback without a pipeline credential stops New, saying how to fix it.
func TestEmbeddedNATSRefusesExposureWithoutAuth(t *testing.T) {
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "0.0.0.0:0", DataDir: t.TempDir(), DecisionLog: "stderr"}
	_, err := New(cfg, WithLogger(zap.NewNop()), WithDecisionSink(nil))
	if err == nil || !strings.Contains(err.Error(), auth.PipelinePasswordEnv) || !strings.Contains(err.Error(), "nats_listen") {
		t.Fatalf("New on 0.0.0.0 without a credential: %v; want a refusal naming %s", err, auth.PipelinePasswordEnv)
	}
	cfg.NATSPipelinePassword = "short"
	if _, err := New(cfg, WithLogger(zap.NewNop())); err == nil || !strings.Contains(err.Error(), "16 bytes") {
		t.Errorf("a short password: %v", err)
	}
}

// writeTokens writes a token file of name → roles and returns its path
// and the tokens by name.
func writeTokens(t *testing.T, path string, entries map[string][]auth.Role) map[string]string {
	t.Helper()
	toks := map[string]string{}
	var b strings.Builder
	b.WriteString("tokens:\n")
	for name, roles := range entries {
		toks[name] = auth.NewToken()
		b.WriteString(auth.TokenEntry(name, toks[name], roles))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return toks
}

func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// TestGRPCTokensAndRoles: with --grpc-tokens, the real server refuses a
// call without a token (Unauthenticated) and a token without the method's
// role (PermissionDenied), lets each role do its own, counts each refusal,
// keeps health open, puts reflection and the call pages behind a token,
// and takes a new token file on Reload (what SIGHUP calls).
func TestGRPCTokensAndRoles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	toks := writeTokens(t, path, map[string][]auth.Role{"pipe": {auth.RolePipeline}, "audit": {auth.RoleAuditor}})
	srv, reg, logPath := startConfigured(t, func(c *Config) { c.GRPCTokens = path })
	cc := plainClient(t, srv.GRPCAddr())
	client := yesguardv1.NewGuardClient(cc)
	pub, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if _, err := askYes(t, pub, client, ctx, "tok-1"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Check without a token: %v, want Unauthenticated", err)
	}
	if _, err := askYes(t, pub, client, bearer(ctx, toks["audit"]), "tok-1"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Check with the auditor's token: %v, want PermissionDenied", err)
	}
	if _, err := askYes(t, pub, client, bearer(ctx, "yg_not-a-token-of-this-guard"), "tok-1"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Check with an unknown token: %v, want Unauthenticated", err)
	}
	resp, err := askYes(t, pub, client, bearer(ctx, toks["pipe"]), "tok-1")
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("Check with the pipeline's token: %v, %v; want ALLOW", resp, err)
	}
	// Who asked is logged with each decision: the token's name and role.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if line := lineWith(string(b), resp.GetDecisionId()); strings.Contains(line, `"caller":"token pipe [pipeline]"`) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the decision's log line does not name its caller: %s", line)
		}
		time.Sleep(10 * time.Millisecond)
	}
	complete := &yesguardv1.CompleteRequest{DecisionId: resp.GetDecisionId(), Failed: true}
	if _, err := client.Complete(bearer(ctx, toks["audit"]), complete); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Complete with the auditor's token: %v, want PermissionDenied (only whoever got the ALLOW frees it)", err)
	}
	list := &yesguardv1.ListDecisionsRequest{CallId: "tok-1"}
	if _, err := client.ListDecisions(bearer(ctx, toks["pipe"]), list); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ListDecisions with the pipeline's token: %v, want PermissionDenied", err)
	}
	if _, err := client.ListDecisions(ctx, list); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListDecisions without a token: %v, want Unauthenticated", err)
	}
	if got, err := client.ListDecisions(bearer(ctx, toks["audit"]), list); err != nil || len(got.GetDecisions()) == 0 {
		t.Errorf("ListDecisions with the auditor's token: %v, %v", got, err)
	}
	if _, err := client.Complete(bearer(ctx, toks["pipe"]), complete); err != nil {
		t.Errorf("Complete with the pipeline's token: %v", err)
	}
	if st, err := healthgrpc.NewHealthClient(cc).Check(ctx, &healthgrpc.HealthCheckRequest{}); err != nil || st.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
		t.Errorf("health without a token: %v, %v; want it open", st, err)
	}
	refl, err := reflectionv1.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err == nil {
		_ = refl.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
		_, err = refl.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("reflection without a token: %v, want Unauthenticated", err)
	}
	for code, want := range map[string]float64{"Unauthenticated": 4, "PermissionDenied": 3} {
		if got := labelled(t, reg, "yesguard_grpc_auth_refused_total", "code", code); got != want {
			t.Errorf("auth_refused_total{code=%s} = %v, want %v", code, got, want)
		}
	}

	// The call pages read calls too: the auditor's token only.
	page := "http://" + srv.HTTPAddr() + "/calls"
	if code := get(t, page, ""); code != http.StatusUnauthorized {
		t.Errorf("/calls without a token: %d, want 401", code)
	}
	if code := get(t, page, toks["pipe"]); code != http.StatusForbidden {
		t.Errorf("/calls with the pipeline's token: %d, want 403", code)
	}
	if code := get(t, page, toks["audit"]); code != http.StatusOK {
		t.Errorf("/calls with the auditor's token: %d, want 200", code)
	}

	// A new file revokes the old pipeline token and grants a new one; a
	// broken file keeps the tokens in force, and is counted.
	next := writeTokens(t, path, map[string][]auth.Role{"pipe-2": {auth.RolePipeline}})
	if err := srv.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if _, err := askYes(t, pub, client, bearer(ctx, toks["pipe"]), "tok-2"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the revoked token after Reload: %v, want Unauthenticated", err)
	}
	if resp, err := askYes(t, pub, client, bearer(ctx, next["pipe-2"]), "tok-2"); err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Errorf("the new token after Reload: %v, %v", resp, err)
	}
	if err := os.WriteFile(path, []byte("tokens: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil || !strings.Contains(err.Error(), "grpc_tokens") {
		t.Errorf("Reload of an empty token file: %v, want an error naming grpc_tokens", err)
	}
	if got := labelled(t, reg, "yesguard_reload_errors_total", "what", "tokens"); got != 1 {
		t.Errorf("reload_errors_total{what=tokens} = %v, want 1", got)
	}
	if _, err := client.ListDecisions(bearer(ctx, next["pipe-2"]), &yesguardv1.ListDecisionsRequest{CallId: "tok-2"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("after a failed reload the token in force is gone: %v", err)
	}
}

// lineWith is the first line of text holding s.
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, name+"-ca.pem")}
	writePEMFile(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue signs a server (127.0.0.1) or client certificate and returns the
// certificate's and the key's files.
func (ca *testCA) issue(t *testing.T, dir, name string, serial int64, server bool) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEMFile(t, certFile, "CERTIFICATE", der)
	writePEMFile(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEMFile(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGRPCMutualTLS: with --grpc-client-ca, the real server completes the
// handshake only with a client certificate its CA signed: not in
// plaintext, not without a certificate, not with one another CA signed.
func TestGRPCMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, dir, "guard"), newTestCA(t, dir, "stranger")
	serverCert, serverKey := ca.issue(t, dir, "server", 2, true)
	clientCert, clientKey := ca.issue(t, dir, "pipeline", 3, false)
	strangerCert, strangerKey := other.issue(t, dir, "stranger", 4, false)
	srv, _, _ := startConfigured(t, func(c *Config) {
		c.GRPCTLSCert, c.GRPCTLSKey, c.GRPCClientCA = serverCert, serverKey, ca.file
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	dial := func(certFile, keyFile string) error {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if certFile != "" {
			pair, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		cc := plainClient(t, srv.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := healthgrpc.NewHealthClient(cc).Check(ctx, &healthgrpc.HealthCheckRequest{})
		return err
	}
	if err := dial(clientCert, clientKey); err != nil {
		t.Fatalf("a client certificate the CA signed: %v", err)
	}
	if err := dial("", ""); status.Code(err) != codes.Unavailable {
		t.Errorf("no client certificate: %v, want the handshake refused (Unavailable)", err)
	}
	if err := dial(strangerCert, strangerKey); status.Code(err) != codes.Unavailable {
		t.Errorf("a certificate another CA signed: %v, want the handshake refused (Unavailable)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := healthgrpc.NewHealthClient(plainClient(t, srv.GRPCAddr())).Check(ctx, &healthgrpc.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext to a TLS server: %v, want Unavailable", err)
	}
}
