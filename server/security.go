package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/metrics"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/redact"
)

// securityMetrics are the server's collectors of its security settings.
type securityMetrics struct {
	reloadErrors    *prometheus.CounterVec // what
	redactionErrors prometheus.Counter
	// redactLog is sampled: a flood of records with broken args cannot
	// flood the log.
	redactLog *zap.Logger
	// hostRefused counts the page requests refused for their Host
	// (protectPages).
	hostRefused prometheus.Counter
}

// setUpSecurity reads every security setting's files and builds what
// serves them: the token file, the gRPC TLS, the authorizer, the embedded
// NATS server's users or the external server's client options, and the
// redactor. Every problem is reported at once, each under its field's
// key; nothing listens yet.
func (s *Server) setUpSecurity(reg prometheus.Registerer) error {
	cfg := &s.cfg
	s.secMetrics = securityMetrics{
		reloadErrors:    metrics.NewCounterVec(reg, metrics.ReloadErrors),
		redactionErrors: metrics.NewCounter(reg, metrics.RedactionErrors),
		hostRefused:     metrics.NewCounter(reg, metrics.PagesHostRefused),
		redactLog: s.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, redactLogEvery, 1, 0)
		})),
	}
	var errs []error
	bad := func(key string, err error) { errs = append(errs, fmt.Errorf("%s: %w", key, err)) }

	if cfg.GRPCTokens != "" {
		t, err := auth.LoadTokens(cfg.GRPCTokens)
		if err != nil {
			bad("grpc_tokens", err)
		} else {
			s.tokens = t
		}
	}
	if cfg.GRPCTLSCert != "" {
		t, err := auth.LoadServerTLS(auth.ServerTLSConfig{CertFile: cfg.GRPCTLSCert, KeyFile: cfg.GRPCTLSKey, ClientCAFile: cfg.GRPCClientCA})
		if err != nil {
			bad("grpc_tls_cert", err)
		} else {
			s.tls = t
		}
	}

	if cfg.NATSURL == "" {
		e, err := auth.NewEmbeddedNATS(auth.EmbeddedNATSConfig{
			Listen: cfg.NATSListen,
			Subjects: auth.Subjects{
				TranscriptPrefix: cfg.SubjectPrefix,
				DecisionsPrefix:  decisions.DefaultSubjectPrefix,
				GuardInbox:       InboxPrefix,
			},
			Pipeline: auth.PipelineSource{
				PasswordFile: cfg.NATSPipelinePasswordFile,
				Password:     cfg.NATSPipelinePassword,
				Nkey:         cfg.NATSPipelineNkey,
			},
		})
		if err != nil {
			bad("nats_listen", err)
		} else {
			s.embedded = e
			s.natsAuth = e.GuardOptions()
		}
	} else {
		na := cfg.NATSAuth
		na.InboxPrefix = InboxPrefix
		opts, err := na.Options(cfg.NATSURL)
		if err != nil {
			bad("nats_url", err)
		} else {
			s.natsAuth = opts
		}
	}

	r, err := newRedactor(cfg)
	if err != nil {
		bad("redact", err)
	}
	s.redactor = r
	if r.Enabled() && cfg.RedactHash != "" && cfg.RedactKeyFile == "" {
		s.log.Warn("--redact-hash without --redact-key-file: a hashing key was made for this process only, " +
			"so hashes differ across restarts and replicas; give every replica the same --redact-key-file")
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	authz, err := auth.NewAuthorizer(auth.AuthorizerConfig{
		Tokens:     s.tokens,
		Methods:    auth.DefaultMethods(auth.MethodOptions{Reflection: !cfg.NoGRPCReflection}),
		Logger:     s.log.Named("auth"),
		Registerer: reg,
	})
	if err != nil {
		return err
	}
	s.authz = authz
	s.logSecurity()
	return nil
}

