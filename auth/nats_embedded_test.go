package auth

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// waitLong bounds every wait for a state in these tests: generous, since
// the machine is shared.
const waitLong = 20 * time.Second

const testPassword = "correct-horse-battery-staple-42"

// startEmbedded starts a real nats-server (JetStream on a temp dir) with
// e's users, on a free loopback port.
func startEmbedded(t *testing.T, e *EmbeddedNATS) *natsserver.Server {
	t.Helper()
	opts := &natsserver.Options{
		ServerName: "yesguard-test",
		Host:       "127.0.0.1",
		Port:       natsserver.RANDOM_PORT,
		NoSigs:     true,
		NoLog:      true,
		JetStream:  true,
		StoreDir:   t.TempDir(),
	}
	if err := e.Apply(opts); err != nil {
		t.Fatal(err)
	}
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

func newEmbedded(t *testing.T, src PipelineSource) *EmbeddedNATS {
	t.Helper()
	e, err := NewEmbeddedNATS(EmbeddedNATSConfig{Listen: "127.0.0.1:0", Pipeline: src})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// conn is a client connection whose asynchronous errors (permission
// violations) a test can wait for.
type conn struct {
	*nats.Conn
	errs chan error
}

func connect(t *testing.T, url string, opts ...nats.Option) (*conn, error) {
	t.Helper()
	c := &conn{errs: make(chan error, 64)}
	opts = append(opts, nats.MaxReconnects(0), nats.Timeout(waitLong),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case c.errs <- err:
			default:
			}
		}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	c.Conn = nc
	return c, nil
}

func mustConnect(t *testing.T, url string, opts ...nats.Option) *conn {
	t.Helper()
	c, err := connect(t, url, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return c
}

// guardConn is the guard's own connection: in-process, with its options.
func guardConn(t *testing.T, ns *natsserver.Server, e *EmbeddedNATS) *conn {
	t.Helper()
	return mustConnect(t, "", append(e.GuardOptions(), nats.InProcessServer(ns))...)
}

// wantViolation waits for the server to refuse subject on c.
func (c *conn) wantViolation(t *testing.T, what, subject string) {
	t.Helper()
	timeout := time.After(waitLong)
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), what) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-timeout:
			t.Fatalf("no permission violation for %s %q", what, subject)
		}
	}
}

// delivered publishes from pub on subject and waits for sub to get it.
func delivered(t *testing.T, pub *conn, sub *nats.Subscription, subject, data string) {
	t.Helper()
	if err := pub.Publish(subject, []byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := sub.NextMsg(waitLong)
		if err != nil {
			t.Fatalf("%s never reached the guard: %v", subject, err)
		}
		if msg.Subject == subject && string(msg.Data) == data {
			return
		}
	}
}

const transcript = DefaultTranscriptPrefix + ".call-1"

func TestEmbeddedNATSPipelinePassword(t *testing.T) {
	e := newEmbedded(t, PipelineSource{Password: testPassword})
	ns := startEmbedded(t, e)
	url := ns.ClientURL()

	// No credentials, or wrong ones: no connection, so no speech.
	for name, opts := range map[string][]nats.Option{
		"anonymous":                 nil,
		"wrong password":            {nats.UserInfo(DefaultPipelineUser, "not-the-password-at-all")},
		"the guard's nkey over TCP": {nats.Nkey(e.guardPub, e.guard.Sign)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := connect(t, url, opts...)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("connect: %v, want an authorization violation", err)
			}
		})
	}

	guard := guardConn(t, ns, e)
	pipe := mustConnect(t, url, nats.UserInfo(DefaultPipelineUser, testPassword))
	assertTranscriptsPrivate(t, guard, pipe)
}

