// Package server is yesguard as an embeddable service: it wires the
// transcript feed (NATS, embedded or external), the engine (guard) and its
// gRPC service, the dedupe book, the decision store and the decision log
// behind one gRPC listener and one HTTP listener, and owns their
// lifecycle. With the JetStream state (the default) the book, the store,
// the approvals' redeem ledger and the transcript live in JetStream,
// shared by every replica on the NATS; with the memory state, in this
// process. The approval keys come from files (or the data directory,
// where the first start generates one); the HTTP listener publishes their
// public half at /.well-known/jwks.json, and Reload (SIGHUP) rotates them.
// The yesguard command only parses flags into a Config and runs a Server;
// tests run one in-process on 127.0.0.1:0.
//
// Rules that hold:
//   - A bad config, policy, locale or approval key (none that signs now
//     included) stops New with an error naming the field; nothing is
//     listening yet.
//   - Stop is bounded by its context and by Config.ShutdownTimeout, runs
//     once, and tears down in order: health NOT_SERVING, gRPC graceful stop
//     (in-flight Checks finish), HTTP shutdown, transcript ingester, the
//     JetStream state (the decision records still queued get the time
//     left), decision log flush, NATS connection, embedded NATS server.
//   - A panic in a gRPC handler becomes codes.Internal for that call; it
//     never takes the process down.
//   - While the NATS connection is down, during the reconnect grace after
//     it comes back, and, with the JetStream state, until the streams and
//     the bucket are set up and the transcript stream is caught up after a
//     start or a reconnect (Start waits at most catchUpStartWait for that,
//     then listens), /readyz answers 503 with why and the
//     gRPC health status of yesguard.v1.Guard is NOT_SERVING; the overall
//     status ("") stays SERVING while the process serves. The guard itself
//     refuses every Check meanwhile (fail closed).
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisionlog"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/metrics"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/redact"
	"github.com/yesguard/yesguard/service"
	"github.com/yesguard/yesguard/timeline"
	"github.com/yesguard/yesguard/transcript"
)

var _ service.CallerSink = (*decisionlog.Logger)(nil)

// GuardService is the gRPC service name whose health tracks the transcript
// feed.
const GuardService = "yesguard.v1.Guard"

// Sweep intervals of the background sweepers.
const (
	storeSweepEvery     = 10 * time.Second
	bookSweepEvery      = 5 * time.Second
	decisionsSweepEvery = time.Minute
)

// natsReconnectWait is the pause between reconnect attempts to NATS.
const natsReconnectWait = 250 * time.Millisecond

// natsFlushTimeout bounds Start's wait for NATS to confirm the transcript
// subscription.
const natsFlushTimeout = 5 * time.Second

// jsStartTimeout bounds Start's wait for the JetStream state when NATS is
// reachable.
const jsStartTimeout = 30 * time.Second

// catchUpStartWait bounds how long Start waits, once the JetStream state is
// set up, for the transcript to be caught up before it listens. A replay
// longer than that (a restart after a busy ten minutes) goes on while the
// guard listens: /healthz answers, health is NOT_SERVING and /readyz 503
// with how far it is, and every Check refuses (TRANSCRIPT_GAP) until it is
// caught up. Start never fails for a slow replay.
const catchUpStartWait = 5 * time.Second

// ErrStarted is returned by Start on a server already started or stopped.
var ErrStarted = errors.New("server already started or stopped")

// Option configures a Server beyond its Config.
type Option func(*options)

type options struct {
	log      *zap.Logger
	reg      *prometheus.Registry
	sink     service.DecisionSink
	grpcOpts []grpc.ServerOption
	tokens   *auth.Tokens
	natsOpts []nats.Option
	nsOpts   []func(*natsserver.Options)
	local    func() time.Time // the host's wall clock (tests skew it); nil: time.Now
}

// WithEmbeddedNATSOptions edits the embedded NATS server's options after
// the guard has set them (its users included): a benchmark adds a user of
// its own to measure the bare server beside the guard. Never needed in
// production; a user added here is not bound by the pipeline's
// permissions.
func WithEmbeddedNATSOptions(f func(*natsserver.Options)) Option {
	return func(o *options) { o.nsOpts = append(o.nsOpts, f) }
}

// WithNATSOptions adds options to the guard's NATS connection, after its
// own (natsOptions): credentials, TLS, or a test's restrictions.
func WithNATSOptions(opts ...nats.Option) Option {
	return func(o *options) { o.natsOpts = append(o.natsOpts, opts...) }
}

