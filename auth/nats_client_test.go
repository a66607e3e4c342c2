package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// startConfigured starts a real nats-server from configuration text.
func startConfigured(t *testing.T, conf string) *natsserver.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	writeFile(t, path, []byte(conf))
	opts, err := natsserver.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the configuration does not parse: %v\n%s", err, conf)
	}
	opts.NoSigs, opts.NoLog = true, true
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(waitLong) {
		t.Fatal("nats-server not ready")
	}
	return ns
}

func secretFile(t *testing.T, name, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	writeFile(t, path, []byte(secret+"\n"))
	return path
}

// The configuration docs/security.md recommends, on a real server: the
// same guarantees as the embedded one, with the guard connecting over TCP
// as NATSClientConfig builds it.
func TestExternalNATSConfigOnARealServer(t *testing.T) {
	guardPassword := "guard-password-long-enough-1234"
	t.Setenv("YESGUARD_PIPELINE_PASSWORD", testPassword)
	t.Setenv("YESGUARD_GUARD_PASSWORD", guardPassword)
	conf := ExternalNATSConfig(Subjects{}) +
		"host: 127.0.0.1\nport: -1\njetstream { store_dir: \"" + t.TempDir() + "\" }\n"
	ns := startConfigured(t, conf)
	url := ns.ClientURL()

	if _, err := connect(t, url); err == nil {
		t.Fatal("anonymous connection accepted")
	}
	clientOpts := func(user, password, inbox string) []nats.Option {
		opts, err := NATSClientConfig{User: user, PasswordFile: secretFile(t, user, password), InboxPrefix: inbox}.Options(url)
		if err != nil {
			t.Fatal(err)
		}
		return opts
	}
	guard := mustConnect(t, url, clientOpts("yesguard", guardPassword, DefaultGuardInbox)...)
	pipe := mustConnect(t, url, clientOpts(DefaultPipelineUser, testPassword, "")...)
	assertTranscriptsPrivate(t, guard, pipe)
	assertJetStream(t, guard, pipe)
	// A fresh server: assertJetStream made streams of its own.
	ns2 := startConfigured(t, ExternalNATSConfig(Subjects{})+
		"host: 127.0.0.1\nport: -1\njetstream { store_dir: \""+t.TempDir()+"\" }\n")
	url = ns2.ClientURL()
	assertAcksReachNoGuardState(t,
		mustConnect(t, url, clientOpts("yesguard", guardPassword, DefaultGuardInbox)...),
		mustConnect(t, url, clientOpts(DefaultPipelineUser, testPassword, "")...))
}

func TestSecurityDocHoldsTheExternalConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "```\n" + ExternalNATSConfig(Subjects{}) + "```"; !strings.Contains(string(doc), want) {
		t.Fatalf("docs/security.md lacks the external server's configuration, as ExternalNATSConfig writes it:\n%s", want)
	}
	// Its token file example is a valid token file.
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, _ := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/security.md has no token file example")
	}
	if set, err := ParseTokens([]byte(example), "docs/security.md"); err != nil || set.Len() != 2 {
		t.Fatalf("the token file example: %v", err)
	}
}

