package guard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/metrics"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// memSink keeps every decision written.
type memSink struct {
	mu sync.Mutex
	ds []*yesguardv1.Decision
}

func (s *memSink) Write(d *yesguardv1.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, d)
}

func (s *memSink) all() []*yesguardv1.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*yesguardv1.Decision(nil), s.ds...)
}

// harness is a guard on a real transcript store and dedupe book; events
// are applied to the store directly (the NATS path is tested in server/).
type harness struct {
	t      *testing.T
	g      *Guard
	store  *transcript.Store
	book   *dedupe.Book
	sink   *memSink
	m      *metrics.Metrics
	feedUp bool
	mu     sync.Mutex
	seq    map[string]uint64
}

func newHarness(t *testing.T, policyPath string) *harness {
	t.Helper()
	pol, err := LoadPolicy(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry())
	h := &harness{t: t, store: transcript.NewStore(transcript.Limits{}, m), book: dedupe.New(m), sink: &memSink{}, m: m, feedUp: true, seq: map[string]uint64{}}
	h.g, err = New(Config{
		Policy: pol, Locales: locs, Store: h.store, Book: h.book, Sink: h.sink, Metrics: m,
		FeedUp: func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.feedUp },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type evOpt func(*transcript.Event)

func withResponse(id string) evOpt { return func(e *transcript.Event) { e.ResponseID = id } }
func withLang(l string) evOpt      { return func(e *transcript.Event) { e.Lang = l } }
func withTimes(start, end int64) evOpt {
	return func(e *transcript.Event) { e.StartMS, e.EndMS = &start, &end }
}
func interim() evOpt { return func(e *transcript.Event) { e.Final = false } }

func (h *harness) nextSeq(call string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq[call]++
	return h.seq[call]
}

func (h *harness) event(call string, ev transcript.Event, at time.Time) {
	h.t.Helper()
	ev.CallID = call
	ev.Seq = h.nextSeq(call)
	if ok, why := h.store.Apply(ev, at); !ok {
		h.t.Fatalf("event %+v dropped: %s", ev, why)
	}
}

// say applies a final transcript event now.
func (h *harness) say(call string, sp transcript.Speaker, text string, opts ...evOpt) {
	h.t.Helper()
	h.sayAt(call, sp, text, time.Now(), opts...)
}

func (h *harness) sayAt(call string, sp transcript.Speaker, text string, at time.Time, opts ...evOpt) {
	h.t.Helper()
	ev := transcript.Event{Speaker: sp, Type: transcript.TypeTranscript, Text: text, Final: true}
	for _, o := range opts {
		o(&ev)
	}
	h.event(call, ev, at)
}

type checkOpt func(*yesguardv1.CheckRequest)

func respID(id string) checkOpt { return func(r *yesguardv1.CheckRequest) { r.ResponseId = id } }
func respondingTo(ms int64) checkOpt {
	return func(r *yesguardv1.CheckRequest) { r.RespondingToMs = ms }
}

func (h *harness) check(call, tool string, args map[string]any, opts ...checkOpt) *yesguardv1.CheckResponse {
	h.t.Helper()
	resp, err := h.checkErr(context.Background(), call, tool, args, opts...)
	if err != nil {
		h.t.Fatalf("Check(%s, %s): %v", call, tool, err)
	}
	return resp
}

func (h *harness) checkErr(ctx context.Context, call, tool string, args map[string]any, opts ...checkOpt) (*yesguardv1.CheckResponse, error) {
	st, err := structpb.NewStruct(args)
	if err != nil {
		h.t.Fatal(err)
	}
	req := &yesguardv1.CheckRequest{CallId: call, Tool: tool, Args: st}
	for _, o := range opts {
		o(req)
	}
	return h.g.Check(ctx, req)
}

// want asserts an outcome and reason, printing the evidence on failure.
func want(t *testing.T, resp *yesguardv1.CheckResponse, outcome yesguardv1.Outcome, reason yesguardv1.Reason) {
	t.Helper()
	if resp.GetOutcome() != outcome || resp.GetReason() != reason {
		t.Fatalf("got %s/%s, want %s/%s\nevidence: %v\nmessage: %s",
			resp.GetOutcome(), resp.GetReason(), outcome, reason, resp.GetEvidence(), resp.GetMessage())
	}
	if resp.GetMessage() == "" {
		t.Fatalf("decision %s has no message for the model", resp.GetDecisionId())
	}
}