// WithLogger sets the operational logger. Without it New builds a JSON
// logger on stderr at Config.LogLevel.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithRegistry registers the metrics on reg and serves reg on /metrics,
// instead of a fresh registry with the Go and process collectors.
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.reg = reg } }

// WithDecisionSink sends decision records to sink instead of the decision
// log named by Config.DecisionLog. The server does not close it.
func WithDecisionSink(sink service.DecisionSink) Option {
	return func(o *options) { o.sink = sink }
}

// WithGRPCServerOptions adds options to the gRPC server, after the
// server's own panic-recovery interceptors: interceptors (the bench times
// the guard's handlers with one), a stats handler for tracing, keepalive
// parameters, credentials.
func WithGRPCServerOptions(opts ...grpc.ServerOption) Option {
	return func(o *options) { o.grpcOpts = append(o.grpcOpts, opts...) }
}

// WithTimelineTokens puts the call timeline pages (/calls) behind the
// auditor role of tokens, as ListDecisions is.
func WithTimelineTokens(tokens *auth.Tokens) Option { return func(o *options) { o.tokens = tokens } }

// Server is one yesguard. Build it with New, then Start and Stop it once.
type Server struct {
	cfg      Config
	grpcOpts []grpc.ServerOption         // from WithGRPCServerOptions
	natsOpts []nats.Option               // from WithNATSOptions
	nsOpts   []func(*natsserver.Options) // from WithEmbeddedNATSOptions
	log      *zap.Logger
	ownLog   bool
	gatherer prometheus.Gatherer
	metrics  natsMetrics
	reg      prometheus.Registerer
	store    *transcript.Store
	tmetrics *transcript.Metrics
	// book and records are the memory state (state memory) or the
	// JetStream state's (state jetstream), which js sets up.
	book       dedupe.Book
	records    decisions.Store
	memBook    *dedupe.Memory    // state memory only
	memRecords *decisions.Memory // state memory only
	js         *jsState          // state jetstream only
	guard      *guard.Guard
	service    *service.Service
	approvals  *approvals
	dlog       *decisionlog.Logger // nil when the sink came from WithDecisionSink
	timeline   *timeline.Handler

	// Security (security.go): who may call what, over which transport,
	// and what the records keep.
	tokens     *auth.Tokens       // nil: no token file, every method open
	tls        *auth.ServerTLS    // nil: plaintext gRPC
	authz      *auth.Authorizer   // always: it puts the caller's Identity in the context
	embedded   *auth.EmbeddedNATS // the embedded server's users; nil with NATSURL
	natsAuth   []nats.Option      // the guard's credentials and TLS for NATS
	redactor   *redact.Redactor
	secMetrics securityMetrics
	// replica names this process in its records and ledger entries.
	replica string
	// conns counts each listener's open connections; connBound is what
	// each may hold (conns.go), set by Start.
	conns     *prometheus.GaugeVec
	connBound int

	// reloadMu serialises Reload.
	reloadMu sync.Mutex

	// mu guards state; Start holds it throughout, so that the fields Start
	// sets are visible to Stop, which takes it first.
	mu    sync.Mutex
	state int

	// Set by Start.
	ns           *natsserver.Server
	dataDirLock  *flock.Flock // the --data-dir's, while ns may use it (datadir.go)
	clock        natsClock    // the engine's clock: NATS's, with the JetStream state (clock.go)
	nc           atomic.Pointer[nats.Conn]
	auditNC      atomic.Pointer[nats.Conn] // the decision records' reads (auditJetStream)
	ncClosed     chan struct{}             // closed by the connection's closed handler
	ncClosedOnce sync.Once
	ingester     *transcript.Ingester
	ingestNC     *nats.Conn // the gRPC ingestion's, embedded JetStream state only (nats.go)
	health       *health.Server
	grpc         *grpc.Server
	http         *http.Server
	grpcLn       net.Listener
	httpLn       net.Listener
	natsURL      string
	sweepCancel  context.CancelFunc
	setupCancel  context.CancelFunc // ends the JetStream set-up
	// wg counts the serving loops and the sweepers.
	wg sync.WaitGroup

	// graceUntil (unix ns) ends the reconnect grace (Config.ReconnectGrace):
	// until then the feed is behind. graceOnConnect: the first connection
	// came late (NATS was unreachable at start), so it starts a grace too.
	graceUntil     atomic.Int64
	graceLen       atomic.Int64 // the grace running, ns
	graceOnConnect atomic.Bool
	// lastServer is the URL of the NATS server last connected to;
	// downSince (unix ns) when the connection was last lost.
	lastServer atomic.Pointer[string]
	downSince  atomic.Int64
	// catchUpWait, when set (tests), replaces catchUpStartWait.
	catchUpWait *time.Duration

	// feedMu serialises updates of the feed's health, so the last update
	// reflects the latest connection state.
	feedMu   sync.Mutex
	stopping atomic.Bool
	errc     chan error

	stopOnce sync.Once
	stopErr  error
}

