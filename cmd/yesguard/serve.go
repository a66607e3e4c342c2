package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/server"
)

// parseServeFlags maps serve's flags, then the environment, onto a
// server.Config, and validates it. It returns flag.ErrHelp for -h.
func parseServeFlags(args []string, lookupEnv func(string) (string, bool), output io.Writer) (server.Config, error) {
	cfg := server.DefaultConfig()
	fs := flag.NewFlagSet("yesguard serve", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: yesguard [serve] [flags]\n\nRuns the guard. Flags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nSIGHUP reloads the policy, the locales, the token file, the gRPC TLS files and the approval keys.\n"+
			"%s is the embedded NATS pipeline user's password (no flag: ps shows command lines).\n"+
			"docs/security.md says what each security flag stops. Run 'yesguard help' for the other commands.\n", auth.PipelinePasswordEnv)
	}
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "`host:port` of the gRPC Guard, health and reflection services")
	fs.StringVar(&cfg.NATSURL, "nats-url", cfg.NATSURL, "NATS server `URL`s (comma-separated) carrying the transcripts; empty starts an embedded server")
	fs.StringVar(&cfg.NATSListen, "nats-listen", cfg.NATSListen, "`host:port` of the embedded NATS server's clients (port 0: any free one)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "`host:port` of /metrics, /healthz and /readyz; empty disables")
	fs.StringVar(&cfg.PolicyPath, "policy", cfg.PolicyPath, "policy YAML `file`; empty: every tool needs a confirmation")
	fs.StringVar(&cfg.LocalesDir, "locales-dir", cfg.LocalesDir, "`dir`ectory of <lang>.yaml locales loaded over the built-in ones")
	fs.StringVar(&cfg.SubjectPrefix, "subject-prefix", cfg.SubjectPrefix, "transcripts arrive on <`prefix`>.<call_id>")
	fs.StringVar(&cfg.DecisionLog, "decision-log", cfg.DecisionLog, "decision log: stdout, stderr or a `file` appended to")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "operational log `level`: debug, info, warn, error")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "bound on a graceful stop")
	fs.DurationVar(&cfg.ReconnectGrace, "reconnect-grace", cfg.ReconnectGrace, "after NATS comes back, refuse every Check this long while the publishers reconnect and flush what they buffered (above their reconnect wait; negative: none)")
	fs.IntVar(&cfg.MaxConns, "max-conns", cfg.MaxConns, "connections each listener (gRPC, HTTP, the embedded NATS server) holds at once, at most a quarter of the file descriptor limit")
	fs.StringVar(&cfg.State, "state", cfg.State, "where the shared state lives: jetstream (replicas on one NATS share it; restarts keep it) or memory (one replica only)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "`dir`ectory of the embedded NATS server's JetStream store")
	fs.IntVar(&cfg.JSReplicas, "js-replicas", cfg.JSReplicas, "copies the streams and the bucket keep on a JetStream cluster: 1, 3 or 5")
	fs.DurationVar(&cfg.TranscriptRetention, "transcript-retention", cfg.TranscriptRetention, "how long the transcript stream keeps events")
	fs.Int64Var(&cfg.TranscriptMaxBytes, "transcript-max-bytes", cfg.TranscriptMaxBytes, "bound on the transcript stream's size")
	fs.DurationVar(&cfg.DuplicateWindow, "duplicate-window", cfg.DuplicateWindow, "the transcript stream's Nats-Msg-Id duplicate window")
	fs.DurationVar(&cfg.DecisionRetention, "decision-retention", cfg.DecisionRetention, "how long the decision stream keeps records")
	fs.Int64Var(&cfg.DecisionMaxBytes, "decision-max-bytes", cfg.DecisionMaxBytes, "bound on the decision stream's size")
	fs.IntVar(&cfg.DecisionsPerCall, "decisions-per-call", cfg.DecisionsPerCall, "records the decision stream keeps per call")

	// Limits (transcript.Limits): each hit is counted and logged.
	l := &cfg.Limits
	fs.IntVar(&l.MaxTextBytes, "max-text-bytes", l.MaxTextBytes, "an event's text: longer is rejected")
	fs.IntVar(&l.MaxLangBytes, "max-lang-bytes", l.MaxLangBytes, "an event's lang: longer is rejected")
	fs.IntVar(&l.MaxResponseIDBytes, "max-response-id-bytes", l.MaxResponseIDBytes, "an event's response_id: longer is rejected")
	fs.IntVar(&l.MaxSourceBytes, "max-source-bytes", l.MaxSourceBytes, "an event's source: longer is rejected")
	fs.IntVar(&l.MaxUtterances, "max-utterances", l.MaxUtterances, "final utterances kept per call, the oldest dropped first")
	fs.IntVar(&l.MaxCallBytes, "max-call-bytes", l.MaxCallBytes, "bytes one call's history holds, the oldest utterances dropped first")
	fs.Int64Var(&l.MaxTotalBytes, "max-total-bytes", l.MaxTotalBytes, "bytes every call together holds: an event above it is rejected")
	fs.IntVar(&l.MaxEventsPerSecond, "max-events-per-second", l.MaxEventsPerSecond, "events a call may send a second (twice as many at once): more are rejected")
	fs.IntVar(&l.MaxCalls, "max-calls", l.MaxCalls, "calls held: above it a new call evicts one that never had a Check, else its events are rejected")
	fs.IntVar(&l.MaxCallsPerPublisher, "max-calls-per-publisher", l.MaxCallsPerPublisher, "calls one publisher (the events' source) holds: above it its new call evicts one of its own that never had a Check, else its events are rejected")
	fs.IntVar(&l.MaxEventsPerCall, "max-events-per-call", l.MaxEventsPerCall, "events of one call the transcript stream holds: it refuses more to their publisher")
	fs.DurationVar(&l.IdleTTL, "idle-ttl", l.IdleTTL, "a call with no event for this long is forgotten")
	fs.DurationVar(&l.EndedTTL, "ended-ttl", l.EndedTTL, "a call is forgotten this long after its call_ended")

	// Security (docs/security.md).
	fs.StringVar(&cfg.GRPCTokens, "grpc-tokens", "", "bearer token `file` (hashes and roles; make entries with 'yesguard token'); reloaded on SIGHUP. Empty: every method open")
	fs.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", false, "let gRPC and the pages listen beyond the loopback without --grpc-tokens (anyone who reaches them may ask for decisions and read every call); refused at start-up otherwise")
	fs.StringVar(&cfg.GRPCTLSCert, "grpc-tls-cert", "", "gRPC TLS certificate chain PEM `file` (with --grpc-tls-key); reloaded on SIGHUP")
	fs.StringVar(&cfg.GRPCTLSKey, "grpc-tls-key", "", "gRPC TLS private key PEM `file`")
	fs.StringVar(&cfg.GRPCClientCA, "grpc-client-ca", "", "CA PEM `file`: every gRPC client must present a certificate it signed (mutual TLS)")
	reflection, healthSvc := !cfg.NoGRPCReflection, !cfg.NoGRPCHealth
	fs.BoolVar(&reflection, "grpc-reflection", reflection, "serve gRPC server reflection (with tokens: to any valid token)")
	fs.BoolVar(&healthSvc, "grpc-health", healthSvc, "serve the gRPC health service (open: it says only SERVING or NOT_SERVING; the image's HEALTHCHECK uses it)")
	fs.StringVar(&cfg.NATSPipelinePasswordFile, "nats-pipeline-password-file", "", "`file` whose first line is the embedded NATS pipeline user's password (or its bcrypt hash); or set "+auth.PipelinePasswordEnv)
	fs.StringVar(&cfg.NATSPipelineNkey, "nats-pipeline-nkey", "", "the embedded NATS pipeline user's public nkey (U...); the pipeline keeps the seed")
	n := &cfg.NATSAuth
	fs.StringVar(&n.CredsFile, "nats-creds", "", "external NATS: the guard's .creds `file` (user JWT and seed)")
	fs.StringVar(&n.NkeySeedFile, "nats-nkey", "", "external NATS: `file` holding the guard's nkey seed")
	fs.StringVar(&n.TokenFile, "nats-token-file", "", "external NATS: `file` holding a server token")
	fs.StringVar(&n.User, "nats-user", "", "external NATS: the guard's `user` (with --nats-password-file)")
	fs.StringVar(&n.PasswordFile, "nats-password-file", "", "external NATS: `file` holding the user's password")
	fs.StringVar(&n.TLSCA, "nats-tls-ca", "", "external NATS: CA PEM `file` that verifies the server")
	fs.StringVar(&n.TLSCert, "nats-tls-cert", "", "external NATS: client certificate PEM `file`")
	fs.StringVar(&n.TLSKey, "nats-tls-key", "", "external NATS: client key PEM `file`")
	fs.StringVar(&cfg.RedactDrop, "redact-drop", "", "comma-separated dotted `paths` of argument fields dropped from the decision records (log, stream, ListDecisions)")
	fs.StringVar(&cfg.RedactHash, "redact-hash", "", "comma-separated dotted `paths` of argument fields replaced by a keyed hash in the decision records")
	fs.StringVar(&cfg.RedactKeyFile, "redact-key-file", "", "`file` of the --redact-hash key (at least 32 bytes; replicas share it)")
	fs.IntVar(&cfg.RedactDigits, "redact-digits", 0, "mask every run of at least this many `digits` in the records' speech, and in their argument and result strings (0: none)")
	fs.Var(listFlag{&cfg.ApprovalKeyFiles}, "approval-key-file", "approval signing key PEM `file` (Ed25519 PKCS#8); repeat it, or list files comma-separated; read again on SIGHUP")
	fs.StringVar(&cfg.ApprovalKeyDir, "approval-key-dir", cfg.ApprovalKeyDir, "`dir`ectory of approval key *.pem files (a mounted secret), read again on SIGHUP; with no key flag: <data-dir>/keys, generated at first start")
	fs.StringVar(&cfg.ApprovalIssuer, "approval-issuer", cfg.ApprovalIssuer, "the approvals' \"iss\" claim, which backends expect")
	// Every flag of serve is also read from its environment variable.
	names := flagNames(fs)
	bindEnv(fs, names...)

	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := applyEnv(fs, lookupEnv, names...); err != nil {
		return cfg, err
	}
	cfg.NoGRPCReflection, cfg.NoGRPCHealth = !reflection, !healthSvc
	// The pipeline's password comes from the environment only: there is
	// no flag, as a command line is visible to every user of the host.
	if pw, ok := lookupEnv(auth.PipelinePasswordEnv); ok {
		cfg.NATSPipelinePassword = pw
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid config:\n%w", err)
	}
	return cfg, nil
}

