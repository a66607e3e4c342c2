package main

import (
	"context"
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
type handlerTimer struct {
	on    atomic.Bool
	mu    sync.Mutex
	times map[string]lat
}

func newHandlerTimer() *handlerTimer { return &handlerTimer{times: map[string]lat{}} }

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

func (t *handlerTimer) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !t.on.Load() {
		return handler(ctx, req)
	}
	t0 := time.Now()
	resp, err := handler(ctx, req)
	el := time.Since(t0)
	kind := ""
	switch r := req.(type) {
	case *yesguardv1.CheckRequest:
		kind, _, _ = strings.Cut(r.GetCallId(), "-")
	default:
		if strings.HasPrefix(info.FullMethod, "/grpc.health.v1.Health/") {
			kind = "health"
		}
	}
	if kind != "" {
		t.mu.Lock()
		if t.on.Load() {
			t.times[kind] = append(t.times[kind], el)
		}
		t.mu.Unlock()
	}
	return resp, err
}
