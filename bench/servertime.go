package main

import (
	"context"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// handlerTimer is a unary interceptor on the in-process guard that times
// each RPC's handler on the guard's side: from the request decoded to the
// answer returned, before gRPC encodes and sends it. The overhead rows can
// then say how much of a Check's time on the wire the guard spends on it.
//
// Off, it costs an atomic load a call (no timing, no allocation), so the
// headline rows are taken with it off and the guard's side in a pass of
// its own.
//
// RPCs are told apart by kind: "health", and for Checks the first word of
// the call id ("allow", "refuse"), which is how the bench names its calls.
//
// With labels set (a CPU profile asked for), every handler also runs under
// the pprof label rpc=<state>/<kind> ("memory/allow", "jetstream/refuse",
// "jetstream/scale"), on and off alike, so that the profile can be read per
// kind of Check: -tagfocus rpc=jetstream/allow.
type handlerTimer struct {
	on    atomic.Bool
	mu    sync.Mutex
	times map[string]lat
	// labels, and the state named in them, are set before the guard
	// serves and never change.
	labels bool
	state  string
}

func newHandlerTimer(state string, labels bool) *handlerTimer {
	return &handlerTimer{times: map[string]lat{}, state: state, labels: labels}
}

// start clears what was timed and starts timing.
func (t *handlerTimer) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.times)
	t.on.Store(true)
}

// stop stops timing and returns the handler times by kind; they are the
// caller's, untouched by a later start.
func (t *handlerTimer) stop() map[string]lat {
	t.on.Store(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	times := t.times
	t.times = map[string]lat{}
	return times
}

func (t *handlerTimer) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if t.labels {
		kind := rpcKind(req, info)
		if kind == "" {
			kind = strings.TrimPrefix(info.FullMethod, "/yesguard.v1.Guard/")
		}
		pprof.Do(ctx, pprof.Labels("rpc", t.state+"/"+kind), func(ctx context.Context) { resp, err = t.timed(ctx, req, info, handler) })
		return resp, err
	}
	return t.timed(ctx, req, info, handler)
}

// rpcKind is "health", or the first word of a Check's call id; "" for
// anything else.
func rpcKind(req any, info *grpc.UnaryServerInfo) string {
	switch r := req.(type) {
	case *yesguardv1.CheckRequest:
		kind, _, _ := strings.Cut(r.GetCallId(), "-")
		return kind
	default:
		if strings.HasPrefix(info.FullMethod, "/grpc.health.v1.Health/") {
			return "health"
		}
	}
	return ""
}

func (t *handlerTimer) timed(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !t.on.Load() {
		return handler(ctx, req)
	}
	t0 := time.Now()
	resp, err := handler(ctx, req)
	el := time.Since(t0)
	if kind := rpcKind(req, info); kind != "" {
		t.mu.Lock()
		if t.on.Load() {
			t.times[kind] = append(t.times[kind], el)
		}
		t.mu.Unlock()
	}
	return resp, err
}