// newRedactor builds the redactor of the redact_* settings.
func newRedactor(cfg *Config) (*redact.Redactor, error) {
	rc := redact.Config{
		DropFields: splitList(cfg.RedactDrop),
		HashFields: splitList(cfg.RedactHash),
		MaskDigits: cfg.RedactDigits > 0,
		MinDigits:  cfg.RedactDigits,
	}
	if len(rc.HashFields) > 0 {
		if cfg.RedactKeyFile != "" {
			k, err := redact.LoadKey(cfg.RedactKeyFile)
			if err != nil {
				return nil, err
			}
			rc.Key = k
		} else {
			rc.Key = redact.RandomKey()
		}
	}
	return redact.New(rc)
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// logSecurity says at start-up what is on, and loudly what is open.
func (s *Server) logSecurity() {
	c := &s.cfg
	fields := []zap.Field{
		zap.Bool("grpc_tls", s.tls != nil),
		zap.Bool("grpc_mutual_tls", s.tls != nil && s.tls.MutualTLS()),
		zap.Bool("grpc_reflection", !c.NoGRPCReflection),
		zap.Bool("grpc_health", !c.NoGRPCHealth),
		zap.Bool("redaction", s.redactor.Enabled()),
	}
	if s.tokens != nil {
		fields = append(fields, zap.Strings("grpc_tokens", s.tokens.Current().Names()))
	}
	if s.embedded != nil {
		fields = append(fields, zap.String("nats_pipeline_user", s.embedded.PipelineUser()),
			zap.Bool("nats_pipeline_credential", s.embedded.HasPipelineCredential()))
	}
	s.log.Info("security", fields...)
	if s.tokens == nil && !auth.IsLoopbackTarget(c.GRPCAddr) {
		// Only with --insecure-no-auth (Validate refuses it otherwise).
		s.log.Warn("--insecure-no-auth: gRPC listens beyond the loopback without --grpc-tokens: anyone who reaches it can ask for decisions, "+
			"free reservations (Complete) and read every call (ListDecisions). Set --grpc-tokens (docs/security.md)",
			zap.String("grpc_addr", c.GRPCAddr))
	}
	if s.tls != nil && s.tls.MutualTLS() && c.HTTPAddr != "" {
		// Red team F6: mutual TLS covers gRPC only.
		s.log.Warn("--grpc-client-ca covers gRPC only: the /calls pages on --http-addr take the auditor token over plain HTTP "+
			"without a client certificate, so a stolen auditor token alone reads calls there. Keep --http-addr on loopback, "+
			"or put the pages behind a TLS proxy that requires client certificates (docs/security.md)",
			zap.String("http_addr", c.HTTPAddr))
	}
	if host, _, err := net.SplitHostPort(c.HTTPAddr); err == nil && !auth.IsLoopbackHost(host) {
		s.log.Warn("the pages serve plain HTTP beyond the loopback: the auditor token (header, form, cookie) and the calls "+
			"travel in clear. Serve --http-addr through a TLS proxy (docs/security.md)", zap.String("http_addr", c.HTTPAddr))
	}
	if s.tls == nil && s.tokens != nil && !auth.IsLoopbackTarget(c.GRPCAddr) {
		s.log.Warn("bearer tokens travel in plaintext: anyone on the path can read and reuse them. Set --grpc-tls-cert and --grpc-tls-key",
			zap.String("grpc_addr", c.GRPCAddr))
	}
}

// reloadSecurity reloads the token file and the gRPC TLS files; each
// failure keeps what was loaded and is counted.
func (s *Server) reloadSecurity() []error {
	var errs []error
	if s.tokens != nil {
		if err := s.tokens.Reload(); err != nil {
			s.secMetrics.reloadErrors.WithLabelValues("tokens").Inc()
			errs = append(errs, fmt.Errorf("grpc_tokens (the tokens loaded before stay): %w", err))
		} else {
			s.log.Info("gRPC tokens reloaded", zap.Strings("tokens", s.tokens.Current().Names()))
		}
	}
	if s.tls != nil {
		if err := s.tls.Reload(); err != nil {
			s.secMetrics.reloadErrors.WithLabelValues("tls").Inc()
			errs = append(errs, fmt.Errorf("grpc_tls_cert (the certificate loaded before stays): %w", err))
		} else {
			s.log.Info("gRPC TLS certificate reloaded", zap.Time("not_after", s.tls.NotAfter()))
		}
	}
	return errs
}

// redactLogEvery bounds the log lines of failed redactions.
const redactLogEvery = 10 * time.Second

// redactDecision is the copy of a record the log, the store and the
// decision stream get; the Check's answer is built from it too, so that a
// pipeline token reads no more of a call than an auditor (red team F7).
func (s *Server) redactDecision(d *yesguardv1.Decision) *yesguardv1.Decision {
	out, err := s.redactor.Decision(d)
	if err != nil {
		s.secMetrics.redactionErrors.Inc()
		s.secMetrics.redactLog.Warn("decision record redacted whole: its args or result could not be parsed, so the copy written lost them",
			zap.String("decision_id", d.GetDecisionId()), zap.Error(err))
	}
	return out
}

// protectPages guards the /calls pages against DNS rebinding: without
// tokens (the loopback default) they answer only a request whose Host is
// a loopback name or address (localhost, 127.0.0.1, [::1], with any
// port), so that a web page whose own name was rebound to 127.0.0.1
// cannot read the calls from the developer's browser; any other Host is
// 421, counted. With tokens the pages need the auditor token (a rebound
// name never gets the cookie), and with --insecure-no-auth the operator
// has chosen to serve every Host.
func (s *Server) protectPages(pages http.Handler) http.Handler {
	if s.tokens != nil || s.cfg.InsecureNoAuth {
		return pages
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !auth.IsLoopbackHost(host) {
			s.secMetrics.hostRefused.Inc()
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "421 misdirected request: without --grpc-tokens the /calls pages answer only loopback names "+
				"(localhost, 127.0.0.1, [::1]); open them as http://127.0.0.1:<port>/calls, or give the guard --grpc-tokens", http.StatusMisdirectedRequest)
			return
		}
		pages.ServeHTTP(w, r)
	})
}
