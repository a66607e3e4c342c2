package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
)

// TestHealthcheckAgreesWithReadiness: with its transcript feed gone (an
// external NATS that does not answer), the guard's /readyz says 503, and
// so does healthcheck by default (exit 1, NOT_SERVING); --service ""
// still sees the process serving.
func TestHealthcheckAgreesWithReadiness(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + ln.Addr().String()
	_ = ln.Close()
	srv := servertest.Start(t, servertest.Options{Config: func(c *server.Config) { c.NATSURL = dead }})

	code, stdout, _ := runCapture(context.Background(), []string{"healthcheck", "--grpc-addr", srv.GRPCAddr()}, nil)
	if code != exitError || strings.TrimSpace(stdout) != "NOT_SERVING" {
		t.Errorf("healthcheck with the feed down: exit %d, %q; want 1 and NOT_SERVING", code, stdout)
	}
	code, stdout, _ = runCapture(context.Background(), []string{"healthcheck", "--grpc-addr", srv.GRPCAddr(), "--service", ""}, nil)
	if code != exitOK || strings.TrimSpace(stdout) != "SERVING" {
		t.Errorf("healthcheck --service \"\": exit %d, %q; want the process SERVING", code, stdout)
	}
}

// TestServeSaysWhereItsNATSURLCameFrom: YESGUARD_NATS_URL exported for the
// client commands turns serve's embedded NATS off; serve says so, names
// the variable and what to unset.
func TestServeSaysWhereItsNATSURLCameFrom(t *testing.T) {
	if got := natsURLSource([]string{"--nats-url=nats://x:4222"}, mapEnv(map[string]string{"YESGUARD_NATS_URL": "nats://y"})); got != "--nats-url" {
		t.Errorf("flag and variable: from %q, want the flag", got)
	}
	if got := natsURLSource(nil, mapEnv(map[string]string{"YESGUARD_NATS_URL": "nats://y"})); got != "YESGUARD_NATS_URL" {
		t.Errorf("variable only: from %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var errOut servertest.Buffer
	done := make(chan int, 1)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "nats://" + ln.Addr().String()
	_ = ln.Close()
	go func() {
		done <- runEnv(ctx, []string{"serve", "--grpc-addr=127.0.0.1:0", "--http-addr=", "--decision-log=stderr"},
			&env{stdout: &servertest.Buffer{}, stderr: &errOut, lookupEnv: mapEnv(map[string]string{"YESGUARD_NATS_URL": dead})})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errOut.String(), "yesguard listening") {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	log := errOut.String()
	for _, want := range []string{"YESGUARD_NATS_URL is set", "does NOT start its embedded NATS server", "unset it", `"from":"YESGUARD_NATS_URL"`} {
		if !strings.Contains(log, want) {
			t.Errorf("serve's log lacks %q:\n%s", want, log)
		}
	}
}
