package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/metrics"
)

// natsReadyTimeout bounds the wait for the embedded server when Start's
// context has no deadline.
const natsReadyTimeout = 10 * time.Second

// natsReadyStep is how often start-up looks for the embedded server's
// failure to listen while it waits for it.
const natsReadyStep = 50 * time.Millisecond

// startNATSServer starts the embedded NATS server on Config.NATSListen.
func (s *Server) startNATSServer(ctx context.Context) error {
	host, portStr, _ := net.SplitHostPort(s.cfg.NATSListen) // checked by Validate
	port, _ := strconv.Atoi(portStr)
	if port == 0 {
		port = natsserver.RANDOM_PORT
	}
	opts := &natsserver.Options{
		ServerName: "yesguard",
		Host:       host,
		Port:       port,
		NoSigs:     true,
		// Its clients share the process's file descriptors with gRPC and
		// HTTP (conns.go).
		MaxConn: s.connBound,
	}
	// The users: the pipeline (or, on a loopback server without a
	// pipeline credential, whoever connects, with the pipeline's rights)
	// and the guard, in-process only. Nobody else may publish or read
	// transcripts.
	if err := s.embedded.Apply(opts); err != nil {
		return err
	}
	for _, f := range s.nsOpts {
		f(opts)
	}
	if s.cfg.State == StateJetStream {
		// The store survives restarts: a plain `go run ./cmd/yesguard`
		// keeps its reservations, transcripts and records.
		opts.JetStream = true
		l, err := lockDataDir(s.cfg.DataDir) // released by stopNATSServer
		if err != nil {
			return err
		}
		s.dataDirLock = l
		opts.StoreDir = filepath.Join(s.cfg.DataDir, "jetstream")
		if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
			return fmt.Errorf("data_dir: %w", err)
		}
	}
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		if s.dataDirLock != nil {
			_ = s.dataDirLock.Unlock()
		}
		return fmt.Errorf("nats_listen: embedded NATS server: %w", err)
	}
	nlog := &natsLogger{log: s.log.Named("nats-server")}
	ns.SetLoggerV2(nlog, false, false, false)
	s.ns = ns
	ns.Start()

	// Wait in short steps, so that a failure to listen (reported to the
	// logger, not returned) ends the wait at once.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(natsReadyTimeout)
	}
	for !ns.ReadyForConnections(natsReadyStep) {
		if msg := nlog.lastFatal(); msg != "" {
			return fmt.Errorf("nats_listen: embedded NATS server on %s: %s", s.cfg.NATSListen, msg)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nats_listen: embedded NATS server on %s not ready in time", s.cfg.NATSListen)
		}
	}
	s.natsURL = clientURL(ns.Addr())
	s.warnEmbeddedPlaintext()
	return nil
}

// warnEmbeddedPlaintext warns when the embedded server listens beyond the
// loopback: it has no TLS, so the pipeline's password (an nkey sends
// none) and every transcript cross the network in clear. The embedded
// server is for one host or a container beside the pipeline; across a
// network, an external nats-server with TLS (--nats-url tls://...,
// --nats-tls-*) is the one TLS setup to keep, rather than a second one
// here.
func (s *Server) warnEmbeddedPlaintext() {
	if auth.IsLoopbackTarget(s.cfg.NATSListen) {
		return
	}
	s.log.Warn("the embedded NATS server listens beyond the loopback without TLS: the pipeline's password and every transcript "+
		"travel in clear. Keep it on a network only the guard and the pipeline share (a container network, a host-only bridge), "+
		"or use an external NATS server with TLS (docs/security.md)",
		zap.String("nats_listen", s.cfg.NATSListen))
}

// clientURL is the URL a local client reaches addr at: an unspecified host
// (0.0.0.0, ::) becomes the loopback address.
func clientURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "nats://" + addr.String()
	}
	ip := tcp.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	u := url.URL{Scheme: "nats", Host: net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))}
	return u.String()
}

// InboxPrefix is the prefix of the guard connection's reply subjects, so
// that NATS permissions can keep other users from reading its replies
// (JetStream acknowledgements, API answers).
const InboxPrefix = "_INBOX_yesguard"

