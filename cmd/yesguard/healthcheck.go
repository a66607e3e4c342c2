package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/server"
)

// runHealthcheck asks the gRPC health service whether yesguard serves, for
// a scratch image's HEALTHCHECK, which has no shell or grpcurl. By default
// it checks yesguard.v1.Guard, whose status is what /readyz answers: the
// guard is up and its transcript feed connected, so it can judge. A guard
// that refuses every Check because NATS is gone is not healthy. --service ""
// checks only that the process serves.
func runHealthcheck(ctx context.Context, args []string, e *env) int {
	fs := newFlagSet("healthcheck", e)
	addr := fs.String("grpc-addr", server.DefaultGRPCAddr, "`host:port` of yesguard's gRPC server; an unspecified host means this host")
	service := fs.String("service", server.GuardService, "health service to check: "+server.GuardService+` (the guard and its transcript feed, as /readyz) or "" (the process only)`)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	var tlsCfg auth.ClientConfig
	fs.BoolVar(&tlsCfg.TLS, "tls", false, "use TLS, verifying the guard with the system's roots")
	fs.StringVar(&tlsCfg.CAFile, "tls-ca", "", "PEM `file` of the CA that verifies the guard (implies --tls)")
	fs.StringVar(&tlsCfg.CertFile, "tls-cert", "", "client certificate PEM `file`, for a guard with --grpc-client-ca")
	fs.StringVar(&tlsCfg.KeyFile, "tls-key", "", "client key PEM `file`")
	fs.StringVar(&tlsCfg.ServerName, "tls-server-name", "", "`name` the guard's certificate must hold")
	bindEnv(fs, "grpc-addr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "yesguard healthcheck: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	// Same variable as serve's, so one container environment serves both.
	if err := applyEnv(fs, e.lookupEnv, "grpc-addr"); err != nil {
		fmt.Fprintf(e.stderr, "yesguard healthcheck: %v\n", err)
		return exitUsage
	}

	target := dialTarget(*addr)
	tlsCfg.Target = target
	opts, err := tlsCfg.DialOptions() // health needs no token
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard healthcheck: %v\n", err)
		return exitUsage
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard healthcheck: %s: %v\n", target, err)
		return exitUsage
	}
	defer cc.Close()

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := healthgrpc.NewHealthClient(cc).Check(ctx, &healthgrpc.HealthCheckRequest{Service: *service})
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard healthcheck: %s: %v\n", target, err)
		return exitError
	}
	fmt.Fprintln(e.stdout, resp.GetStatus())
	if resp.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
		return exitError
	}
	return exitOK
}

// dialTarget turns a listen address into one to dial: an empty or
// unspecified host (":50051", "0.0.0.0:50051") becomes the loopback.
func dialTarget(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
