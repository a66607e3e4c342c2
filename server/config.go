package server

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.uber.org/zap/zapcore"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/transcript"
)

// Defaults.
const (
	DefaultGRPCAddr        = "127.0.0.1:50051"
	DefaultNATSListen      = "127.0.0.1:4222"
	DefaultHTTPAddr        = "127.0.0.1:9090"
	DefaultSubjectPrefix   = "yesguard.transcript"
	DefaultDecisionLog     = "stdout"
	DefaultLogLevel        = "info"
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultReconnectGrace is above nats.go's 2 s reconnect wait and its
	// jitter (100 ms; 1 s with TLS).
	DefaultReconnectGrace = 3 * time.Second
	// DefaultMaxConns and DefaultIdleTimeout: Config.MaxConns and
	// Config.IdleTimeout.
	DefaultMaxConns    = 4096
	DefaultIdleTimeout = 5 * time.Minute

	StateJetStream = "jetstream"
	StateMemory    = "memory"
	DefaultState   = StateJetStream

	DefaultJSReplicas          = 1
	DefaultTranscriptRetention = time.Hour
	DefaultTranscriptMaxBytes  = 1 << 30
	DefaultDuplicateWindow     = 2 * time.Minute
	DefaultDecisionRetention   = 7 * 24 * time.Hour
	DefaultDecisionMaxBytes    = 4 << 30
	DefaultDecisionsPerCall    = 10000
)

// DefaultDataDir is where the embedded NATS server keeps its JetStream
// store: $XDG_STATE_HOME/yesguard, else ~/.local/state/yesguard, else
// ./yesguard-data.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "yesguard")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "state", "yesguard")
	}
	return "yesguard-data"
}