const (
	stateNew = iota
	stateStarted
	stateStopped
)

// New validates cfg, loads the policy and the locales, and builds the
// guard. Nothing listens until Start.
func New(cfg Config, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}

	s := &Server{cfg: cfg, log: o.log, grpcOpts: o.grpcOpts, natsOpts: o.natsOpts, nsOpts: o.nsOpts, ncClosed: make(chan struct{}), errc: make(chan error, 1)}
	s.clock.local = o.local
	if s.log == nil {
		log, err := NewLogger(cfg.LogLevel, nil, false)
		if err != nil {
			return nil, fmt.Errorf("log_level: %w", err)
		}
		s.log, s.ownLog = log, true
	}

	policy, locales, err := loadRules(&cfg)
	if err != nil {
		return nil, err
	}
	warnSharedObjects(s.log, policy)

	// Each part registers its own collectors on reg.
	reg := o.reg
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.gatherer, s.reg = reg, reg
	s.metrics = newNATSMetrics(reg)
	s.conns = newListenerMetrics(reg)
	bi := ReadBuildInfo()
	metrics.NewGaugeVec(reg, metrics.BuildInfo).WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)

	if err := s.setUpSecurity(reg); err != nil {
		return nil, err
	}

	s.tmetrics = transcript.NewMetrics(reg)
	s.store = transcript.NewStore(cfg.Limits, s.tmetrics)
	metrics.NewGaugeFunc(reg, metrics.StoreBytes, func() float64 { return float64(s.store.Bytes()) })
	if cfg.State == StateMemory {
		s.memBook = dedupe.NewMemory(reg)
		s.memRecords = decisions.NewMemory(decisions.MemoryLimits{
			MaxPerCall: cfg.DecisionsPerCall, MaxBytes: cfg.DecisionMaxBytes, TTL: cfg.DecisionRetention})
		s.book, s.records = s.memBook, s.memRecords
		s.log.Warn("state memory: reservations, evidence uses and decision records are held in this process only. " +
			"Run one replica: a second one would allow the same action again, and a restart forgets them. Use --state jetstream for replicas and restarts")
	} else {
		s.js = &jsState{ready: make(chan struct{}), noJetStream: make(chan struct{})}
		s.js.registerMetrics(reg)
		s.book, s.records = stateBook{s.js}, stateStore{s.js}
	}
	s.replica = replicaName()
	if err := s.newApprovals(); err != nil {
		return nil, err
	}

	sink := o.sink
	if sink == nil {
		s.dlog, err = decisionlog.Open(cfg.DecisionLog, decisionlog.NewMetrics(reg), decisionlog.WithLogger(s.log.Named("decisionlog")))
		if err != nil {
			return nil, fmt.Errorf("decision_log: %w", err)
		}
		sink = s.dlog
	}

	s.guard, err = guard.New(guard.Config{
		Policy:     policy,
		Locales:    locales,
		Store:      s.store,
		Book:       s.book,
		Feed:       s.feedState,
		Settle:     s.settle,
		Now:        s.clock.Now,
		Registerer: reg,
		Logger:     s.log.Named("guard"),
	})
	if err != nil {
		if s.dlog != nil {
			_ = s.dlog.Close(context.Background()) // nothing was written
		}
		return nil, fmt.Errorf("policy %q with locales_dir %q: %w", cfg.PolicyPath, cfg.LocalesDir, err)
	}
	var events func(context.Context, string) ([]*yesguardv1.ReceivedEvent, error)
	if s.js != nil {
		events = s.callEvents
	}
	var transcripts service.TranscriptWriter
	if s.js != nil && cfg.NATSURL == "" {
		transcripts = stateWriter{s.js}
	}
	s.service = service.New(service.Config{
		Engine:      s.guard,
		Book:        s.book,
		Store:       s.records,
		Sink:        sink,
		Replica:     s.replica,
		Approvals:   s.approvals.svc,
		Registerer:  reg,
		Logger:      s.log.Named("service"),
		Redact:      s.redactDecision,
		RedactTurns: s.redactor.Turns,
		Events:      events,
		Transcripts: transcripts,
	})
	pageTokens := o.tokens
	if pageTokens == nil {
		pageTokens = s.tokens // the call pages are behind the auditor role, as ListDecisions is
	}
	s.timeline = timeline.New(timeline.Config{Decisions: s.service, Recent: s.records, Tokens: pageTokens, Logger: s.log.Named("timeline")})
	return s, nil
}