func runServe(ctx context.Context, args []string, e *env) int {
	cfg, err := parseServeFlags(args, e.lookupEnv, e.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard serve: %v\n", err)
		return exitUsage
	}

	log, err := server.NewLogger(cfg.LogLevel, zapcore.Lock(zapcore.AddSync(e.stderr)), isTerminal(e.stderr))
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard serve: log_level: %v\n", err)
		return exitUsage
	}
	defer func() { _ = log.Sync() }()

	if cfg.NATSURL != "" {
		warnExternalNATS(log, cfg.NATSURL, natsURLSource(args, e.lookupEnv))
	}

	srv, err := server.New(cfg, server.WithLogger(log))
	if err != nil {
		// Plain text: the error lists every problem, one per line.
		fmt.Fprintf(e.stderr, "yesguard serve: %v\n", err)
		return exitUsage
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	if err := srv.Start(ctx); err != nil {
		log.Error("start failed", zap.Error(err))
		return exitError
	}
	bi := server.ReadBuildInfo()
	log.Info("yesguard listening",
		zap.String("grpc", srv.GRPCAddr()),
		zap.String("nats", auth.RedactURLs(srv.NATSURL())),
		zap.String("subjects", cfg.SubjectPrefix+".<call_id>"),
		zap.String("http", srv.HTTPAddr()),
		zap.String("decision_log", cfg.DecisionLog),
		zap.String("state", cfg.State),
		zap.String("data_dir", cfg.DataDir),
		zap.String("version", bi.Version),
		zap.String("revision", bi.Revision))

	code := exitOK
loop:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			break loop
		case <-hup:
			// Reload logs each success; what failed keeps what it had.
			if err := srv.Reload(); err != nil {
				log.Error("reload failed; what failed keeps what it had", zap.Error(err))
			}
		case err := <-srv.Err():
			log.Error("server failed; shutting down", zap.Error(err))
			code = exitError
			break loop
		}
	}
	stop() // a second SIGINT or SIGTERM now ends the process at once

	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		log.Error("shutdown incomplete", zap.Error(err))
		return exitError
	}
	log.Info("stopped")
	return code
}

