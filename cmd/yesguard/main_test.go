package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mapEnv is an environment for lookupEnv.
func mapEnv(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestParseServeFlags(t *testing.T) {
	defaults := server.DefaultConfig()
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c server.Config)
		wantErr string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c server.Config) {
				if !reflect.DeepEqual(c, defaults) {
					t.Errorf("got %+v\nwant %+v", c, defaults)
				}
			},
		},
		{
			name: "every flag",
			args: []string{
				"--grpc-addr=0.0.0.0:6000", "--nats-url", "nats://n:4222", "--nats-listen=127.0.0.1:0",
				"--http-addr=:9100", "--policy=/etc/yesguard/policy.yaml", "--locales-dir=/etc/yesguard/locales",
				"--subject-prefix=acme.calls", "--decision-log=/var/log/yesguard.jsonl", "--log-level=debug",
				"--shutdown-timeout=3s", "--insecure-no-auth",
			},
			check: func(t *testing.T, c server.Config) {
				want := defaults
				want.InsecureNoAuth = true
				want.GRPCAddr, want.NATSURL, want.NATSListen = "0.0.0.0:6000", "nats://n:4222", "127.0.0.1:0"
				want.HTTPAddr, want.PolicyPath, want.LocalesDir = ":9100", "/etc/yesguard/policy.yaml", "/etc/yesguard/locales"
				want.SubjectPrefix, want.DecisionLog, want.LogLevel = "acme.calls", "/var/log/yesguard.jsonl", "debug"
				want.ShutdownTimeout = 3 * time.Second
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got %+v\nwant %+v", c, want)
				}
			},
		},
		{
			name: "environment",
			env: map[string]string{
				"YESGUARD_GRPC_ADDR": "127.0.0.1:7000", "YESGUARD_NATS_URL": "nats://e:4222",
				"YESGUARD_POLICY": "/p.yaml", "YESGUARD_SHUTDOWN_TIMEOUT": "1m",
				"YESGUARD_LOG_LEVEL": "warn", "UNRELATED": "x",
			},
			check: func(t *testing.T, c server.Config) {
				if c.GRPCAddr != "127.0.0.1:7000" || c.NATSURL != "nats://e:4222" || c.PolicyPath != "/p.yaml" ||
					c.ShutdownTimeout != time.Minute || c.LogLevel != "warn" {
					t.Errorf("environment not applied: %+v", c)
				}
			},
		},
		{
			name: "flag wins over environment",
			args: []string{"--grpc-addr=127.0.0.1:8000", "--shutdown-timeout=2s"},
			env:  map[string]string{"YESGUARD_GRPC_ADDR": "127.0.0.1:7000", "YESGUARD_SHUTDOWN_TIMEOUT": "bogus"},
			check: func(t *testing.T, c server.Config) {
				if c.GRPCAddr != "127.0.0.1:8000" || c.ShutdownTimeout != 2*time.Second {
					t.Errorf("flags lost: %+v", c)
				}
			},
		},
		{
			name: "empty variable disables http",
			env:  map[string]string{"YESGUARD_HTTP_ADDR": ""},
			check: func(t *testing.T, c server.Config) {
				if c.HTTPAddr != "" {
					t.Errorf("HTTPAddr = %q, want empty", c.HTTPAddr)
				}
			},
		},
		{
			name: "empty flag disables http",
			args: []string{"--http-addr="},
			check: func(t *testing.T, c server.Config) {
				if c.HTTPAddr != "" {
					t.Errorf("HTTPAddr = %q, want empty", c.HTTPAddr)
				}
			},
		},
		{
			name: "approval keys",
			args: []string{"--approval-key-file=/k/a.pem", "--approval-key-file", "/k/b.pem,/k/c.pem", "--approval-key-dir=/keys", "--approval-issuer=acme-guard"},
			check: func(t *testing.T, c server.Config) {
				if !reflect.DeepEqual(c.ApprovalKeyFiles, []string{"/k/a.pem", "/k/b.pem", "/k/c.pem"}) || c.ApprovalKeyDir != "/keys" || c.ApprovalIssuer != "acme-guard" {
					t.Errorf("approval flags: %q %q %q", c.ApprovalKeyFiles, c.ApprovalKeyDir, c.ApprovalIssuer)
				}
			},
		},
		{
			name: "approval keys from the environment",
			env:  map[string]string{"YESGUARD_APPROVAL_KEY_FILE": "/k/a.pem, /k/b.pem", "YESGUARD_APPROVAL_KEY_DIR": "/run/secrets/yesguard"},
			check: func(t *testing.T, c server.Config) {
				if !reflect.DeepEqual(c.ApprovalKeyFiles, []string{"/k/a.pem", "/k/b.pem"}) || c.ApprovalKeyDir != "/run/secrets/yesguard" || c.ApprovalIssuer != "yesguard" {
					t.Errorf("approval variables: %q %q %q", c.ApprovalKeyFiles, c.ApprovalKeyDir, c.ApprovalIssuer)
				}
			},
		},
		{name: "bad variable", env: map[string]string{"YESGUARD_SHUTDOWN_TIMEOUT": "soon"}, wantErr: "YESGUARD_SHUTDOWN_TIMEOUT"},
		{name: "bad flag value", args: []string{"--shutdown-timeout=soon"}, wantErr: "shutdown-timeout"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "not defined"},
		{name: "positional argument", args: []string{"extra"}, wantErr: "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg, err := parseServeFlags(tc.args, mapEnv(tc.env), &out)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("no error; config %+v", cfg)
				}
				if !strings.Contains(err.Error(), tc.wantErr) && !strings.Contains(out.String(), tc.wantErr) {
					t.Errorf("error %q (output %q) lacks %q", err, out.String(), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServeFlags: %v", err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestParseServeFlagsReportsEveryField(t *testing.T) {
	_, err := parseServeFlags([]string{"--subject-prefix=a.*", "--log-level=loud"},
		mapEnv(map[string]string{"YESGUARD_GRPC_ADDR": "nope"}), io.Discard)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"grpc_addr", "subject_prefix", "log_level"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
}

func runCapture(ctx context.Context, args []string, vars map[string]string) (int, string, string) {
	var stdout, stderr servertest.Buffer
	code := runEnv(ctx, args, &env{stdout: &stdout, stderr: &stderr, lookupEnv: mapEnv(vars)})
	return code, stdout.String(), stderr.String()
}

func TestRunExitCodes(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"unknown command", []string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"help", []string{"help"}, exitOK, "healthcheck", ""},
		{"version", []string{"version"}, exitOK, "yesguard ", ""},
		{"version extra", []string{"version", "x"}, exitUsage, "", "unexpected"},
		{"serve help", []string{"-h"}, exitOK, "", "Usage: yesguard [serve]"},
		{"serve bad flag", []string{"--grpc-adr=x"}, exitUsage, "", "grpc-adr"},
		{"serve bad config", []string{"serve", "--subject-prefix=a.>", "--nats-listen=127.0.0.1:0", "--grpc-addr=127.0.0.1:0"}, exitUsage, "", "subject_prefix"},
		{"serve missing policy", []string{"--policy", missing, "--nats-listen=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--http-addr="}, exitUsage, "", "policy: "},
		{"healthcheck bad flag", []string{"healthcheck", "--nope"}, exitUsage, "", "nope"},
		{"healthcheck nobody listening", []string{"healthcheck", "--grpc-addr=127.0.0.1:1", "--timeout=1s"}, exitError, "", "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCapture(context.Background(), tc.args, nil)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.wantStdout) {
				t.Errorf("stdout lacks %q: %s", tc.wantStdout, stdout)
			}
			if !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("stderr lacks %q: %s", tc.wantStderr, stderr)
			}
		})
	}
}