// Config is everything a Server needs. Each field has a key, used in
// Validate's and New's errors; the yesguard command sets it from the flag
// --<key with dashes> or the environment variable YESGUARD_<KEY>:
//
//	GRPCAddr        grpc_addr
//	NATSURL         nats_url
//	NATSListen      nats_listen
//	HTTPAddr        http_addr
//	PolicyPath      policy
//	LocalesDir      locales_dir
//	SubjectPrefix   subject_prefix
//	DecisionLog     decision_log
//	LogLevel        log_level
//	ShutdownTimeout shutdown_timeout
//	ReconnectGrace  reconnect_grace
//	MaxConns        max_conns
//	State           state
//	DataDir         data_dir
//	JSReplicas      js_replicas
//	TranscriptRetention transcript_retention
//	TranscriptMaxBytes  transcript_max_bytes
//	DuplicateWindow     duplicate_window
//	DecisionRetention   decision_retention
//	DecisionMaxBytes    decision_max_bytes
//	DecisionsPerCall    decisions_per_call
//	Limits          limits.<field> (--max-<field>, --idle-ttl, --ended-ttl)
//	GRPCTokens      grpc_tokens
//	InsecureNoAuth  insecure_no_auth
//	GRPCTLSCert, GRPCTLSKey, GRPCClientCA  grpc_tls_cert, grpc_tls_key, grpc_client_ca
//	NoGRPCReflection, NoGRPCHealth         grpc_reflection, grpc_health (--grpc-reflection=false)
//	NATSPipelinePasswordFile, NATSPipelineNkey  nats_pipeline_password_file, nats_pipeline_nkey
//	NATSPipelinePassword   nats_pipeline_password (the environment only: YESGUARD_NATS_PIPELINE_PASSWORD)
//	NATSAuth        nats_creds, nats_nkey, nats_token_file, nats_user, nats_password_file, nats_tls_ca, nats_tls_cert, nats_tls_key
//	RedactDrop, RedactHash, RedactKeyFile, RedactDigits  redact_drop, redact_hash, redact_key_file, redact_digits
//	ApprovalKeyFiles    approval_key_file (repeatable)
//	ApprovalKeyDir      approval_key_dir
//	ApprovalIssuer      approval_issuer
//
// docs/security.md says what each security setting stops.
type Config struct {
	// GRPCAddr is the host:port the Guard service, the gRPC health service
	// and reflection listen on; port 0 picks a free one. Default
	// 127.0.0.1:50051.
	GRPCAddr string
	// NATSURL is the NATS server (or comma-separated servers) the voice
	// pipeline publishes transcripts to. Empty starts an embedded NATS
	// server listening on NATSListen.
	NATSURL string
	// NATSListen is the host:port the embedded NATS server accepts clients
	// on; port 0 (or -1) picks a free one. Unused when NATSURL is set.
	// Default 127.0.0.1:4222.
	NATSListen string
	// HTTPAddr is the host:port serving /metrics, /healthz, /readyz,
	// /prompt and the call pages (/calls, package timeline).
	// Empty disables the HTTP server, so SetDefaults leaves it empty;
	// DefaultConfig and the command default it to 127.0.0.1:9090.
	HTTPAddr string
	// PolicyPath is the policy YAML file. Empty uses the default policy:
	// every tool needs a confirmation, judged from its name.
	PolicyPath string
	// LocalesDir holds <lang>.yaml files loaded over the built-in locales
	// (replacing a language's, or adding one). Empty uses the built-in
	// locales only.
	LocalesDir string
	// SubjectPrefix: transcripts of a call arrive on
	// <SubjectPrefix>.<call_id>. Tokens separated by dots, no wildcards.
	// Default yesguard.transcript.
	SubjectPrefix string
	// DecisionLog is where decision records are written, one JSON line
	// each: "stdout" (or "-"), "stderr", or a file appended to. Default
	// stdout.
	DecisionLog string
	// LogLevel of the operational logger New builds when it is given none
	// (WithLogger): debug, info, warn or error. Default info.
	LogLevel string
	// ShutdownTimeout bounds Stop. Default 10s.
	ShutdownTimeout time.Duration
	// Limits bound what one transcript event and one call may hold; zero
	// fields take the transcript package's defaults.
	Limits transcript.Limits

	// State is where the shared state lives: "jetstream" (the default:
	// every replica on one NATS shares the transcript stream, the
	// reservations bucket and the decision stream, and a restart keeps
	// them) or "memory" (this process only: one replica, lost at restart).
	State string
	// DataDir holds the embedded NATS server's JetStream store (state
	// jetstream, no NATSURL) and, with the JetStream state, the spool of
	// decision records queued in an outage. Default DefaultDataDir().
	DataDir string
	// JSReplicas is how many copies the streams and the bucket keep on a
	// JetStream cluster (1, 3 or 5). Default 1.
	JSReplicas int
	// TranscriptRetention and TranscriptMaxBytes bound the transcript
	// stream (default 1h, 1 GiB); it must outlast IdleTTL, which a start
	// replays. DuplicateWindow is its Nats-Msg-Id window (default 2m).
	TranscriptRetention time.Duration
	TranscriptMaxBytes  int64
	DuplicateWindow     time.Duration
	// DecisionRetention, DecisionMaxBytes and DecisionsPerCall bound the
	// decision stream (default 7 days, 4 GiB, 10000 records a call).
	DecisionRetention time.Duration
	DecisionMaxBytes  int64
	DecisionsPerCall  int
	// GRPCTokens is the bearer token file (auth.LoadTokens): with it,
	// Check and Complete need the pipeline role, ListDecisions and the
	// call pages the auditor role. SIGHUP reloads it. Empty: every method
	// is open (the loopback default).
	GRPCTokens string
	// InsecureNoAuth lets gRPC and the pages listen beyond the loopback
	// without GRPCTokens. Without it that is refused at start-up: anyone
	// who reaches either would ask for decisions, free reservations and
	// read every call.
	InsecureNoAuth bool
	// GRPCTLSCert and GRPCTLSKey turn on TLS for gRPC; SIGHUP reloads them.
	// GRPCClientCA, with them, requires every client to present a
	// certificate that CA signed (mutual TLS).
	GRPCTLSCert, GRPCTLSKey, GRPCClientCA string
	// NoGRPCReflection and NoGRPCHealth leave server reflection and the
	// gRPC health service unregistered. With tokens, reflection needs a
	// valid token; health stays open (it says only SERVING or not).
	NoGRPCReflection, NoGRPCHealth bool

	// The embedded NATS server's pipeline credential, at most one:
	// NATSPipelinePasswordFile (its first line: a password of at least 16
	// bytes, or a bcrypt hash), NATSPipelinePassword (from the
	// environment, never a flag: a command line is visible to every user
	// of the host) or NATSPipelineNkey (the public key, U...). Without one
	// NATSListen must be a loopback address.
	NATSPipelinePasswordFile, NATSPipelinePassword, NATSPipelineNkey string
	// NATSAuth is how the guard authenticates to an external NATS
	// (NATSURL): credentials and TLS, from files.
	NATSAuth auth.NATSClientConfig

	// RedactDrop and RedactHash are comma-separated dotted paths of
	// argument fields dropped from, or hashed in, the decision records
	// (the log, the decision stream, ListDecisions, the call pages);
	// RedactKeyFile holds the hashing key (replicas must share it; without
	// it a key is made at start-up). RedactDigits > 0 masks every run of
	// at least that many digits in the records' speech. See package
	// redact.
	RedactDrop, RedactHash, RedactKeyFile string
	RedactDigits                          int

	// ApprovalKeyFiles and ApprovalKeyDir are the keys that sign the
	// approval of every ALLOW (docs/approvals.md, Keys): each file, and
	// every *.pem of the directory (a mounted secret), read again on
	// Reload. Both empty: the data directory's keys/ folder, where the
	// first start generates a key. Replicas must share their keys.
	ApprovalKeyFiles []string
	ApprovalKeyDir   string
	// ApprovalIssuer is the approvals' "iss" claim, which verifiers
	// expect. Default approval.DefaultIssuer ("yesguard").
	ApprovalIssuer string
	// TranscriptMaxLag: while events are pending on the transcript stream
	// and the last one applied was stored longer ago than this, the
	// ingester reports it lags (StreamIngester.Behind). Checks do not
	// refuse for it: an ALLOW settles on its own call's events first.
	// Default 1s. (No flag: tests and benchmarks set it.)
	TranscriptMaxLag time.Duration
	// ReconnectGrace: after NATS comes back (the guard reconnects, its
	// first connection came late, or the embedded server restarts on a
	// stream that holds events), the pipeline's publishers are still
	// reconnecting and flushing what they buffered during the outage
	// (nats.go waits 2 s between attempts): for this long the guard refuses
	// every Check (REASON_TRANSCRIPT_GAP) and its health is NOT_SERVING,
	// so that no call is judged on a transcript still missing the caller's
	// "Wait, no.". Keep it above the publishers' reconnect wait and jitter.
	// Default 3s; negative: none.
	ReconnectGrace time.Duration
	// MaxConns bounds the connections each listener holds at once: gRPC,
	// HTTP and the embedded NATS server's clients, each at most a quarter
	// of the process's file descriptor limit too (conns.go). Past it, new
	// connections wait in the kernel's queue until one closes. Default
	// 4096.
	MaxConns int
	// IdleTimeout closes a gRPC or HTTP connection with no call in
	// progress for this long (the client reconnects when it needs to).
	// Default 5m. (No flag: tests set it.)
	IdleTimeout time.Duration
}

