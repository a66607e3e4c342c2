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
//	State           state
//	DataDir         data_dir
//	JSReplicas      js_replicas
//	TranscriptRetention transcript_retention
//	TranscriptMaxBytes  transcript_max_bytes
//	DuplicateWindow     duplicate_window
//	DecisionRetention   decision_retention
//	DecisionMaxBytes    decision_max_bytes
//	DecisionsPerCall    decisions_per_call
//	ApprovalKeyFiles    approval_key_file (repeatable)
//	ApprovalKeyDir      approval_key_dir
//	ApprovalIssuer      approval_issuer
//	Limits          limits.<field> (no flags yet)
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
	// HTTPAddr is the host:port serving /metrics, /healthz, /readyz and
	// the call pages (/calls, package timeline).
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
	// jetstream, no NATSURL). Default DefaultDataDir().
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
	// and the last one applied was stored longer ago than this, Checks
	// refuse (REASON_TRANSCRIPT_GAP). Default 1s. (No flag: tests and
	// benchmarks set it.)
	TranscriptMaxLag time.Duration
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
	if c.DecisionMaxBytes == 0 {
		c.DecisionMaxBytes = DefaultDecisionMaxBytes
	}
	if c.DecisionsPerCall == 0 {
		c.DecisionsPerCall = DefaultDecisionsPerCall
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
		{"limits.max_utterances", int64(c.Limits.MaxUtterances)},
		{"limits.idle_ttl", int64(c.Limits.IdleTTL)},
		{"limits.ended_ttl", int64(c.Limits.EndedTTL)},
		{"limits.max_calls", int64(c.Limits.MaxCalls)},
	} {
		if f.v <= 0 {
			bad(f.key, fmt.Errorf("must be above 0, got %d", f.v))
		}
	}
	return errors.Join(errs...)
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
			errs = append(errs, fmt.Errorf("empty URL in %q", urls))
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", raw, err))
			continue
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			errs = append(errs, fmt.Errorf("%q: scheme %q is not nats, tls, ws or wss", raw, u.Scheme))
			continue
		}
		if u.Hostname() == "" {
			errs = append(errs, fmt.Errorf("%q: no host", raw))
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
