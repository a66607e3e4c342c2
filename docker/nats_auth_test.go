package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
)

// composeSecrets are the files secrets.sh makes, which the compose file
// mounts from ./secrets/.
var composeSecrets = []string{"pipeline.pw", "guard.pw", "nats-passwords.conf", "pipeline.tok", "auditor.tok", "tokens.yaml", "approval-key.pem"}

// F0 of the security red team: the compose stack's NATS had no users, so
// any client read every call and freed reservations. Its nats.conf, with
// the passwords secrets.sh makes, on a real nats-server: a client without
// a password is refused, the pipeline may publish transcripts and not read
// them, and the guard reads them.
func TestComposeNATSAuth(t *testing.T) {
	conf, err := os.ReadFile("nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), auth.ExternalNATSConfig(auth.Subjects{})) {
		t.Fatal("nats.conf lacks docs/security.md's accounts, as auth.ExternalNATSConfig writes them")
	}
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets")
	if out, err := exec.Command("bash", "secrets.sh", secrets).CombinedOutput(); err != nil {
		t.Fatalf("secrets.sh: %v\n%s", err, out)
	}
	for _, name := range composeSecrets {
		if _, err := os.Stat(filepath.Join(secrets, name)); err != nil {
			t.Fatalf("secrets.sh did not make %s: %v", name, err)
		}
	}
	if fi, err := os.Stat(secrets); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the secrets directory: %v %v, want mode 0700", fi, err)
	}
	// The gRPC tokens (security red team F0b: the guard refuses to listen
	// beyond loopback without them): the file the compose file mounts as
	// --grpc-tokens holds the tokens' hashes, with their roles.
	tokens, err := auth.LoadTokens(filepath.Join(secrets, "tokens.yaml"))
	if err != nil {
		t.Fatalf("secrets.sh's tokens.yaml: %v", err)
	}
	// The approval signing key, made with bash alone, is one the guard
	// loads (--approval-key-file), so it signs with it and warns of no key
	// of its own.
	if _, err := approval.LoadKeyFile(filepath.Join(secrets, "approval-key.pem")); err != nil {
		t.Errorf("secrets.sh's approval-key.pem: %v", err)
	}
	for file, role := range map[string]auth.Role{"pipeline.tok": auth.RolePipeline, "auditor.tok": auth.RoleAuditor} {
		raw, err := os.ReadFile(filepath.Join(secrets, file))
		if err != nil {
			t.Fatal(err)
		}
		tok, ok := tokens.Lookup(strings.TrimSpace(string(raw)))
		if !ok || !tok.Has(role) || len(tok.Roles) != 1 {
			t.Errorf("%s: in tokens.yaml %v, roles %v, want only %s", file, ok, tok.Roles, role)
		}
	}
	if strings.Contains(mustRead(t, filepath.Join(secrets, "tokens.yaml")), strings.TrimSpace(mustRead(t, filepath.Join(secrets, "pipeline.tok")))) {
		t.Error("tokens.yaml holds a token, not only its hash")
	}
	// The container's layout: nats.conf and passwords.conf side by side.
	etc := filepath.Join(dir, "etc")
	if err := os.Mkdir(etc, 0o700); err != nil {
		t.Fatal(err)
	}
	pwconf, err := os.ReadFile(filepath.Join(secrets, "nats-passwords.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"nats.conf": conf, "passwords.conf": pwconf} {
		if err := os.WriteFile(filepath.Join(etc, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts, err := natsserver.ProcessConfigFile(filepath.Join(etc, "nats.conf"))
	if err != nil {
		t.Fatalf("nats.conf does not parse: %v", err)
	}
	opts.Host, opts.Port, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", natsserver.RANDOM_PORT, t.TempDir(), true, true
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := ns.ClientURL()

	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without a password connected")
	}
	password := func(name string) string {
		b, err := os.ReadFile(filepath.Join(secrets, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	connect := func(user, pw string, opts ...nats.Option) *nats.Conn {
		nc, err := nats.Connect(url, append(opts, nats.UserInfo(user, pw), nats.MaxReconnects(0))...)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	guard := connect("yesguard", password("guard.pw"), nats.CustomInboxPrefix(auth.DefaultGuardInbox))
	violations := make(chan error, 4)
	pipe := connect(auth.DefaultPipelineUser, password("pipeline.pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	sub, err := guard.SubscribeSync(auth.DefaultTranscriptPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pipe.Publish(auth.DefaultTranscriptPrefix+".c1", []byte(`{"text":"yes"}`)); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(10 * time.Second); err != nil || string(msg.Data) != `{"text":"yes"}` {
		t.Fatalf("the guard did not get the pipeline's transcript: %v", err)
	}
	if _, err := pipe.SubscribeSync(">"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !strings.Contains(err.Error(), "Permissions Violation") {
			t.Fatalf("the pipeline's SUB >: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline subscribed to everything")
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