// DefaultConfig returns a config with every default set, the HTTP server
// included.
func DefaultConfig() Config {
	c := Config{HTTPAddr: DefaultHTTPAddr}
	c.SetDefaults()
	return c
}

// SetDefaults fills every unset field but HTTPAddr, whose empty value
// disables the HTTP server.
func (c *Config) SetDefaults() {
	if c.GRPCAddr == "" {
		c.GRPCAddr = DefaultGRPCAddr
	}
	if c.NATSListen == "" {
		c.NATSListen = DefaultNATSListen
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = DefaultSubjectPrefix
	}
	if c.DecisionLog == "" {
		c.DecisionLog = DefaultDecisionLog
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.ReconnectGrace == 0 {
		c.ReconnectGrace = DefaultReconnectGrace
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	c.Limits.SetDefaults()
	if c.State == "" {
		c.State = DefaultState
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	if c.JSReplicas == 0 {
		c.JSReplicas = DefaultJSReplicas
	}
	if c.TranscriptRetention == 0 {
		c.TranscriptRetention = DefaultTranscriptRetention
	}
	if c.TranscriptMaxBytes == 0 {
		c.TranscriptMaxBytes = DefaultTranscriptMaxBytes
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.DecisionRetention == 0 {
		c.DecisionRetention = DefaultDecisionRetention
	}
	// The memory state holds its records in this process: its bounds are
	// the memory store's.
	if c.DecisionMaxBytes == 0 {
		c.DecisionMaxBytes = DefaultDecisionMaxBytes
		if c.State == StateMemory {
			c.DecisionMaxBytes = decisions.DefaultMaxBytes
		}
	}
	if c.DecisionsPerCall == 0 {
		c.DecisionsPerCall = DefaultDecisionsPerCall
		if c.State == StateMemory {
			c.DecisionsPerCall = decisions.DefaultMaxPerCall
		}
	}
	if c.ApprovalIssuer == "" {
		c.ApprovalIssuer = approval.DefaultIssuer
	}
}

// Validate reports every problem at once, each naming its field's key. It
// does not read the policy or the locales: New does.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key string, err error) {
		errs = append(errs, fmt.Errorf("%s: %w", key, err))
	}
	if err := checkHostPort(c.GRPCAddr, false); err != nil {
		bad("grpc_addr", err)
	}
	if c.NATSURL != "" {
		if err := checkNATSURLs(c.NATSURL); err != nil {
			bad("nats_url", err)
		}
	} else if err := checkHostPort(c.NATSListen, true); err != nil {
		bad("nats_listen", err)
	}
	if c.HTTPAddr != "" {
		if err := checkHostPort(c.HTTPAddr, false); err != nil {
			bad("http_addr", err)
		}
	}
	if err := checkSubjectPrefix(c.SubjectPrefix); err != nil {
		bad("subject_prefix", err)
	}
	if strings.TrimSpace(c.DecisionLog) == "" {
		bad("decision_log", errors.New(`empty; want "stdout", "stderr" or a file path`))
	}
	if _, err := zapcore.ParseLevel(c.LogLevel); err != nil {
		bad("log_level", fmt.Errorf("%q is not one of debug, info, warn, error", c.LogLevel))
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", fmt.Errorf("must be above 0, got %s", c.ShutdownTimeout))
	}
	switch c.State {
	case StateJetStream:
		if c.NATSURL == "" && strings.TrimSpace(c.DataDir) == "" {
			bad("data_dir", errors.New("empty; the embedded NATS server keeps its JetStream store there"))
		}
		if c.TranscriptRetention < c.Limits.IdleTTL {
			bad("transcript_retention", fmt.Errorf("%s is shorter than the %s a start replays (limits.idle_ttl)", c.TranscriptRetention, c.Limits.IdleTTL))
		}
	case StateMemory:
	default:
		bad("state", fmt.Errorf("%q is not jetstream or memory", c.State))
	}
	if strings.TrimSpace(c.ApprovalIssuer) != c.ApprovalIssuer || len(c.ApprovalIssuer) > 256 || strings.IndexFunc(c.ApprovalIssuer, unicode.IsControl) >= 0 {
		bad("approval_issuer", fmt.Errorf("%q: at most 256 characters, no control characters or surrounding spaces", c.ApprovalIssuer))
	}
	for i, f := range c.ApprovalKeyFiles {
		if strings.TrimSpace(f) == "" {
			bad(fmt.Sprintf("approval_key_file[%d]", i), errors.New("empty path"))
		}
	}
	if c.JSReplicas != 1 && c.JSReplicas != 3 && c.JSReplicas != 5 {
		bad("js_replicas", fmt.Errorf("%d: want 1, 3 or 5", c.JSReplicas))
	}
	if p := c.SubjectPrefix + "."; strings.HasPrefix(p, "yesguard.decisions.") || strings.HasPrefix("yesguard.decisions.", p) || strings.HasPrefix(p, "$") {
		bad("subject_prefix", fmt.Errorf("%q overlaps the decision stream's subjects (yesguard.decisions.>) or the JetStream API", c.SubjectPrefix))
	}
	for _, f := range []struct {
		key string
		v   int64
	}{
		{"transcript_retention", int64(c.TranscriptRetention)},
		{"transcript_max_bytes", c.TranscriptMaxBytes},
		{"duplicate_window", int64(c.DuplicateWindow)},
		{"decision_retention", int64(c.DecisionRetention)},
		{"decision_max_bytes", c.DecisionMaxBytes},
		{"decisions_per_call", int64(c.DecisionsPerCall)},
		{"limits.max_text_bytes", int64(c.Limits.MaxTextBytes)},
		{"limits.max_lang_bytes", int64(c.Limits.MaxLangBytes)},
		{"limits.max_response_id_bytes", int64(c.Limits.MaxResponseIDBytes)},
		{"limits.max_source_bytes", int64(c.Limits.MaxSourceBytes)},
		{"limits.max_utterances", int64(c.Limits.MaxUtterances)},
		{"limits.max_call_bytes", int64(c.Limits.MaxCallBytes)},
		{"limits.max_total_bytes", c.Limits.MaxTotalBytes},
		{"limits.max_events_per_second", int64(c.Limits.MaxEventsPerSecond)},
		{"limits.idle_ttl", int64(c.Limits.IdleTTL)},
		{"limits.ended_ttl", int64(c.Limits.EndedTTL)},
		{"limits.max_calls", int64(c.Limits.MaxCalls)},
		{"limits.max_calls_per_publisher", int64(c.Limits.MaxCallsPerPublisher)},
		{"limits.max_events_per_call", int64(c.Limits.MaxEventsPerCall)},
	} {
		if f.v <= 0 {
			bad(f.key, fmt.Errorf("must be above 0, got %d", f.v))
		}
	}
	if c.Limits.MaxTotalBytes > 0 && int64(c.Limits.MaxCallBytes) > c.Limits.MaxTotalBytes {
		bad("limits.max_call_bytes", fmt.Errorf("%d is above limits.max_total_bytes (%d)", c.Limits.MaxCallBytes, c.Limits.MaxTotalBytes))
	}
	c.validateSecurity(bad)
	return errors.Join(errs...)
}

// validateSecurity checks the security settings that need no file read
// (New reads the files, and reports what is wrong in them).
func (c *Config) validateSecurity(bad func(string, error)) {
	if (c.GRPCTLSCert == "") != (c.GRPCTLSKey == "") {
		bad("grpc_tls_cert", errors.New("--grpc-tls-cert and --grpc-tls-key: give both, or neither"))
	}
	if c.GRPCClientCA != "" && c.GRPCTLSCert == "" {
		bad("grpc_client_ca", errors.New("mutual TLS needs the server's own TLS: give --grpc-tls-cert and --grpc-tls-key too"))
	}
	if c.GRPCTokens == "" && !c.InsecureNoAuth {
		const fix = "give --grpc-tokens (docs/security.md), listen on 127.0.0.1, or, knowing this, --insecure-no-auth"
		if c.GRPCAddr != "" && !auth.IsLoopbackTarget(c.GRPCAddr) {
			bad("grpc_addr", fmt.Errorf("%s is not a loopback address, and without --grpc-tokens anyone who reaches it may ask for decisions, "+
				"free reservations and read every call: %s", c.GRPCAddr, fix))
		}
		if host, _, err := net.SplitHostPort(c.HTTPAddr); err == nil && !auth.IsLoopbackHost(host) {
			bad("http_addr", fmt.Errorf("%s is not a loopback address, and without --grpc-tokens anyone who reaches it reads every call "+
				"on the /calls pages: %s", c.HTTPAddr, fix))
		}
	}
	if c.RedactDigits < 0 {
		bad("redact_digits", fmt.Errorf("must not be negative (0 masks no digits), got %d", c.RedactDigits))
	}
	pipeline := c.NATSPipelinePasswordFile != "" || c.NATSPipelinePassword != "" || c.NATSPipelineNkey != ""
	if c.NATSURL != "" && pipeline {
		bad("nats_pipeline_password_file", errors.New("the pipeline credential is for the embedded NATS server; with --nats-url, give the pipeline its user on that server (docs/security.md)"))
	}
	if c.NATSURL == "" && c.NATSAuth != (auth.NATSClientConfig{}) {
		bad("nats_creds", errors.New("--nats-creds, --nats-nkey, --nats-token-file, --nats-user, --nats-password-file and --nats-tls-* are for an external NATS server: give --nats-url too"))
	}
}

// checkHostPort accepts host:port with a numeric port (0 for any free
// port; -1 too when allowRandom, as nats-server spells it). The host may be
// empty (every interface).
func checkHostPort(addr string, allowRandom bool) error {
	if addr == "" {
		return errors.New("empty; want host:port")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	lowest := 0
	if allowRandom {
		lowest = -1
	}
	if err != nil || p < lowest || p > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// checkNATSURLs accepts what nats.Connect does: comma-separated URLs, with
// nats:// assumed when the scheme is missing.
func checkNATSURLs(urls string) error {
	var errs []error
	for _, raw := range strings.Split(urls, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			errs = append(errs, fmt.Errorf("empty URL in %q", auth.RedactURLs(urls)))
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		// Every message quotes the URL without its password or token, and
		// so must url.Parse's own error, which quotes it whole.
		shown := auth.RedactURLs(raw)
		u, err := url.Parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %s", shown, auth.RedactURLs(err.Error())))
			continue
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			errs = append(errs, fmt.Errorf("%q: scheme %q is not nats, tls, ws or wss", shown, u.Scheme))
			continue
		}
		if u.Hostname() == "" {
			errs = append(errs, fmt.Errorf("%q: no host", shown))
		}
	}
	return errors.Join(errs...)
}

// checkSubjectPrefix accepts dot-separated non-empty tokens without
// wildcards or white space, so that <prefix>.> subscribes to exactly the
// transcript subjects.
func checkSubjectPrefix(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("%q has an empty token", p)
		}
		if tok == "*" || tok == ">" || strings.ContainsAny(tok, "*>") {
			return fmt.Errorf("%q contains a wildcard", p)
		}
		if strings.IndexFunc(tok, unicode.IsSpace) >= 0 {
			return fmt.Errorf("%q contains white space", p)
		}
	}
	return nil
}