// assertTranscriptsPrivate checks, on a real server, that the pipeline's
// transcripts reach the guard, that the pipeline can read no transcript,
// decision or reply of the guard's, and publish nothing but transcripts,
// and that the guard cannot publish transcripts.
func assertTranscriptsPrivate(t *testing.T, guard, pipe *conn) {
	t.Helper()
	guardSub, err := guard.SubscribeSync(DefaultTranscriptPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Flush(); err != nil {
		t.Fatal(err)
	}
	delivered(t, pipe, guardSub, transcript, `{"text":"yes"}`)

	// The pipeline may read neither transcripts, nor everything, nor the
	// guard's replies, nor decisions.
	var refused []*nats.Subscription
	for _, subject := range []string{DefaultTranscriptPrefix + ".>", transcript, ">", DefaultGuardInbox + ".>", DefaultDecisionsPrefix + ".call-1"} {
		sub, err := pipe.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		pipe.wantViolation(t, "Subscription", subject)
		refused = append(refused, sub)
	}
	// Nothing reaches the refused subscriptions: the pipeline's own
	// publish is delivered to the guard, and a flush after it would have
	// carried any message for the pipeline before its PONG.
	delivered(t, pipe, guardSub, transcript, `{"text":"card ending 4242"}`)
	if err := pipe.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, sub := range refused {
		if n, _, _ := sub.Pending(); n != 0 {
			t.Fatalf("the pipeline received %d messages on %s", n, sub.Subject)
		}
	}

	// The pipeline may publish only transcripts; the guard may publish
	// none.
	for _, subject := range []string{"other.subject", "$JS.API.STREAM.LIST", DefaultDecisionsPrefix + ".call-1", DefaultGuardInbox + ".x"} {
		if err := pipe.Publish(subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
		pipe.wantViolation(t, "Publish", subject)
	}
	if err := guard.Publish(transcript, []byte(`{"text":"yes"}`)); err != nil {
		t.Fatal(err)
	}
	guard.wantViolation(t, "Publish", transcript)
}

func TestEmbeddedNATSPipelineNkey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "pipeline.nk")
	writeFile(t, seedFile, seed)

	e := newEmbedded(t, PipelineSource{Nkey: pub})
	if e.PipelineUser() != pub {
		t.Fatalf("PipelineUser %q, want the public key", e.PipelineUser())
	}
	ns := startEmbedded(t, e)
	guard := guardConn(t, ns, e)
	guardSub, err := guard.SubscribeSync(DefaultTranscriptPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, ns.ClientURL()); err == nil {
		t.Fatal("anonymous connection accepted on an nkey server")
	}
	// The pipeline holds the seed, and connects as NATSClientConfig
	// (the CLI's --nats-nkey) builds it.
	opts, err := NATSClientConfig{NkeySeedFile: seedFile}.Options(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	pipe := mustConnect(t, ns.ClientURL(), opts...)
	delivered(t, pipe, guardSub, transcript, `{"text":"go ahead"}`)
	if _, err := pipe.SubscribeSync(">"); err != nil {
		t.Fatal(err)
	}
	pipe.wantViolation(t, "Subscription", ">")
}

// On loopback with no credential, a client without credentials is the
// pipeline: it may still publish transcripts (the two-command start), but
// no longer read them.
func TestEmbeddedNATSLoopbackWithoutCredential(t *testing.T) {
	e := newEmbedded(t, PipelineSource{})
	if e.HasPipelineCredential() || e.PipelineUser() != anonymousUser {
		t.Fatal("no credential given, yet one is required")
	}
	ns := startEmbedded(t, e)
	guard := guardConn(t, ns, e)
	guardSub, err := guard.SubscribeSync(DefaultTranscriptPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Flush(); err != nil {
		t.Fatal(err)
	}
	anon := mustConnect(t, ns.ClientURL())
	delivered(t, anon, guardSub, transcript, `{"text":"yes"}`)
	for _, subject := range []string{">", DefaultTranscriptPrefix + ".>"} {
		if _, err := anon.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		anon.wantViolation(t, "Subscription", subject)
	}
}

func TestEmbeddedNATSJetStream(t *testing.T) {
	e := newEmbedded(t, PipelineSource{Password: testPassword})
	ns := startEmbedded(t, e)
	assertJetStream(t, guardConn(t, ns, e), mustConnect(t, ns.ClientURL(), nats.UserInfo(DefaultPipelineUser, testPassword)))
}

// assertJetStream checks, on a real server, that the guard can do what its
// state needs (streams, an ordered consumer, KV with TTL and watch,
// decision records) and that the pipeline's JetStream publish is
// acknowledged while the rest of the JetStream API is closed to it.
func assertJetStream(t *testing.T, guard, pipe *conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	gjs, err := jetstream.New(guard.Conn)
	if err != nil {
		t.Fatal(err)
	}
	// What the guard's state needs: a transcript stream with a duplicate
	// window, a decisions stream, a KV bucket with per-key TTL.
	transcripts, err := gjs.CreateStream(ctx, jetstream.StreamConfig{
		Name: "YESGUARD_TRANSCRIPT", Subjects: []string{DefaultTranscriptPrefix + ".>"}, Duplicates: time.Minute,
	})
	if err != nil {
		t.Fatalf("guard: create transcript stream: %v", err)
	}
	if _, err := gjs.CreateStream(ctx, jetstream.StreamConfig{Name: "YESGUARD_DECISIONS", Subjects: []string{DefaultDecisionsPrefix + ".>"}}); err != nil {
		t.Fatalf("guard: create decisions stream: %v", err)
	}
	kv, err := gjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "yesguard_book", LimitMarkerTTL: time.Minute})
	if err != nil {
		t.Fatalf("guard: create KV bucket: %v", err)
	}

	// The pipeline's JetStream publish is stored and acknowledged: the ack
	// comes back on its own inbox.
	pjs, err := jetstream.New(pipe.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := pjs.Publish(ctx, transcript, []byte(`{"text":"yes please"}`), jetstream.WithMsgID("call-1/stt/1/1"))
	if err != nil {
		t.Fatalf("pipeline: JetStream publish: %v", err)
	}
	if ack.Stream != "YESGUARD_TRANSCRIPT" || ack.Sequence != 1 {
		t.Fatalf("ack %+v", ack)
	}

	// The guard reads it with an ordered consumer (delivered to its inbox).
	cons, err := transcripts.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("guard: ordered consumer: %v", err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(waitLong))
	if err != nil || string(msg.Data()) != `{"text":"yes please"}` {
		t.Fatalf("guard: read the transcript stream: %v", err)
	}

	// The guard claims, reads, watches and updates KV keys, and writes
	// decision records.
	w, err := kv.Watch(ctx, "reservation.>")
	if err != nil {
		t.Fatalf("guard: KV watch: %v", err)
	}
	defer func() { _ = w.Stop() }()
	if _, err := kv.Create(ctx, "reservation.call-1", []byte("allow"), jetstream.KeyTTL(time.Minute)); err != nil {
		t.Fatalf("guard: KV create with TTL: %v", err)
	}
	if _, err := kv.Create(ctx, "reservation.call-1", []byte("again")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("guard: second KV create: %v, want ErrKeyExists", err)
	}
	for {
		select {
		case entry := <-w.Updates():
			if entry == nil {
				continue // the end of the initial values
			}
			if entry.Key() != "reservation.call-1" {
				t.Fatalf("watch saw %q", entry.Key())
			}
		case <-ctx.Done():
			t.Fatal("guard: KV watch saw nothing")
		}
		break
	}
	if _, err := gjs.Publish(ctx, DefaultDecisionsPrefix+".call-1", []byte(`{"decision_id":"d1"}`)); err != nil {
		t.Fatalf("guard: publish a decision record: %v", err)
	}

	// The pipeline can use none of the JetStream API: it cannot read the
	// stream it writes, nor the decisions, nor the KV bucket.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := pjs.Stream(short, "YESGUARD_TRANSCRIPT"); err == nil {
		t.Fatal("pipeline: read the transcript stream's info")
	}
	pipe.wantViolation(t, "Publish", "$JS.API.STREAM.INFO.YESGUARD_TRANSCRIPT")
}

