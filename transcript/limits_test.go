package transcript

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestLimits hits each limit through the ingester, as a publisher would,
// and checks that the hit is counted under its limit and reason, explained
// in the log line with the flag that raises it, and that a call it dropped
// an event of is uncertain until its agent speaks again.
func TestLimits(t *testing.T) {
	small := Limits{
		MaxTextBytes: 32, MaxLangBytes: 8, MaxResponseIDBytes: 16, MaxSourceBytes: 8,
		MaxCalls: 3, MaxCallBytes: 1 << 10, MaxTotalBytes: 1 << 20, MaxEventsPerSecond: 5,
	}
	msg := func(call, fields string) []byte {
		return []byte(`{"call_id":"` + call + `","speaker":"caller","type":"transcript","final":true` + fields + `}`)
	}
	for _, tc := range []struct {
		name   string
		limits func(*Limits)
		// before are events of the call the test publishes first (ok);
		// hit is the one that hits the limit.
		before    [][]byte
		hit       []byte
		reason    string
		limit     string
		flag      string
		uncertain bool // the call held is uncertain after the hit
		// checked are calls a Check asks about (Store.Hold) before the
		// hit: they are never evicted to make room.
		checked []string
	}{
		{name: "text", hit: msg("c1", `,"text":"`+strings.Repeat("a", 33)+`"`),
			reason: ReasonTextTooLong, limit: LimitTextBytes, flag: "--max-text-bytes", uncertain: true},
		{name: "lang", hit: msg("c1", `,"text":"no","lang":"`+strings.Repeat("x", 9)+`"`),
			reason: ReasonLangTooLong, limit: LimitLangBytes, flag: "--max-lang-bytes", uncertain: true},
		{name: "response_id", hit: msg("c1", `,"text":"no","response_id":"`+strings.Repeat("r", 17)+`"`),
			reason: ReasonResponseIDTooLong, limit: LimitResponseIDBytes, flag: "--max-response-id-bytes", uncertain: true},
		{name: "source", hit: msg("c1", `,"text":"no","source":"`+strings.Repeat("s", 9)+`"`),
			reason: ReasonSourceTooLong, limit: LimitSourceBytes, flag: "--max-source-bytes", uncertain: true},
		// One a second, two at once: the question and the yes take both,
		// and the bucket refills only after a second.
		{name: "events per second", limits: func(l *Limits) { l.MaxEventsPerSecond = 1 },
			hit:    msg("c1", `,"text":"no"`),
			reason: ReasonRateLimited, limit: LimitEventsPerSecond, flag: "--max-events-per-second", uncertain: true},
		{name: "calls held",
			before:  [][]byte{msg("c2", `,"text":"a"`), msg("c3", `,"text":"a"`)},
			hit:     msg("c4", `,"text":"a"`),
			checked: []string{"c1", "c2", "c3"},
			reason:  ReasonTooManyCalls, limit: LimitCalls, flag: "--max-calls"},
		{name: "calls per publisher", limits: func(l *Limits) { l.MaxCallsPerPublisher = 2 },
			before:  [][]byte{msg("c2", `,"text":"a"`)},
			hit:     msg("c3", `,"text":"a"`),
			checked: []string{"c1", "c2"},
			reason:  ReasonPublisherCalls, limit: LimitPublisherCalls, flag: "--max-calls-per-publisher"},
		{name: "bytes in all", limits: func(l *Limits) { l.MaxTotalBytes = callOverhead + 2 + 2*int64(unsafe.Sizeof(Utterance{})) + 40 },
			hit:    msg("c1", `,"text":"`+strings.Repeat("z", 30)+`"`),
			reason: ReasonStoreFull, limit: LimitTotalBytes, flag: "--max-total-bytes", uncertain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limits := small
			if tc.limits != nil {
				tc.limits(&limits)
			}
			m := NewMetrics(prometheus.NewRegistry())
			store := NewStore(limits, m)
			core, logs := observer.New(zap.WarnLevel)
			in := NewIngester(nil, testPrefix, store, limits, zap.New(core), m)

			// The call is held, with a question and a yes.
			in.Handle(testPrefix+".c1", []byte(`{"call_id":"c1","speaker":"agent","type":"transcript","final":true,"text":"Shall I?"}`))
			in.Handle(testPrefix+".c1", msg("c1", `,"text":"yes"`))
			for _, b := range tc.before {
				in.Handle(subjectOf(t, b), b)
			}
			if got := testutil.ToFloat64(m.EventsRejected.WithLabelValues(tc.reason)); got != 0 {
				t.Fatalf("rejected before the hit: %v", got)
			}
			for _, id := range tc.checked {
				defer store.Hold(id)()
			}
			in.Handle(subjectOf(t, tc.hit), tc.hit)

			if got := testutil.ToFloat64(m.EventsRejected.WithLabelValues(tc.reason)); got != 1 {
				t.Errorf("events_rejected_total{reason=%q} = %v, want 1", tc.reason, got)
			}
			if got := testutil.ToFloat64(m.LimitHits.WithLabelValues(tc.limit)); got != 1 {
				t.Errorf("limit_hits_total{limit=%q} = %v, want 1", tc.limit, got)
			}
			var line *observer.LoggedEntry
			for _, e := range logs.All() {
				if e.ContextMap()["reason"] == tc.reason {
					line = &e
				}
			}
			if line == nil {
				t.Fatalf("no log line for %s: %v", tc.reason, logs.All())
			}
			ctx := line.ContextMap()
			if ctx["limit"] != tc.limit || !strings.Contains(fmt.Sprint(ctx["detail"]), tc.flag) {
				t.Errorf("log line %v: want limit %q and a detail naming %s", ctx, tc.limit, tc.flag)
			}
			snap, _ := store.Snapshot("c1")
			if tc.uncertain != (snap.Gap != "") {
				t.Errorf("c1 gap %q, want uncertain=%v", snap.Gap, tc.uncertain)
			}
			if tc.uncertain {
				if !strings.Contains(snap.Gap, tc.reason) {
					t.Errorf("gap %q does not say which limit", snap.Gap)
				}
				// The agent speaking again ends it (a fresh bucket second
				// later, so the rate limit lets it through).
				_, _ = store.Apply(Event{CallID: "c1", Speaker: Agent, Type: TypeTranscript, Final: true, Text: "Shall I, then?"}, time.Now().Add(10*time.Second))
				if snap, _ := store.Snapshot("c1"); snap.Gap != "" && tc.limit != LimitTotalBytes {
					t.Errorf("after the agent spoke: gap %q", snap.Gap)
				}
			}
		})
	}
}