// listFlag is a repeatable flag: each value, flag or environment
// variable, may also list several, comma-separated.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l.v = append(*l.v, p)
		}
	}
	return nil
}

// natsURLSource says where serve's NATS URL came from: the flag, or the
// environment variable the client commands also read.
func natsURLSource(args []string, lookupEnv func(string) (string, bool)) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "nats-url" {
			return "--nats-url"
		}
	}
	if v, ok := lookupEnv(envName("nats-url")); ok && v != "" {
		return envName("nats-url")
	}
	return ""
}

// warnExternalNATS says loudly that serve uses an external NATS server and
// therefore starts no embedded one, and where that came from. The variable
// YESGUARD_NATS_URL is also where the client commands publish: exported
// for them, it silently turned the embedded server off.
func warnExternalNATS(log *zap.Logger, url, from string) {
	fields := []zap.Field{zap.String("nats_url", auth.RedactURLs(url)), zap.String("from", from)}
	if from == envName("nats-url") {
		log.Warn("YESGUARD_NATS_URL is set, so serve connects to the NATS server it names and does NOT start its embedded NATS server. "+
			"If you exported it for the client commands (say, check, probe), unset it, or pass --nats-url= (empty), to run the embedded server; "+
			"until that server answers, every Check is refused and healthcheck and /readyz fail", fields...)
		return
	}
	log.Info("using an external NATS server; the embedded NATS server is off", fields...)
}