func TestEmbeddedNATSConfigErrors(t *testing.T) {
	pub := func() string {
		kp, _ := nkeys.CreateUser()
		p, _ := kp.PublicKey()
		return p
	}()
	seed := func() string {
		kp, _ := nkeys.CreateUser()
		s, _ := kp.Seed()
		return string(s)
	}()
	pwFile := filepath.Join(t.TempDir(), "pw")
	writeFile(t, pwFile, []byte(testPassword+"\n"))
	for _, tc := range []struct {
		name string
		cfg  EmbeddedNATSConfig
		want string // "" for no error
	}{
		{"loopback, no credential", EmbeddedNATSConfig{Listen: "127.0.0.1:4222"}, ""},
		{"localhost, no credential", EmbeddedNATSConfig{Listen: "localhost:4222"}, ""},
		{"every interface, no credential", EmbeddedNATSConfig{Listen: "0.0.0.0:4222"}, "--nats-listen 0.0.0.0:4222 is not a loopback address"},
		{"empty host, no credential", EmbeddedNATSConfig{Listen: ":4222"}, "is not a loopback address"},
		{"a LAN address, no credential", EmbeddedNATSConfig{Listen: "192.0.2.7:4222"}, PipelinePasswordEnv},
		{"every interface, password file", EmbeddedNATSConfig{Listen: "0.0.0.0:4222", Pipeline: PipelineSource{PasswordFile: pwFile}}, ""},
		{"every interface, nkey", EmbeddedNATSConfig{Listen: "0.0.0.0:4222", Pipeline: PipelineSource{Nkey: pub}}, ""},
		{"bcrypt hash", EmbeddedNATSConfig{Listen: "0.0.0.0:4222", Pipeline: PipelineSource{Password: "$2a$11$abcdefghijklmnopqrstuv"}}, ""},
		{"short password", EmbeddedNATSConfig{Pipeline: PipelineSource{Password: "hunter2"}}, PipelinePasswordEnv + ": the password is shorter than 16 bytes"},
		{"missing password file", EmbeddedNATSConfig{Pipeline: PipelineSource{PasswordFile: pwFile + ".absent"}}, "--nats-pipeline-password-file"},
		{"two credentials", EmbeddedNATSConfig{Pipeline: PipelineSource{Password: testPassword, Nkey: pub}}, "give one of"},
		{"a seed for the public key", EmbeddedNATSConfig{Pipeline: PipelineSource{Nkey: seed}}, "this is a seed"},
		{"not an nkey", EmbeddedNATSConfig{Pipeline: PipelineSource{Nkey: "UABC"}}, "not a public user nkey"},
		{"overlapping inboxes", EmbeddedNATSConfig{Subjects: Subjects{GuardInbox: "_INBOX.guard"}}, `guard inbox "_INBOX.guard" and pipeline inbox "_INBOX" overlap`},
		{"wildcard prefix", EmbeddedNATSConfig{Subjects: Subjects{TranscriptPrefix: "a.*"}}, `transcript prefix "a.*"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.Listen == "" {
				tc.cfg.Listen = "127.0.0.1:4222"
			}
			_, err := NewEmbeddedNATS(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), testPassword) || strings.Contains(err.Error(), seed)):
				t.Fatalf("the error quotes a secret: %v", err)
			}
		})
	}
}

// F1 of the security red team: NATS checks no permission on a message's
// reply subject, and JetStream publishes its PubAck there from inside the
// stream's account. The pipeline's acks must reach none of the guard's
// state, by construction: the guard's streams and bucket live in an
// account the pipeline's messages reach only as a service import, whose
// replies the server maps to a subject of its own making.
func TestEmbeddedNATSAckReplyReachesNoGuardState(t *testing.T) {
	for name, src := range map[string]PipelineSource{
		"password":          {Password: testPassword},
		"loopback, no auth": {},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEmbedded(t, src)
			ns := startEmbedded(t, e)
			var opts []nats.Option
			if src.Password != "" {
				opts = append(opts, nats.UserInfo(DefaultPipelineUser, testPassword))
			}
			assertAcksReachNoGuardState(t, guardConn(t, ns, e), mustConnect(t, ns.ClientURL(), opts...))
		})
	}
}

// assertAcksReachNoGuardState makes the guard's state (a transcript stream,
// a decision record, a KV key), then has the pipeline publish transcripts
// whose reply subjects name that state, and checks that nothing changed.
func assertAcksReachNoGuardState(t *testing.T, guard, pipe *conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	gjs, err := jetstream.New(guard.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gjs.CreateStream(ctx, jetstream.StreamConfig{Name: "YESGUARD_TRANSCRIPT", Subjects: []string{DefaultTranscriptPrefix + ".>"}}); err != nil {
		t.Fatalf("guard: create transcript stream: %v", err)
	}
	decisions, err := gjs.CreateStream(ctx, jetstream.StreamConfig{Name: "YESGUARD_DECISIONS", Subjects: []string{DefaultDecisionsPrefix + ".>"}})
	if err != nil {
		t.Fatalf("guard: create decisions stream: %v", err)
	}
	kv, err := gjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "yesguard_state"})
	if err != nil {
		t.Fatalf("guard: create KV bucket: %v", err)
	}
	record := DefaultDecisionsPrefix + ".call-1"
	if _, err := gjs.Publish(ctx, record, []byte(`{"decision_id":"d1"}`)); err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "r.held", []byte("held"))
	if err != nil {
		t.Fatal(err)
	}

	// The attack: transcripts whose acks would be stored as a decision
	// record, a KV value (an existing key and a new one), or sent as a
	// JetStream API request.
	targets := []string{record, "$KV.yesguard_state.r.held", "$KV.yesguard_state.r.new",
		"$JS.API.STREAM.PURGE.YESGUARD_DECISIONS", "$JS.API.STREAM.DELETE.YESGUARD_DECISIONS"}
	for _, reply := range targets {
		if err := pipe.PublishMsg(&nats.Msg{Subject: transcript, Reply: reply, Data: []byte(`{"text":"x"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// Barriers. The stream acks in order, so once the pipeline's own acked
	// publish is acknowledged every ack above has been sent; the guard's
	// acked writes to the decision stream and the bucket then queue behind
	// anything those acks put there.
	pjs, err := jetstream.New(pipe.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pjs.Publish(ctx, transcript, []byte(`{"text":"barrier"}`)); err != nil {
		t.Fatalf("pipeline: acked publish: %v", err)
	}
	if _, err := gjs.Publish(ctx, record, []byte(`{"decision_id":"d2"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "barrier", []byte("b")); err != nil {
		t.Fatal(err)
	}

	info, err := decisions.Info(ctx, jetstream.WithSubjectFilter(record))
	if err != nil {
		t.Fatalf("the decision stream: %v", err)
	}
	if got := info.State.Subjects[record]; got != 2 {
		t.Errorf("%s holds %d messages, want the guard's 2: the pipeline's acks were stored there", record, got)
	}
	if e, err := kv.Get(ctx, "r.held"); err != nil || string(e.Value()) != "held" || e.Revision() != rev {
		t.Errorf("KV r.held changed: %v %v", e, err)
	}
	if e, err := kv.Get(ctx, "r.new"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("KV r.new written by the pipeline's ack: %v %v", e, err)
	}
}