// natsOptions are every option of the guard's NATS connection, in one
// place: its name, inbox prefix and reconnects, its handlers, and its
// credentials and TLS (the embedded server's guard nkey, or the external
// server's --nats-* files).
func (s *Server) natsOptions() []nats.Option {
	return append([]nats.Option{
		nats.Name("yesguard"),
		nats.CustomInboxPrefix(InboxPrefix),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		// No publish is buffered while disconnected: it fails at once (a
		// record is queued, a claim refused), and none is delivered late,
		// after its Check was answered (red team findings 16, 17).
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(func(nc *nats.Conn) {
			s.warnOpenNATS(nc) // first: a test waits for the next line
			s.log.Info("NATS connected", zap.String("url", nc.ConnectedUrlRedacted()))
			s.noteServer(nc)
			if s.graceOnConnect.Load() {
				s.startGrace("NATS became reachable after the guard started")
			}
			s.updateFeedHealth()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			s.downSince.Store(time.Now().UnixNano())
			if !s.stopping.Load() {
				s.log.Warn("NATS disconnected; refusing every Check until it is back", redactedError(err))
			}
			// Behind from now on: once the connection is back (which the
			// guard may see before this handler's twin on reconnect runs),
			// events published meanwhile are still to be applied.
			s.resync()
			s.updateFeedHealth()
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.metrics.reconnects.Inc()
			prev, down := s.noteServer(nc), time.Since(time.Unix(0, s.downSince.Load()))
			s.log.Info("NATS reconnected", zap.String("url", nc.ConnectedUrlRedacted()), zap.String("from", auth.RedactURLs(prev)), zap.Duration("down", down))
			if prev != "" && prev != nc.ConnectedUrl() && down < failoverWithin {
				s.startGraceFor("NATS failed over to another node of its cluster", min(s.cfg.ReconnectGrace, failoverGrace))
			} else {
				s.startGrace("NATS reconnected")
			}
			s.warnOpenNATS(nc) // perhaps another server of the cluster
			s.resync()
			s.updateFeedHealth()
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			s.metrics.errors.Inc()
			if errors.Is(err, nats.ErrSlowConsumer) && s.js == nil {
				// The core subscription dropped events of calls unknown:
				// fail closed on every call held until its agent speaks.
				n := s.store.MarkLost("transcript events were dropped (slow consumer): the guard may lack the caller's latest words")
				s.log.Error("NATS dropped transcript events (slow consumer); every call held is refused until its agent speaks again", zap.Int("calls", n))
			}
			fields := []zap.Field{redactedError(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			s.log.Warn("NATS error", fields...)
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			s.updateFeedHealth()
			s.ncClosedOnce.Do(func() { close(s.ncClosed) })
		}),
	}, s.natsAuth...)
}

// warnOpenNATS logs an error, on every connect to an external server,
// when that server asks no client for credentials (its INFO says
// auth_required false): then anyone who reaches it can publish a caller's
// "yes", read every call, and delete the guard's streams and keys. The
// embedded server always has users (auth.EmbeddedNATS). It warns rather
// than refuses: a developer's local nats-server -js is a fair test bed.
func (s *Server) warnOpenNATS(nc *nats.Conn) {
	if s.ns != nil || nc.AuthRequired() {
		return
	}
	s.log.Error("the NATS server lets any client in without credentials: anyone who can reach it can speak for the caller, "+
		"read every call and delete the guard's state; give it the accounts and users of docs/security.md "+
		"(\"NATS: an external server\") and yesguard --nats-user/--nats-password-file, --nats-creds or --nats-nkey",
		zap.String("url", nc.ConnectedUrlRedacted()))
}

// redactedError is err as a log field, with any URL's credentials hidden
// (a dialer's error quotes the URL it dialled).
func redactedError(err error) zap.Field {
	if err == nil {
		return zap.Skip()
	}
	return zap.String("error", auth.RedactURLs(err.Error()))
}

// connectNATS connects to the embedded server in-process, or to the
// external one. An external server that cannot be reached yet does not
// stop start-up: the connection keeps retrying, and meanwhile the guard
// refuses every Check and /readyz answers 503.
func (s *Server) connectNATS() error {
	opts := append(s.natsOptions(), s.natsOpts...)
	target := s.natsURL
	if s.ns != nil {
		opts = append(opts, nats.InProcessServer(s.ns))
	} else {
		opts = append(opts, nats.RetryOnFailedConnect(true))
	}
	// A connection made at once starts no grace; one the retries make later
	// does (NATS was down: the publishers too are reconnecting). The first
	// retry comes a reconnect wait after Connect returns, long after the
	// flag is set.
	nc, err := nats.Connect(target, opts...)
	if err != nil {
		return fmt.Errorf("nats_url: connect to %s: %s", auth.RedactURLs(target), auth.RedactURLs(err.Error()))
	}
	s.nc.Store(nc)
	if nc.IsConnected() {
		s.noteServer(nc)
	}
	if !nc.IsConnected() {
		s.graceOnConnect.Store(true)
		s.log.Warn("NATS not reachable yet; retrying", zap.String("url", auth.RedactURLs(target)))
	}
	s.updateFeedHealth()
	return nil
}

// connectIngest opens the gRPC transcript ingestion's connection to the
// embedded server (with the JetStream state only: without a stream nothing
// acknowledges an event): a pipeline user of the guard's own, so that
// PublishTranscript's events enter the transcript stream as a NATS
// pipeline's do, while the guard's user still may not publish
// transcripts. With an external NATS the guard holds no pipeline
// credential, and PublishTranscript is refused.
func (s *Server) connectIngest() error {
	if s.ns == nil || s.js == nil {
		return nil
	}
	opts := append(s.embedded.IngestOptions(),
		nats.Name("yesguard-grpc-transcripts"),
		nats.InProcessServer(s.ns),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		// A publish is acknowledged or fails: none is sent late.
		nats.ReconnectBufSize(-1))
	nc, err := nats.Connect(s.natsURL, opts...)
	if err != nil {
		return fmt.Errorf("connect the gRPC transcript ingestion to the embedded NATS server: %w", err)
	}
	s.ingestNC = nc
	return nil
}

// natsMetrics are the server's collectors of its NATS connection.
type natsMetrics struct {
	connected  prometheus.Gauge
	reconnects prometheus.Counter
	errors     prometheus.Counter
}

func newNATSMetrics(reg prometheus.Registerer) natsMetrics {
	return natsMetrics{
		connected:  metrics.NewGauge(reg, metrics.NATSConnected),
		reconnects: metrics.NewCounter(reg, metrics.NATSReconnects),
		errors:     metrics.NewCounter(reg, metrics.NATSErrors),
	}
}

// A failover: the guard's connection, lost less than failoverWithin ago,
// came back at once on another node of the cluster. The cluster stayed
// up, and the publishers that were on the lost node fail over as fast
// (nats.go, nats.py and nats.js try the other servers they know without
// waiting; the reconnect wait is between attempts at the same server), so
// the grace for what they buffered is failoverGrace, not the whole
// Config.ReconnectGrace. A reconnect to the same server (it restarted),
// or after a longer outage, gets the whole grace.
const (
	failoverWithin = time.Second
	failoverGrace  = time.Second
)

// noteServer records the server nc is connected to and returns the one
// recorded before.
func (s *Server) noteServer(nc *nats.Conn) string {
	cur := nc.ConnectedUrl()
	if prev := s.lastServer.Swap(&cur); prev != nil {
		return *prev
	}
	return ""
}

// startGrace starts the reconnect grace (Config.ReconnectGrace), why: the
// pipeline's publishers may still be reconnecting and flushing events they
// buffered while NATS was away, so the transcript the guard holds may lack
// them. It refuses every Check and keeps the health NOT_SERVING until the
// grace ends, when a timer updates the health.
func (s *Server) startGrace(why string) { s.startGraceFor(why, s.cfg.ReconnectGrace) }

// startGraceFor starts a reconnect grace of g.
func (s *Server) startGraceFor(why string, g time.Duration) {
	if g <= 0 {
		return
	}
	s.graceUntil.Store(time.Now().Add(g).UnixNano())
	s.graceLen.Store(int64(g))
	s.log.Info("reconnect grace: refusing every Check while the publishers reconnect and flush what they buffered",
		zap.String("why", why), zap.Duration("reconnect_grace", g))
	time.AfterFunc(g, s.updateFeedHealth)
	s.updateFeedHealth()
}

// inGrace says, during the reconnect grace, why the feed is behind; ""
// after it.
func (s *Server) inGrace(now time.Time) string {
	left := time.Duration(s.graceUntil.Load() - now.UnixNano())
	if left <= 0 {
		return ""
	}
	return "NATS came back moments ago; the pipeline's publishers may still be reconnecting and sending events they buffered meanwhile (reconnect grace " +
		time.Duration(s.graceLen.Load()).String() + ", " + left.Round(time.Millisecond).String() + " left)"
}

// feedState is the engine's view of the transcript feed.
func (s *Server) feedState() (guard.FeedState, string) {
	if !s.feedUp() {
		return guard.FeedDown, "the transcript feed (NATS) is not connected"
	}
	if why := s.inGrace(time.Now()); why != "" {
		return guard.FeedBehind, why
	}
	if s.js != nil {
		in := s.js.ingester.Load()
		if in == nil {
			if why := s.js.setUpError(); why != "" {
				return guard.FeedBehind, "the guard has not set up its JetStream state yet: " + why
			}
			return guard.FeedBehind, "the guard has not set up its JetStream state yet"
		}
		// Catching up after a start or a reconnect refuses. Lagging a
		// flood does not: a Check judges its own call, so it first settles
		// on every event of that call the stream holds (Settle, bounded by
		// the deadline); a flood on other calls delays its Checks instead
		// of refusing them all.
		if !in.CaughtUp() {
			return guard.FeedBehind, in.Behind(time.Now())
		}
		if why := in.Full(); why != "" {
			return guard.FeedBehind, why
		}
		if p := in.Pending(); p > 0 {
			return guard.FeedLagging, strconv.FormatUint(p, 10) + " transcript events pending"
		}
	}
	return guard.FeedLive, ""
}

// resync marks the transcript ingester behind until it has applied what the
// stream holds (the JetStream state only).
func (s *Server) resync() {
	if s.js != nil {
		if in := s.js.ingester.Load(); in != nil {
			in.Resync()
		}
	}
}

// serving reports whether the guard can judge: connected, and, with the
// JetStream state, set up and caught up with the transcript stream.
func (s *Server) serving() bool {
	if !s.feedUp() || s.inGrace(time.Now()) != "" {
		return false
	}
	if s.js == nil {
		return true
	}
	in := s.js.ingester.Load()
	return in != nil && in.CaughtUp() && in.Full() == ""
}

// feedUp reports whether the transcript feed is connected.
func (s *Server) feedUp() bool {
	nc := s.nc.Load()
	return nc != nil && nc.IsConnected()
}

// updateFeedHealth sets the connection gauge and the guard's health status
// from the connection's state now. Connection callbacks call it after each
// change, so the last call sees the latest state.
func (s *Server) updateFeedHealth() {
	s.feedMu.Lock()
	defer s.feedMu.Unlock()
	status := healthgrpc.HealthCheckResponse_NOT_SERVING
	if s.feedUp() {
		s.metrics.connected.Set(1)
	} else {
		s.metrics.connected.Set(0)
	}
	if s.serving() {
		status = healthgrpc.HealthCheckResponse_SERVING
	}
	// After Stop's health.Shutdown this is ignored.
	s.health.SetServingStatus(GuardService, status)
}

// closeNATS drains the connection (the ingester has already drained its
// subscription), bounded by ctx.
func (s *Server) closeNATS(ctx context.Context, nc *nats.Conn) error {
	if err := nc.Drain(); err != nil {
		// Not connected (or closed already): nothing to drain.
		nc.Close()
	}
	select {
	case <-s.ncClosed:
		return nil
	case <-ctx.Done():
		nc.Close()
		return fmt.Errorf("drain NATS connection: %w", ctx.Err())
	}
}

// embeddedShutdownGrace is how long Stop still waits for the embedded
// server once its own deadline has passed: the data directory's lock is
// released only when the server has let go of the store, and a Stop that
// returned with the lock still held would leave the next guard in this
// process (a restart, an embedding program) refused the directory.
const embeddedShutdownGrace = 10 * time.Second

// stopNATSServer shuts the embedded server down, bounded by ctx, and
// releases the data directory's lock before it returns. Past ctx's
// deadline it waits up to embeddedShutdownGrace more for the server (a
// local shutdown, normally milliseconds); a server still not down then
// is an error, and keeps the lock until it is.
func (s *Server) stopNATSServer(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		if s.dataDirLock != nil {
			_ = s.dataDirLock.Unlock()
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	grace := time.NewTimer(embeddedShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
		return fmt.Errorf("shut down embedded NATS server: %w; still shutting down after %s more, the data_dir stays locked until it has", ctx.Err(), embeddedShutdownGrace)
	}
}

// natsLogger routes the embedded server's log to zap: its notices are
// debug lines, warnings and errors stay what they are, and a fatal error
// (it does not exit the process here) is kept for Start's error.
type natsLogger struct {
	log   *zap.Logger
	mu    sync.Mutex
	fatal string
}

func (l *natsLogger) Noticef(format string, v ...any) { l.log.Sugar().Debugf(format, v...) }
func (l *natsLogger) Warnf(format string, v ...any) {
	if strings.HasPrefix(format, "Plaintext passwords detected") {
		// The loopback default's anonymous pipeline user has a random
		// password nobody is told; the pipeline's own is the operator's
		// (a bcrypt hash in the file keeps it out of the guard's memory).
		l.log.Sugar().Debugf(format, v...)
		return
	}
	l.log.Sugar().Warnf(format, v...)
}
func (l *natsLogger) Errorf(format string, v ...any) { l.log.Sugar().Errorf(format, v...) }
func (l *natsLogger) Debugf(format string, v ...any) { l.log.Sugar().Debugf(format, v...) }
func (l *natsLogger) Tracef(format string, v ...any) {}

func (l *natsLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.mu.Lock()
	l.fatal = msg
	l.mu.Unlock()
	l.log.Error(msg)
}

func (l *natsLogger) lastFatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

var _ natsserver.Logger = (*natsLogger)(nil)