// TLS with client certificates and a token, against a real server that
// verifies both.
func TestNATSClientTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "nats")
	serverCert, serverKey := ca.issue(t, dir, "nats-server", 2, true)
	clientCert, clientKey := ca.issue(t, dir, "guard-client", 3, false)
	token := NewToken()
	tlsConf, err := natsserver.GenTLSConfig(&natsserver.TLSConfigOpts{CertFile: serverCert, KeyFile: serverKey, CaFile: ca.file, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true,
		TLS: true, TLSVerify: true, TLSConfig: tlsConf, Authorization: token,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(waitLong) {
		t.Fatal("nats-server not ready")
	}
	url := "tls://" + ns.Addr().String()
	full := NATSClientConfig{TLSCA: ca.file, TLSCert: clientCert, TLSKey: clientKey, TokenFile: secretFile(t, "token", token)}
	opts, err := full.Options(url)
	if err != nil {
		t.Fatal(err)
	}
	nc := mustConnect(t, url, opts...)
	if !nc.TLSRequired() {
		t.Fatal("connected without TLS")
	}
	for name, cfg := range map[string]NATSClientConfig{
		"no client certificate": {TLSCA: ca.file, TokenFile: full.TokenFile},
		"no token":              {TLSCA: ca.file, TLSCert: clientCert, TLSKey: clientKey},
		"wrong token":           {TLSCA: ca.file, TLSCert: clientCert, TLSKey: clientKey, TokenFile: secretFile(t, "other", NewToken())},
	} {
		t.Run(name, func(t *testing.T) {
			opts, err := cfg.Options(url)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := connect(t, url, opts...); err == nil {
				t.Fatal("connected")
			}
		})
	}
}

// A .creds file (user JWT and seed) against a real server in operator
// mode.
func TestNATSClientCreds(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()

	oc := jwt.NewOperatorClaims(opub)
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ac := jwt.NewAccountClaims(apub)
	ajwt, err := ac.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	uc := jwt.NewUserClaims(upub)
	uc.IssuerAccount = apub
	ujwt, err := uc.Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "guard.creds")
	writeFile(t, credsFile, creds)

	operator, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &natsserver.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true,
		TrustedOperators: []*jwt.OperatorClaims{operator}, AccountResolver: resolver,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(waitLong) {
		t.Fatal("nats-server not ready")
	}
	opts, err := NATSClientConfig{CredsFile: credsFile}.Options(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	mustConnect(t, ns.ClientURL(), opts...)
	if _, err := connect(t, ns.ClientURL()); err == nil {
		t.Fatal("connected without credentials")
	}
}

func TestNATSClientConfigErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, []byte("\n"))
	notCreds := secretFile(t, "not.creds", "hello")
	ca := newTestCA(t, dir, "x")
	for _, tc := range []struct {
		name string
		cfg  NATSClientConfig
		url  string
		want []string
	}{
		{"two ways", NATSClientConfig{CredsFile: notCreds, TokenFile: empty}, "", []string{"--nats-creds, --nats-token-file: give one way to authenticate"}},
		{"URL and flag", NATSClientConfig{TokenFile: secretFile(t, "t", "tok")}, "nats://u:hunter2@h:4222", []string{"--nats-url nats://u:xxxxx@h:4222 holds a credential"}},
		{"bad creds", NATSClientConfig{CredsFile: notCreds}, "", []string{"--nats-creds: " + notCreds + ": no user JWT"}},
		{"missing seed", NATSClientConfig{NkeySeedFile: filepath.Join(dir, "absent.nk")}, "", []string{"--nats-nkey: "}},
		{"empty token", NATSClientConfig{TokenFile: empty}, "", []string{"--nats-token-file: " + empty + ": the first line is empty"}},
		{"user without password", NATSClientConfig{User: "u"}, "", []string{"--nats-user: needs --nats-password-file"}},
		{"password without user", NATSClientConfig{PasswordFile: empty}, "", []string{"--nats-password-file: needs --nats-user"}},
		{"bad CA", NATSClientConfig{TLSCA: notCreds}, "", []string{"--nats-tls-ca: "}},
		{"cert without key", NATSClientConfig{TLSCert: ca.file}, "", []string{"--nats-tls-cert and --nats-tls-key: give both"}},
		{"bad key pair", NATSClientConfig{TLSCert: ca.file, TLSKey: notCreds}, "", []string{"--nats-tls-cert/--nats-tls-key: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Options(tc.url)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
	// Every problem at once.
	_, err := NATSClientConfig{User: "u", TLSCert: ca.file}.Options("")
	if err == nil || !strings.Contains(err.Error(), "--nats-user") || !strings.Contains(err.Error(), "--nats-tls-cert and --nats-tls-key") {
		t.Fatalf("want both problems: %v", err)
	}
}