// replicaName names this process in the records it writes: host and pid.
func replicaName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// warnSharedObjects logs each object and verb two confirmed tools share: allowed,
// but it makes questions about it refused for both.
func warnSharedObjects(log *zap.Logger, p *guard.Policy) {
	for _, w := range p.Warnings() {
		log.Warn("policy: " + w)
	}
}

// loadRules reads the policy and the locales, reporting both failures.
func loadRules(cfg *Config) (*guard.Policy, *patterns.Set, error) {
	var errs []error
	policy, err := guard.LoadPolicy(cfg.PolicyPath)
	if err != nil {
		errs = append(errs, fmt.Errorf("policy: %w", err))
	}
	locales, err := patterns.Load(cfg.LocalesDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("locales_dir: %w", err))
	}
	return policy, locales, errors.Join(errs...)
}

// Reload re-reads the policy and the locales, the token file, the gRPC
// TLS files and the approval keys (a rotation), and swaps each in; Checks
// under way finish with the rules they started with, connections made keep
// their keys. Each part that fails keeps what it had, is counted
// (yesguard_reload_errors_total) and is in the returned error; the others
// are reloaded all the same.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	var errs []error
	if err := s.reloadRules(); err != nil {
		s.secMetrics.reloadErrors.WithLabelValues("policy").Inc()
		errs = append(errs, err)
	}
	errs = append(errs, s.reloadSecurity()...)
	if err := s.reloadApprovalKeys(); err != nil {
		s.secMetrics.reloadErrors.WithLabelValues("approval_keys").Inc()
		errs = append(errs, fmt.Errorf("the old approval keys stay: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	return nil
}

func (s *Server) reloadRules() error {
	policy, locales, err := loadRules(&s.cfg)
	if err == nil {
		err = s.guard.Reload(policy, locales)
	}
	if err != nil {
		return fmt.Errorf("the old policy and locales stay: %w", err)
	}
	warnSharedObjects(s.log, policy)
	s.log.Info("policy and locales reloaded",
		zap.String("policy_version", policy.Version()),
		zap.String("locales_version", locales.Version()))
	return nil
}

// Start starts the embedded NATS server (unless Config.NATSURL is set),
// connects to NATS, subscribes to the transcripts, and starts the gRPC and
// HTTP servers and the sweepers. ctx bounds the start-up only. On error
// everything started is stopped again.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.state != stateNew {
		s.mu.Unlock()
		return ErrStarted
	}
	s.state = stateStarted
	err := s.start(ctx)
	s.mu.Unlock()
	if err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
		defer cancel()
		return errors.Join(err, s.Stop(stopCtx))
	}
	return nil
}