func TestHealthcheck(t *testing.T) {
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", DataDir: t.TempDir()}
	srv, err := server.New(cfg, server.WithLogger(zaptest.NewLogger(t)), server.WithRegistry(prometheus.NewRegistry()),
		server.WithDecisionSink(servertest.Discard{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := srv.GRPCAddr()
	_, port, _ := strings.Cut(addr, ":")

	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag", []string{"healthcheck", "--grpc-addr", addr}, nil},
		{"environment", []string{"healthcheck"}, map[string]string{"YESGUARD_GRPC_ADDR": addr}},
		{"unspecified host", []string{"healthcheck", "--grpc-addr", "0.0.0.0:" + port}, nil},
		{"guard service", []string{"healthcheck", "--grpc-addr", addr, "--service", server.GuardService}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCapture(context.Background(), tc.args, tc.env)
			if code != exitOK || strings.TrimSpace(stdout) != "SERVING" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0 and SERVING", code, stdout, stderr)
			}
		})
	}

	code, stdout, _ := runCapture(context.Background(), []string{"healthcheck", "--grpc-addr", addr, "--service", "nope"}, nil)
	if code != exitError {
		t.Errorf("unknown service: exit %d (%s), want 1", code, stdout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCapture(context.Background(), []string{"healthcheck", "--grpc-addr", addr}, nil); code != exitError {
		t.Errorf("after Stop: exit %d, want 1", code)
	}
}

// TestServe runs the serve command until its context is cancelled, as a
// signal would.
func TestServe(t *testing.T) {
	decisions := filepath.Join(t.TempDir(), "decisions.log")
	args := []string{"--grpc-addr=127.0.0.1:0", "--http-addr=127.0.0.1:0", "--decision-log=" + decisions, "--data-dir=" + t.TempDir()}
	vars := map[string]string{"YESGUARD_NATS_LISTEN": "127.0.0.1:0"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr servertest.Buffer
	done := make(chan int)
	go func() {
		done <- runEnv(ctx, args, &env{stdout: io.Discard, stderr: &stderr, lookupEnv: mapEnv(vars)})
	}()

	var listening struct{ GRPC, NATS, HTTP string }
	deadline := time.Now().Add(10 * time.Second)
	for listening.GRPC == "" {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d early:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(line, `"msg":"yesguard listening"`) {
				if err := json.Unmarshal([]byte(line), &listening); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if !strings.HasPrefix(listening.NATS, "nats://127.0.0.1:") || listening.HTTP == "" {
		t.Errorf("listening line: %+v", listening)
	}
	if code, out, errOut := runCapture(context.Background(), []string{"healthcheck", "--grpc-addr", listening.GRPC}, nil); code != exitOK {
		t.Errorf("healthcheck: exit %d %s %s", code, out, errOut)
	}

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve exited %d, want 0:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := os.Stat(decisions); err != nil {
		t.Errorf("decision log: %v", err)
	}
}
