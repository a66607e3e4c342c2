package auth

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// servedSerial makes a health call on cc and returns the serial number of
// the certificate the server presented.
func servedSerial(t *testing.T, cc *grpc.ClientConn) int64 {
	t.Helper()
	var p peer.Peer
	if _, err := healthgrpc.NewHealthClient(cc).Check(callCtx(t), &healthgrpc.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		t.Fatalf("health over TLS: %v", err)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		t.Fatalf("no TLS peer: %#v", p.AuthInfo)
	}
	return info.State.PeerCertificates[0].SerialNumber.Int64()
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "guard")
	serverCert, serverKey := ca.issue(t, dir, "server", 10, true)
	clientCert, clientKey := ca.issue(t, dir, "pipeline-client", 11, false)
	stranger := newTestCA(t, dir, "stranger")
	strangerCert, strangerKey := stranger.issue(t, dir, "stranger-client", 12, false)

	stls, err := LoadServerTLS(ServerTLSConfig{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: ca.file})
	if err != nil {
		t.Fatal(err)
	}
	if !stls.MutualTLS() {
		t.Fatal("MutualTLS() false with a client CA")
	}
	pipe := NewToken()
	toks, err := LoadTokens(tokenFile(t, dir, testToken{"pipe", pipe, []Role{RolePipeline}}))
	if err != nil {
		t.Fatal(err)
	}
	addr := startGRPC(t, newAuthorizer(t, toks, nil, nil), stls.ServerOption())

	// A client whose certificate the CA signed gets through, and the
	// service sees the certificate's subject next to the token's name.
	good := yesguardv1.NewGuardClient(dial(t, ClientConfig{Target: addr, CAFile: ca.file, CertFile: clientCert, KeyFile: clientKey, Token: pipe}))
	resp, err := good.Check(callCtx(t), &yesguardv1.CheckRequest{})
	if err != nil {
		t.Fatalf("client with the CA's certificate: %v", err)
	}
	if want := "token pipe [pipeline], cert CN=pipeline-client,O=yesguard test"; resp.GetMessage() != want {
		t.Fatalf("identity %q, want %q", resp.GetMessage(), want)
	}

	// Refused at the handshake: no certificate, or one another CA signed.
	// Health is open at the gRPC layer, so only TLS can refuse these.
	for _, tc := range []struct {
		name string
		cfg  ClientConfig
	}{
		{"no client certificate", ClientConfig{Target: addr, CAFile: ca.file}},
		{"unknown client certificate", ClientConfig{Target: addr, CAFile: ca.file, CertFile: strangerCert, KeyFile: strangerKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := healthgrpc.NewHealthClient(dial(t, tc.cfg)).Check(callCtx(t), &healthgrpc.HealthCheckRequest{})
			wantCode(t, err, codes.Unavailable)
		})
	}

	// A client that does not trust the server's CA refuses it.
	_, err = healthgrpc.NewHealthClient(dial(t, ClientConfig{Target: addr, CAFile: stranger.file, CertFile: clientCert, KeyFile: clientKey})).
		Check(callCtx(t), &healthgrpc.HealthCheckRequest{})
	wantCode(t, err, codes.Unavailable, "certificate signed by unknown authority")
}

func TestServerTLSReloadKeepsConnections(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "guard")
	certFile, keyFile := ca.issue(t, dir, "server", 100, true)
	stls, err := LoadServerTLS(ServerTLSConfig{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := startGRPC(t, newAuthorizer(t, nil, nil, nil), stls.ServerOption())
	before := dial(t, ClientConfig{Target: addr, CAFile: ca.file})
	if got := servedSerial(t, before); got != 100 {
		t.Fatalf("serial %d before reload, want 100", got)
	}

	// Renew the certificate in place and reload.
	ca.issue(t, dir, "server", 101, true)
	if err := stls.Reload(); err != nil {
		t.Fatal(err)
	}
	// The connection made before is kept (same handshake, same serial);
	// a new one gets the renewed certificate.
	if got := servedSerial(t, before); got != 100 {
		t.Fatalf("the old connection now sees serial %d; it should have been kept", got)
	}
	if got := servedSerial(t, dial(t, ClientConfig{Target: addr, CAFile: ca.file})); got != 101 {
		t.Fatalf("a new connection sees serial %d, want 101", got)
	}

	// A bad file keeps the certificate in force.
	writeFile(t, keyFile, []byte("not a key"))
	if err := stls.Reload(); err == nil || !strings.Contains(err.Error(), "--grpc-tls-cert") {
		t.Fatalf("reload with a broken key: %v", err)
	}
	if got := servedSerial(t, dial(t, ClientConfig{Target: addr, CAFile: ca.file})); got != 101 {
		t.Fatalf("after a failed reload a new connection sees serial %d, want 101", got)
	}
}

func TestLoadServerTLSErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "guard")
	certFile, keyFile := ca.issue(t, dir, "server", 1, true)
	for _, tc := range []struct {
		name string
		cfg  ServerTLSConfig
		want string
	}{
		{"key without cert", ServerTLSConfig{KeyFile: keyFile}, "give both"},
		{"missing cert file", ServerTLSConfig{CertFile: dir + "/absent.pem", KeyFile: keyFile}, "--grpc-tls-cert"},
		{"CA file without certificates", ServerTLSConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: keyFile}, "--grpc-client-ca: " + keyFile + ": no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadServerTLS(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// The test CA's certificates are valid for a day around now.
	cfg := ServerTLSConfig{CertFile: certFile, KeyFile: keyFile}
	if _, err := loadServerTLS(cfg, time.Now().Add(48*time.Hour)); err == nil || !strings.Contains(err.Error(), "the certificate expired at") {
		t.Fatalf("an expired certificate: %v", err)
	}
	if _, err := loadServerTLS(cfg, time.Now().Add(-48*time.Hour)); err == nil || !strings.Contains(err.Error(), "not valid before") {
		t.Fatalf("a certificate not yet valid: %v", err)
	}
}