func (s *Server) start(ctx context.Context) error {
	// Until the feed is connected, the guard's health says NOT_SERVING.
	s.health = health.NewServer()
	s.health.SetServingStatus("", healthgrpc.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(GuardService, healthgrpc.HealthCheckResponse_NOT_SERVING)

	s.connBound = connBound(s.cfg.MaxConns, s.logFDLimit())
	if s.cfg.NATSURL == "" {
		if err := s.startNATSServer(ctx); err != nil {
			return err
		}
	} else {
		s.natsURL = s.cfg.NATSURL
	}
	if err := s.connectNATS(); err != nil {
		return err
	}
	if err := s.connectIngest(); err != nil {
		return err
	}
	if s.js == nil {
		s.ingester = transcript.NewIngester(s.nc.Load(), s.cfg.SubjectPrefix, s.store, s.cfg.Limits, s.log, s.tmetrics)
		if err := s.ingester.Start(); err != nil {
			return fmt.Errorf("start transcript ingester: %w", err)
		}
		// A round trip to NATS, so that the server holds the subscription
		// before the gRPC server (and its health service) listens: a
		// transcript published once the guard reports healthy is never
		// missed. A server not reachable yet gets the subscription when the
		// connection is made.
		if nc := s.nc.Load(); nc.IsConnected() {
			if err := nc.FlushTimeout(natsFlushTimeout); err != nil {
				s.log.Warn("NATS did not confirm the transcript subscription; it is sent again on reconnect", zap.Error(err))
			}
		}
	} else {
		// The streams and the bucket are set up in the background, so that
		// an external NATS unreachable now does not stop start-up; when
		// NATS is reachable, start-up waits for them and for the transcript
		// to be caught up, so the guard serves from its first Check.
		setupCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.setupCancel = cancel
		s.wg.Go(func() { s.setUpJetStream(setupCtx) })
		if s.nc.Load().IsConnected() {
			wctx, cancel := context.WithTimeout(ctx, jsStartTimeout)
			err := s.waitJetStream(wctx)
			cancel()
			if err != nil {
				return fmt.Errorf("set up the JetStream state (streams %s, %s, bucket %s): %w", TranscriptStreamName(s.cfg.SubjectPrefix), DecisionStream, StateBucket, err)
			}
			s.waitCaughtUp(ctx)
		}
	}

	var err error
	ln, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("grpc_addr: %w", err)
	}
	s.grpcLn = boundListener(ln, s.connBound, s.conns.WithLabelValues(listenerGRPC))
	// The authorizer runs first after the panic recovery, so that nothing
	// else runs for a refused call.
	gopts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.recoverUnary, s.authz.UnaryInterceptor),
		grpc.ChainStreamInterceptor(s.recoverStream, s.authz.StreamInterceptor),
	}, connOptions(s.cfg.IdleTimeout)...)
	if s.tls != nil {
		gopts = append(gopts, s.tls.ServerOption())
	}
	s.grpc = grpc.NewServer(append(gopts, s.grpcOpts...)...)
	yesguardv1.RegisterGuardServer(s.grpc, s.service)
	if !s.cfg.NoGRPCHealth {
		healthgrpc.RegisterHealthServer(s.grpc, s.health)
	}
	if !s.cfg.NoGRPCReflection {
		reflection.Register(s.grpc)
	}
	s.wg.Go(func() {
		if err := s.grpc.Serve(s.grpcLn); err != nil {
			s.fail(fmt.Errorf("grpc server: %w", err))
		}
	})

	if s.cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http_addr: %w", err)
		}
		s.httpLn = boundListener(ln, s.connBound, s.conns.WithLabelValues(listenerHTTP))
		errLog, err := zap.NewStdLogAt(s.log.Named("http"), zap.WarnLevel)
		if err != nil {
			return fmt.Errorf("http error log: %w", err)
		}
		s.http = &http.Server{
			Handler:           s.httpHandler(),
			ReadHeaderTimeout: handshakeTimeout,
			ReadTimeout:       httpReadTimeout,
			IdleTimeout:       s.cfg.IdleTimeout,
			ErrorLog:          errLog,
		}
		s.wg.Go(func() {
			if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.fail(fmt.Errorf("http server: %w", err))
			}
		})
	}

	sweepCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.sweepCancel = cancel
	for _, sw := range []struct {
		every time.Duration
		sweep func(time.Time) int
	}{
		{storeSweepEvery, s.store.Sweep},
		{bookSweepEvery, s.sweepBook},
		{decisionsSweepEvery, s.sweepRecords},
	} {
		s.wg.Go(func() { runEvery(sweepCtx, sw.every, sw.sweep) })
	}
	return nil
}

// sweepBook sweeps the memory book, or the KV book's mirror.
func (s *Server) sweepBook(now time.Time) int {
	if s.memBook != nil {
		return s.memBook.Sweep(now)
	}
	if b := s.js.book.Load(); b != nil {
		return b.Sweep(now)
	}
	return 0
}

// sweepRecords sweeps the memory decision store (the stream has its own
// limits).
func (s *Server) sweepRecords(now time.Time) int {
	if s.memRecords != nil {
		return s.memRecords.Sweep(now)
	}
	return 0
}

