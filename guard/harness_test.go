package guard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// harness is a guard on a real transcript store and memory book; events
// are applied to the store directly (the NATS path is tested in server/).
type harness struct {
	t      *testing.T
	g      *Guard
	store  *transcript.Store
	book   *dedupe.Memory
	reg    *prometheus.Registry
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
	reg := prometheus.NewRegistry()
	h := &harness{t: t, store: transcript.NewStore(transcript.Limits{}, transcript.NewMetrics(reg)), book: dedupe.NewMemory(reg), reg: reg, feedUp: true, seq: map[string]uint64{}}
	h.g, err = New(Config{
		Policy: pol, Locales: locs, Store: h.store, Book: h.book, Registerer: reg,
		Feed: func() (FeedState, string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if !h.feedUp {
				return FeedDown, "the transcript feed (NATS) is not connected"
			}
			return FeedLive, ""
		},
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

type checkOpt func(*Request)

func respID(id string) checkOpt { return func(r *Request) { r.ResponseID = id } }
func respondingTo(ms int64) checkOpt {
	return func(r *Request) { r.RespondingToMS = ms }
}

func (h *harness) check(call, tool string, args map[string]any, opts ...checkOpt) *Verdict {
	h.t.Helper()
	return h.checkCtx(context.Background(), call, tool, args, opts...)
}

func (h *harness) checkCtx(ctx context.Context, call, tool string, args map[string]any, opts ...checkOpt) *Verdict {
	st, err := structpb.NewStruct(args)
	if err != nil {
		h.t.Fatal(err)
	}
	req := Request{CallID: call, Tool: tool, Args: st}
	for _, o := range opts {
		o(&req)
	}
	return h.g.Check(ctx, req)
}

// complete reports an allowed action's result to the book, as the
// service's Complete does.
func (h *harness) complete(decisionID string, result map[string]any, failed bool) error {
	var st *structpb.Struct
	if result != nil {
		var err error
		if st, err = structpb.NewStruct(result); err != nil {
			h.t.Fatal(err)
		}
	}
	_, err := h.book.Complete(context.Background(), decisionID, dedupe.AnyOwner, st, failed)
	return err
}

// want asserts an outcome and reason, printing the evidence on failure.
func want(t *testing.T, resp *Verdict, outcome yesguardv1.Outcome, reason yesguardv1.Reason) {
	t.Helper()
	if resp.GetOutcome() != outcome || resp.GetReason() != reason {
		t.Fatalf("got %s/%s, want %s/%s\nevidence: %v\nmessage: %s",
			resp.GetOutcome(), resp.GetReason(), outcome, reason, resp.GetEvidence(), resp.GetMessage())
	}
	if resp.GetMessage() == "" {
		t.Fatalf("decision %s has no message for the model", resp.GetDecisionId())
	}
}

// apply applies ev as it is, now.
func (h *harness) apply(ev transcript.Event) {
	h.t.Helper()
	if ok, why := h.store.Apply(ev, time.Now()); !ok {
		h.t.Fatalf("event %+v dropped: %s", ev, why)
	}
}