func subjectOf(t *testing.T, msg []byte) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(msg), `"call_id":"`)
	id, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("no call id in %s", msg)
	}
	return testPrefix + "." + id
}

// TestCallBytesTrimsTheOldest: a call above MaxCallBytes keeps its latest
// utterances, drops the oldest, and counts each drop.
func TestCallBytesTrimsTheOldest(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	s := NewStore(Limits{MaxCallBytes: 2000, MaxEventsPerSecond: 1000}, m)
	for i := range 40 {
		mustApply(t, s, final("c1", uint64(i+1), Caller, fmt.Sprintf("utterance %02d %s", i, strings.Repeat("x", 40))), t0)
	}
	snap, _ := s.Snapshot("c1")
	if len(snap.Utterances) == 0 || len(snap.Utterances) >= 40 {
		t.Fatalf("held %d utterances", len(snap.Utterances))
	}
	if last := snap.Utterances[len(snap.Utterances)-1].Text; !strings.HasPrefix(last, "utterance 39") {
		t.Errorf("latest utterance %q, want the 40th kept", last)
	}
	held := int64(0)
	for i := range snap.Utterances {
		held += utteranceBytes(&snap.Utterances[i])
	}
	if held > 2000 || s.Bytes() != held+callOverhead+2 {
		t.Errorf("held %d bytes of utterances, store counts %d", held, s.Bytes())
	}
	if got := testutil.ToFloat64(m.LimitHits.WithLabelValues(LimitCallBytes)); got != float64(40-len(snap.Utterances)) {
		t.Errorf("call_bytes hits %v, want %d", got, 40-len(snap.Utterances))
	}
	s.Sweep(t0.Add(time.Hour))
	if s.Bytes() != 0 || s.Len() != 0 {
		t.Errorf("after the sweep: %d bytes, %d calls", s.Bytes(), s.Len())
	}
}
