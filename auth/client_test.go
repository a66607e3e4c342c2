package auth

import (
	"strings"
	"testing"

	"google.golang.org/grpc"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

func TestTokenNeverSentInPlaintextBeyondLoopback(t *testing.T) {
	tok := NewToken()
	for _, tc := range []struct {
		target string
		tls    bool
		ok     bool
	}{
		{"127.0.0.1:50051", false, true},
		{"127.3.4.5:50051", false, true},
		{"[::1]:50051", false, true},
		{"localhost:50051", false, true},
		{"unix:///run/yesguard.sock", false, true},
		{"10.0.0.5:50051", false, false},
		{"guard.internal:50051", false, false},
		{"0.0.0.0:50051", false, false},
		{"dns:///guard.internal:50051", false, false},
		{"guard.internal:50051", true, true},
	} {
		_, err := ClientConfig{Target: tc.target, TLS: tc.tls, Token: tok}.DialOptions()
		if tc.ok && err != nil {
			t.Errorf("%s (tls %v): %v", tc.target, tc.tls, err)
		}
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), "refusing to send the bearer token in plaintext") {
				t.Errorf("%s (tls %v): %v, want a refusal", tc.target, tc.tls, err)
			} else if strings.Contains(err.Error(), tok) {
				t.Errorf("the refusal quotes the token: %v", err)
			}
		}
	}
	// Without a token there is nothing to protect.
	if _, err := (ClientConfig{Target: "10.0.0.5:50051"}).DialOptions(); err != nil {
		t.Errorf("no token, plaintext: %v", err)
	}
}

func TestClientConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  ClientConfig
		want string
	}{
		{"token with a newline", ClientConfig{Target: "127.0.0.1:1", Token: "a\nb"}, "--token: holds white space"},
		{"cert without key", ClientConfig{Target: "127.0.0.1:1", CertFile: "c.pem"}, "--tls-cert and --tls-key"},
		{"missing CA", ClientConfig{Target: "127.0.0.1:1", CAFile: dir + "/absent.pem"}, "--tls-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.DialOptions()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// The token is refused per call too when the connection turns out to have
// no TLS: gRPC checks RequireTransportSecurity before sending it.
func TestBearerNeedsTLSUnlessLoopback(t *testing.T) {
	if !(bearer{token: "t"}).RequireTransportSecurity() {
		t.Fatal("a bearer for a remote target must require transport security")
	}
	if (bearer{token: "t", plaintextOK: true}).RequireTransportSecurity() {
		t.Fatal("a loopback bearer must not")
	}
	// Over a plaintext loopback listener, with TLS demanded, no call is
	// made: the server would see no token.
	addr := startGRPC(t, newAuthorizer(t, nil, nil, nil))
	cc := dial(t, ClientConfig{Target: addr})
	ctx := callCtx(t)
	err := cc.Invoke(ctx, yesguardv1.Guard_Check_FullMethodName, &yesguardv1.CheckRequest{}, &yesguardv1.CheckResponse{},
		grpc.PerRPCCredentials(bearer{token: "t"}))
	if err == nil || !strings.Contains(err.Error(), "cannot send secure credentials on an insecure connection") {
		t.Fatalf("bearer over plaintext: %v", err)
	}
}
