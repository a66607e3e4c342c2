package server

import (
	"context"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// F0 of the security red team: the compose file's NATS had no users and
// the guard connected without a word. Against a real external server that
// asks no credentials, serve logs an error naming the fix; against one
// that does, it logs none.
func TestServeWarnsOfAnOpenNATS(t *testing.T) {
	for name, tc := range map[string]struct {
		token string
		warn  bool
	}{"open": {"", true}, "token": {"a-long-nats-token-0123456789", false}} {
		t.Run(name, func(t *testing.T) {
			ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoLog: true, NoSigs: true,
				JetStream: true, StoreDir: t.TempDir(), Authorization: tc.token})
			if err != nil {
				t.Fatal(err)
			}
			ns.Start()
			t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
			if !ns.ReadyForConnections(10 * time.Second) {
				t.Fatal("nats-server not ready")
			}
			url := ns.ClientURL()
			if tc.token != "" {
				url = "nats://" + tc.token + "@" + strings.TrimPrefix(url, "nats://")
			}
			core, logs := observer.New(zapcore.InfoLevel)
			srv, err := New(Config{GRPCAddr: "127.0.0.1:0", NATSURL: url, DataDir: t.TempDir(), ShutdownTimeout: 10 * time.Second},
				WithLogger(zap.New(core)), WithDecisionSink(nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				_ = srv.Stop(ctx)
			})
			// The connect handler runs before the connection is logged as
			// connected; wait for that line, then look for the warning.
			eventuallyFor(t, "NATS connected logged", func() bool { return logs.FilterMessage("NATS connected").Len() > 0 })
			warned := logs.FilterMessageSnippet("lets any client in without credentials")
			if got := warned.Len() > 0; got != tc.warn {
				t.Fatalf("warned %v, want %v: %v", got, tc.warn, logs.All())
			}
			if tc.warn && warned.All()[0].Level != zapcore.ErrorLevel {
				t.Errorf("the warning is at level %v, want error", warned.All()[0].Level)
			}
		})
	}
}

// F9 of the security red team: the embedded server has no TLS, and the
// image listens on every interface, with no word about it. Beyond the
// loopback, start-up warns; on the loopback it does not.
func TestEmbeddedNATSWarnsOfPlaintextBeyondLoopback(t *testing.T) {
	for listen, warn := range map[string]bool{"0.0.0.0:0": true, "127.0.0.1:0": false} {
		t.Run(listen, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			srv, err := New(Config{GRPCAddr: "127.0.0.1:0", NATSListen: listen, NATSPipelinePassword: "a-long-random-pipeline-password",
				DataDir: t.TempDir(), ShutdownTimeout: 10 * time.Second}, WithLogger(zap.New(core)), WithDecisionSink(nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				_ = srv.Stop(ctx)
			})
			// Start returns after the embedded server is up and checked.
			if got := logs.FilterMessageSnippet("without TLS").Len() > 0; got != warn {
				t.Fatalf("warned %v, want %v", got, warn)
			}
		})
	}
}