// runEvery calls sweep every interval until ctx is done: what bounds the
// per-call state between calls' ends and their eviction.
func runEvery(ctx context.Context, every time.Duration, sweep func(time.Time) int) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			sweep(now)
		}
	}
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case s.stopping.Load():
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case !s.feedUp():
			http.Error(w, "transcript feed (NATS) disconnected", http.StatusServiceUnavailable)
		case !s.serving():
			// Why, as the Checks' refusals say it: the reconnect grace,
			// catching up, or the JetStream state not set up (and why not).
			why := "catching up with the transcript stream, or the JetStream state is not set up yet"
			if _, w := s.feedState(); w != "" {
				why = w
			}
			http.Error(w, why, http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	// What to put in the model's instructions for the policy in force
	// (`yesguard prompt`, for clients): ?tool= and ?lang= narrow it.
	mux.HandleFunc("GET /prompt", func(w http.ResponseWriter, r *http.Request) {
		out, err := s.guard.Prompt(r.URL.Query().Get("tool"), r.URL.Query().Get("lang"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(out))
	})
	// The approvals' public keys, for backends to verify offline.
	mux.Handle(approval.JWKSPath, approval.JWKSHandler(s.approvals.keys, 0))
	pages := s.protectPages(s.timeline)
	mux.Handle(timeline.Path, pages)
	mux.Handle(timeline.Path+"/", pages)
	return mux
}

// fail reports the first error that ended a serving loop on Err.
func (s *Server) fail(err error) {
	select {
	case s.errc <- err:
	default:
	}
}

// Err delivers the first error that stopped a listener while the server
// ran (not those of Stop). The server is not stopped by it: call Stop.
func (s *Server) Err() <-chan error { return s.errc }

// GRPCAddr is the address the gRPC server listens on: the bound one once
// Start has returned (so port 0 shows the port picked), the configured one
// before. Like HTTPAddr and NATSURL, do not call it during Start.
func (s *Server) GRPCAddr() string {
	if s.grpcLn != nil {
		return s.grpcLn.Addr().String()
	}
	return s.cfg.GRPCAddr
}

// HTTPAddr is the address the HTTP server listens on, like GRPCAddr; empty
// when it is disabled.
func (s *Server) HTTPAddr() string {
	if s.httpLn != nil {
		return s.httpLn.Addr().String()
	}
	return s.cfg.HTTPAddr
}

// NATSURL is the URL a pipeline publishes transcripts to: the embedded
// server's client URL after Start, or Config.NATSURL.
func (s *Server) NATSURL() string {
	if s.natsURL != "" {
		return s.natsURL
	}
	return s.cfg.NATSURL
}

// Stop shuts the server down in the order the package comment gives,
// bounded by ctx and Config.ShutdownTimeout. In-flight Checks get the time
// left but a reserve, which the decision log's flush keeps. Calls after the
// first return its result. Stop before Start releases what New opened.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.state = stateStopped
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
		s.stopErr = s.shutdown(ctx)
	})
	return s.stopErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	var errs []error

	if s.health != nil {
		s.health.Shutdown()
	}
	if s.grpc != nil {
		graceCtx, cancel := withReserve(ctx)
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-graceCtx.Done():
			s.grpc.Stop()
			<-done
			errs = append(errs, fmt.Errorf("grpc: calls still running at the deadline were cut: %w", graceCtx.Err()))
		}
		cancel()
	}
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			_ = s.http.Close()
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if s.sweepCancel != nil {
		s.sweepCancel()
	}
	if nc := s.nc.Load(); nc != nil && !nc.IsConnected() {
		// A subscription cannot drain without a server; closing the
		// connection ends it, and the ingester's Stop returns at once.
		nc.Close()
	}
	if s.setupCancel != nil {
		s.setupCancel()
	}
	if s.ingester != nil {
		if err := s.ingester.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop transcript ingester: %w", err))
		}
	}
	if s.ingestNC != nil {
		// gRPC has stopped: no PublishTranscript is under way.
		s.ingestNC.Close()
	}
	if s.js != nil {
		if err := s.stopJetStream(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop the JetStream state: %w", err))
		}
	}
	if s.dlog != nil {
		if err := s.dlog.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if nc := s.nc.Load(); nc != nil {
		if err := s.closeNATS(ctx, nc); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ns != nil {
		if err := s.stopNATSServer(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Every server is stopped and the sweepers cancelled: the loops return.
	s.wg.Wait()
	s.metrics.connected.Set(0)
	if s.ownLog {
		_ = s.log.Sync() // stderr cannot be synced everywhere
	}
	return errors.Join(errs...)
}

// withReserve returns a context ending a reserve before ctx does, so that
// the steps after the gRPC stop (the decision log's flush above all) keep
// some time when calls hold the graceful stop up: a quarter of the time
// left, at most 2s.
func withReserve(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	reserve := min(time.Until(deadline)/4, 2*time.Second)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}
