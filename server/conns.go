package server

import (
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/yesguard/yesguard/metrics"
)

// What a connection may cost the process. Every listener (gRPC, HTTP and
// the embedded NATS server's clients) shares one file descriptor limit
// with the JetStream store, so that a client which opens connections and
// says nothing can never take the descriptors the others need:
//   - each listener holds at most Config.MaxConns connections (and never
//     more than a quarter of the descriptor limit); past it, new ones wait
//     in the kernel's accept queue until one closes;
//   - a gRPC connection that has not finished its HTTP/2 handshake (and
//     TLS) within handshakeTimeout is closed, as is an HTTP connection that
//     has not sent its request's headers within it;
//   - a connection idle (no call in progress) for Config.IdleTimeout is
//     closed; the server pings a gRPC connection silent for keepaliveTime
//     and closes it if no answer comes within keepaliveTimeout;
//   - a gRPC client may ping at most every keepaliveMinTime (more often
//     is answered with GOAWAY, too_many_pings).
const (
	handshakeTimeout = 5 * time.Second
	keepaliveTime    = time.Minute
	keepaliveTimeout = 20 * time.Second
	keepaliveMinTime = 10 * time.Second
	// httpReadTimeout bounds reading a whole HTTP request, its body
	// included.
	httpReadTimeout = 30 * time.Second
)

// Listener names, the label of ListenerConnections.
const (
	listenerGRPC = "grpc"
	listenerHTTP = "http"
)

// connBound is the number of connections one listener may hold: limit,
// and at most a quarter of the process's descriptor limit (nofile, 0: not
// known).
func connBound(limit int, nofile uint64) int {
	if nofile > 0 && uint64(limit) > nofile/4 {
		return int(max(nofile/4, 1))
	}
	return limit
}

// boundListener bounds ln to n connections at once, counted in gauge.
func boundListener(ln net.Listener, n int, gauge prometheus.Gauge) net.Listener {
	return netutil.LimitListener(countedListener{Listener: ln, open: gauge}, n)
}

// countedListener counts the connections it accepted that are still open.
type countedListener struct {
	net.Listener
	open prometheus.Gauge
}

func (l countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Inc()
	return &countedConn{Conn: c, open: l.open}, nil
}

type countedConn struct {
	net.Conn
	open prometheus.Gauge
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.open.Dec)
	return err
}

// connOptions are the gRPC server's handshake, idle and keepalive rules.
func connOptions(idle time.Duration) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idle, Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
	}
}

// newListenerMetrics registers the open connections gauge, each listener
// at zero.
func newListenerMetrics(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := metrics.NewGaugeVec(reg, metrics.ListenerConnections)
	for _, l := range []string{listenerGRPC, listenerHTTP} {
		g.WithLabelValues(l)
	}
	return g
}

// logFDLimit raises the process's file descriptor limit to its hard limit
// (Go's runtime does so too, on Unix), and logs what it is and what each
// listener may hold of it. It returns the limit (0: not known).
func (s *Server) logFDLimit() uint64 {
	soft, hard, err := raiseFDLimit()
	if err != nil {
		s.log.Warn("file descriptor limit not known", zap.Error(err))
		return 0
	}
	bound := connBound(s.cfg.MaxConns, soft)
	fields := []zap.Field{zap.Uint64("nofile", soft), zap.Uint64("nofile_hard", hard), zap.Int("max_conns_per_listener", bound)}
	if bound < s.cfg.MaxConns {
		s.log.Warn("the file descriptor limit bounds each listener below max_conns; raise the hard limit (ulimit -Hn, LimitNOFILE=)", fields...)
	} else {
		s.log.Info("file descriptors", fields...)
	}
	return soft
}
