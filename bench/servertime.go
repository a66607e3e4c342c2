package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/stats"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// serverTimer is a gRPC stats handler on the in-process guard: it times
// each RPC on the server's side, so the overhead rows can say how much of
// a Check's time on the wire the guard spends on it. Two spans an RPC:
//
//   - server: from the server's first look at the RPC (stats.Begin, its
//     headers read) to its end (stats.End, the answer handed to the
//     transport);
//   - handler: from the request decoded (stats.InPayload) to the answer
//     sent (stats.OutPayload): the guard's own work, then the answer's
//     headers and encoding.
//
// RPCs are told apart by kind: "health", and for Checks the first word of
// the call id ("allow", "refuse"), which is how the bench names its calls.
type serverTimer struct {
	// on is read by every RPC; off, the handler only tags nothing.
	on      atomic.Bool
	mu      sync.Mutex
	server  map[string]lat
	handler map[string]lat
}

type rpcTimes struct {
	kind                  string
	begin, in, out, ended time.Time
}

type rpcKey struct{}

func newServerTimer() *serverTimer {
	return &serverTimer{server: map[string]lat{}, handler: map[string]lat{}}
}

// start clears what was timed and starts keeping times.
func (t *serverTimer) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.server)
	clear(t.handler)
	t.on.Store(true)
}

// stop stops keeping times and returns them by kind.
func (t *serverTimer) stop() (server, handler map[string]lat) {
	t.on.Store(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.server, t.handler
}

func (t *serverTimer) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if !t.on.Load() {
		return ctx
	}
	kind := ""
	if strings.HasPrefix(info.FullMethodName, "/grpc.health.v1.Health/") {
		kind = "health"
	}
	return context.WithValue(ctx, rpcKey{}, &rpcTimes{kind: kind})
}

func (t *serverTimer) HandleRPC(ctx context.Context, s stats.RPCStats) {
	rt, _ := ctx.Value(rpcKey{}).(*rpcTimes)
	if rt == nil {
		return
	}
	// The stats of one RPC come from its own goroutines in order, so rt
	// needs no lock of its own.
	switch s := s.(type) {
	case *stats.Begin:
		rt.begin = s.BeginTime
	case *stats.InPayload:
		rt.in = s.RecvTime
		if req, ok := s.Payload.(*yesguardv1.CheckRequest); ok {
			rt.kind, _, _ = strings.Cut(req.GetCallId(), "-")
		}
	case *stats.OutPayload:
		rt.out = s.SentTime
	case *stats.End:
		rt.ended = s.EndTime
		t.record(rt)
	}
}

func (t *serverTimer) record(rt *rpcTimes) {
	if rt.kind == "" || rt.begin.IsZero() || rt.in.IsZero() || rt.out.IsZero() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on.Load() {
		return
	}
	t.server[rt.kind] = append(t.server[rt.kind], rt.ended.Sub(rt.begin))
	t.handler[rt.kind] = append(t.handler[rt.kind], rt.out.Sub(rt.in))
}

func (t *serverTimer) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (t *serverTimer) HandleConn(context.Context, stats.ConnStats) {}
