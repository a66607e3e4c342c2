package transcript

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func final(call string, seq uint64, sp Speaker, text string) Event {
	return Event{CallID: call, Seq: seq, Speaker: sp, Type: TypeTranscript, Text: text, Final: true}
}

func interim(call string, seq uint64, sp Speaker, text string) Event {
	return Event{CallID: call, Seq: seq, Speaker: sp, Type: TypeTranscript, Text: text}
}

func typed(call string, seq uint64, sp Speaker, typ EventType) Event {
	return Event{CallID: call, Seq: seq, Speaker: sp, Type: typ}
}

func mustApply(t *testing.T, s *Store, ev Event, now time.Time) {
	t.Helper()
	if ok, reason := s.Apply(ev, now); !ok {
		t.Fatalf("Apply(%+v) dropped: %s", ev, reason)
	}
}

func texts(us []Utterance) string {
	var parts []string
	for _, u := range us {
		parts = append(parts, u.Text)
	}
	return strings.Join(parts, "|")
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestStoreOrdering(t *testing.T) {
	cases := []struct {
		name   string
		events []Event
		want   string
	}{
		{"in order", []Event{final("c", 1, Caller, "a"), final("c", 2, Agent, "b"), final("c", 3, Caller, "c")}, "a|b|c"},
		{"late insert", []Event{final("c", 1, Caller, "a"), final("c", 3, Caller, "c"), final("c", 4, Agent, "d"), final("c", 2, Agent, "b")}, "a|b|c|d"},
		{"late insert at front", []Event{final("c", 5, Caller, "b"), final("c", 2, Caller, "a")}, "a|b"},
		{"seq-less arrival order", []Event{final("c", 0, Caller, "a"), final("c", 0, Agent, "b"), final("c", 0, Caller, "c")}, "a|b|c"},
		{"seq after seq-less appends", []Event{final("c", 1, Caller, "a"), final("c", 0, Agent, "b"), final("c", 2, Caller, "c")}, "a|b|c"},
		{"late seq passes seq-less", []Event{final("c", 1, Caller, "a"), final("c", 3, Caller, "c"), final("c", 0, Agent, "x"), final("c", 2, Caller, "b")}, "a|b|c|x"},
		{"seq gaps", []Event{final("c", 10, Caller, "a"), final("c", 30, Caller, "c"), final("c", 20, Caller, "b")}, "a|b|c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(Limits{}, nil)
			for i, ev := range tc.events {
				mustApply(t, s, ev, t0.Add(time.Duration(i)*time.Second))
			}
			snap, _ := s.Snapshot("c")
			if got := texts(snap.Utterances); got != tc.want {
				t.Fatalf("utterances %q, want %q", got, tc.want)
			}
			// IDs are arrival counters.
			seen := map[uint64]bool{}
			for _, u := range snap.Utterances {
				if u.ID == 0 || seen[u.ID] {
					t.Fatalf("bad or repeated ID %d", u.ID)
				}
				seen[u.ID] = true
			}
		})
	}
}

func TestStoreUtteranceFields(t *testing.T) {
	s := NewStore(Limits{}, nil)
	i64 := func(v int64) *int64 { return &v }
	conf := 0.8
	ev := final("c", 1, Caller, "yes")
	ev.StartMS, ev.EndMS, ev.Lang, ev.Confidence = i64(100), i64(400), "en", &conf
	mustApply(t, s, ev, t0)
	ev = final("c", 2, Agent, "ok")
	ev.EndMS, ev.ResponseID, ev.Interrupted = i64(900), "r1", true
	mustApply(t, s, ev, t0.Add(time.Second))
	ev = final("c", 3, Caller, "and")
	ev.StartMS = i64(1000) // start alone is not a time range
	mustApply(t, s, ev, t0.Add(2*time.Second))

	snap, _ := s.Snapshot("c")
	want := []Utterance{
		{ID: 1, Seq: 1, Speaker: Caller, Text: "yes", StartMS: 100, EndMS: 400, HasTimes: true, Lang: "en", Confidence: 0.8, ReceivedAt: t0},
		{ID: 2, Seq: 2, Speaker: Agent, Text: "ok", StartMS: 900, EndMS: 900, HasTimes: true, ResponseID: "r1", Interrupted: true, ReceivedAt: t0.Add(time.Second)},
		{ID: 3, Seq: 3, Speaker: Caller, Text: "and", ReceivedAt: t0.Add(2 * time.Second)},
	}
	if len(snap.Utterances) != len(want) {
		t.Fatalf("got %d utterances", len(snap.Utterances))
	}
	for i := range want {
		if snap.Utterances[i] != want[i] {
			t.Errorf("utterance %d:\n got  %+v\n want %+v", i, snap.Utterances[i], want[i])
		}
	}
}

func TestStoreDuplicateSeq(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := NewStore(Limits{}, m)
	mustApply(t, s, final("c", 1, Caller, "yes"), t0)
	mustApply(t, s, interim("c", 2, Caller, "n"), t0)
	for _, ev := range []Event{final("c", 1, Caller, "yes"), interim("c", 2, Caller, "no")} {
		if ok, reason := s.Apply(ev, t0); ok || reason != ReasonDuplicateSeq {
			t.Fatalf("repeat of seq %d: %v %q", ev.Seq, ok, reason)
		}
	}
	if snap, _ := s.Snapshot("c"); snap.Gap != "" {
		t.Fatalf("a repeat made the call uncertain: %q", snap.Gap)
	}
	// The same seq on another call is not a repeat.
	mustApply(t, s, final("d", 1, Caller, "yes"), t0)
	// Seq 0 is never a repeat.
	mustApply(t, s, final("c", 0, Caller, "again"), t0)
	mustApply(t, s, final("c", 0, Caller, "again"), t0)

	snap, _ := s.Snapshot("c")
	if got := texts(snap.Utterances); got != "yes|again|again" {
		t.Fatalf("utterances %q", got)
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("transcript", "caller")); got != 5 {
		t.Errorf("events_total{transcript,caller} = %v, want 5", got)
	}
}

func TestStoreDuplicateSeqBeyondWindow(t *testing.T) {
	s := NewStore(Limits{MaxEventsPerSecond: 1 << 20}, nil) // 769 events at one instant
	mustApply(t, s, final("c", 1, Caller, "yes"), t0)
	// Many interims push seq 1 out of the recent window.
	for seq := uint64(2); seq < 2+3*seqWindowSize; seq++ {
		mustApply(t, s, interim("c", seq, Caller, "x"), t0)
	}
	if ok, reason := s.Apply(final("c", 1, Caller, "yes"), t0); ok || reason != ReasonDuplicateSeq {
		t.Fatalf("repeat of a held final beyond the window: %v %q", ok, reason)
	}
	// Within the window still detected.
	if ok, _ := s.Apply(interim("c", 3*seqWindowSize, Caller, "x"), t0); ok {
		t.Fatal("repeat within window accepted")
	}
}

func TestSeqWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var w seqWindow
	seen := map[uint64]bool{}
	var max uint64
	for i := 0; i < 20000; i++ {
		var seq uint64
		switch r.IntN(10) {
		case 0: // jump
			seq = max + 1 + uint64(r.IntN(600))
		case 1, 2, 3: // late or repeat
			back := uint64(r.IntN(400))
			if back >= max {
				back = max - 1
			}
			seq = max - back
		default:
			seq = max + 1
		}
		if seq == 0 {
			seq = 1
		}
		got, inWindow := w.seen(seq)
		if inWindow != (seq+seqWindowSize > max) {
			t.Fatalf("seq %d max %d: inWindow=%v", seq, max, inWindow)
		}
		if inWindow && got != seen[seq] {
			t.Fatalf("seq %d max %d: seen=%v want %v", seq, max, got, seen[seq])
		}
		w.add(seq)
		seen[seq] = true
		if seq > max {
			max = seq
		}
	}
}

func TestStoreInterimNeverStored(t *testing.T) {
	s := NewStore(Limits{}, nil)
	mustApply(t, s, interim("c", 1, Caller, "ye"), t0)
	mustApply(t, s, interim("c", 2, Agent, "hel"), t0)
	mustApply(t, s, interim("c", 3, Caller, "yes"), t0)
	snap, _ := s.Snapshot("c")
	if !snap.Exists || len(snap.Utterances) != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
}

func TestStoreInFlight(t *testing.T) {
	cases := []struct {
		name   string
		events []Event
		want   bool
	}{
		{"caller interim marks", []Event{interim("c", 1, Caller, "ye")}, true},
		{"caller speech_started marks", []Event{typed("c", 1, Caller, TypeSpeechStarted)}, true},
		{"speech_stopped does not clear", []Event{typed("c", 1, Caller, TypeSpeechStarted), typed("c", 2, Caller, TypeSpeechStopped)}, true},
		{"caller final clears", []Event{typed("c", 1, Caller, TypeSpeechStarted), interim("c", 2, Caller, "ye"), final("c", 3, Caller, "yes")}, false},
		{"agent events do not mark", []Event{typed("c", 1, Agent, TypeSpeechStarted), interim("c", 2, Agent, "hi")}, false},
		{"agent final does not clear", []Event{typed("c", 1, Caller, TypeSpeechStarted), final("c", 2, Agent, "hi")}, true},
		{"late final keeps a later marker", []Event{final("c", 1, Caller, "a"), typed("c", 5, Caller, TypeSpeechStarted), final("c", 4, Caller, "b")}, true},
		{"final after marker clears", []Event{typed("c", 5, Caller, TypeSpeechStarted), final("c", 6, Caller, "b")}, false},
		{"late marker before held final ignored", []Event{final("c", 5, Caller, "b"), interim("c", 4, Caller, "b")}, false},
		{"seq-less final clears", []Event{typed("c", 5, Caller, TypeSpeechStarted), final("c", 0, Caller, "b")}, false},
		{"seq-less marks", []Event{final("c", 0, Caller, "a"), interim("c", 0, Caller, "b")}, true},
		{"marks again after final", []Event{interim("c", 1, Caller, "a"), final("c", 2, Caller, "a"), interim("c", 3, Caller, "b")}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(Limits{}, nil)
			for _, ev := range tc.events {
				mustApply(t, s, ev, t0)
			}
			snap, _ := s.Snapshot("c")
			if snap.CallerInFlight != tc.want {
				t.Fatalf("CallerInFlight = %v, want %v", snap.CallerInFlight, tc.want)
			}
		})
	}
}

func TestStoreLang(t *testing.T) {
	s := NewStore(Limits{}, nil)
	withLang := func(ev Event, lang string) Event { ev.Lang = lang; return ev }
	steps := []struct {
		ev   Event
		want string
	}{
		{final("c", 1, Caller, "hola"), ""},
		{withLang(final("c", 2, Caller, "hola"), "es"), "es"},
		{withLang(interim("c", 3, Caller, "hel"), "en"), "es"},
		{final("c", 4, Agent, "hola"), "es"},
		{withLang(final("c", 6, Caller, "hello"), "en"), "en"},
		{withLang(final("c", 5, Caller, "late"), "es"), "en"}, // a late final does not override
	}
	for i, st := range steps {
		mustApply(t, s, st.ev, t0)
		snap, _ := s.Snapshot("c")
		if snap.Lang != st.want {
			t.Fatalf("step %d: Lang %q, want %q", i, snap.Lang, st.want)
		}
	}
}

func TestStoreUtteranceBound(t *testing.T) {
	s := NewStore(Limits{MaxUtterances: 3}, nil)
	for i := 1; i <= 5; i++ {
		mustApply(t, s, final("c", uint64(i*10), Caller, fmt.Sprint(i)), t0)
	}
	snap, _ := s.Snapshot("c")
	if got := texts(snap.Utterances); got != "3|4|5" {
		t.Fatalf("after 5: %q", got)
	}
	// A late one in the middle pushes out the oldest.
	mustApply(t, s, final("c", 45, Caller, "4.5"), t0)
	snap, _ = s.Snapshot("c")
	if got := texts(snap.Utterances); got != "4|4.5|5" {
		t.Fatalf("after late insert: %q", got)
	}
	// One older than everything held is not kept.
	mustApply(t, s, final("c", 1, Caller, "0"), t0)
	snap, _ = s.Snapshot("c")
	if got := texts(snap.Utterances); got != "4|4.5|5" {
		t.Fatalf("after too-late insert: %q", got)
	}
}

func TestStoreEnded(t *testing.T) {
	s := NewStore(Limits{}, nil)
	mustApply(t, s, final("c", 1, Caller, "yes"), t0)
	_, ch := s.Snapshot("c")
	mustApply(t, s, Event{CallID: "c", Type: TypeCallEnded}, t0)
	if !closed(ch) {
		t.Fatal("call_ended did not wake")
	}
	snap, ch := s.Snapshot("c")
	if !snap.Ended {
		t.Fatal("not ended")
	}
	// A second call_ended changes nothing.
	mustApply(t, s, Event{CallID: "c", Type: TypeCallEnded}, t0)
	if closed(ch) {
		t.Fatal("repeat call_ended woke waiters")
	}
}

func TestStoreApplyDefends(t *testing.T) {
	s := NewStore(Limits{}, nil)
	for _, tc := range []struct {
		ev     Event
		reason string
	}{
		{Event{Type: TypeCallEnded}, ReasonMissingCallID},
		{Event{CallID: "c", Type: "x", Speaker: Caller}, ReasonUnknownType},
		{Event{CallID: "c", Type: TypeSpeechStarted, Speaker: "x"}, ReasonUnknownSpeaker},
		{Event{CallID: "c", Type: TypeSpeechStarted}, ReasonUnknownSpeaker},
	} {
		if ok, reason := s.Apply(tc.ev, t0); ok || reason != tc.reason {
			t.Errorf("Apply(%+v) = %v %q, want %q", tc.ev, ok, reason, tc.reason)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("Len %d after only bad events", s.Len())
	}
}

func TestSnapshotChannels(t *testing.T) {
	s := NewStore(Limits{}, nil)

	// Unknown call: the channel closes when any call is created.
	snap, unknown := s.Snapshot("c")
	if snap.Exists || snap.CallID != "c" {
		t.Fatalf("unknown call snapshot %+v", snap)
	}
	mustApply(t, s, typed("other", 1, Agent, TypeSpeechStarted), t0)
	select {
	case <-unknown:
	case <-time.After(10 * time.Second):
		t.Fatal("creating a call did not wake waiters on unknown calls")
	}
	snap, unknown = s.Snapshot("c")
	if snap.Exists || closed(unknown) {
		t.Fatal("new unknown-call channel must be open")
	}

	mustApply(t, s, typed("c", 1, Agent, TypeSpeechStarted), t0)
	if !closed(unknown) {
		t.Fatal("creating c did not wake")
	}
	snap, ch := s.Snapshot("c")
	if !snap.Exists {
		t.Fatal("c does not exist")
	}

	// Events that change nothing visible do not wake.
	mustApply(t, s, interim("c", 2, Agent, "hi"), t0)
	mustApply(t, s, typed("c", 3, Caller, TypeSpeechStopped), t0)
	if closed(ch) {
		t.Fatal("an invisible change woke waiters")
	}
	if ok, _ := s.Apply(interim("c", 2, Agent, "hi"), t0); ok {
		t.Fatal("duplicate accepted")
	}

	// A visible change does, and the next snapshot has a fresh channel.
	mustApply(t, s, interim("c", 4, Caller, "ye"), t0)
	if !closed(ch) {
		t.Fatal("caller interim did not wake")
	}
	snap, ch2 := s.Snapshot("c")
	if !snap.CallerInFlight || closed(ch2) {
		t.Fatalf("after interim: %+v closed=%v", snap, closed(ch2))
	}
	// Still in flight: a second interim changes nothing visible.
	mustApply(t, s, interim("c", 5, Caller, "yes"), t0)
	if closed(ch2) {
		t.Fatal("repeat interim woke waiters")
	}
	mustApply(t, s, final("c", 6, Caller, "yes"), t0)
	if !closed(ch2) {
		t.Fatal("final did not wake")
	}
}

func TestSnapshotIsACopy(t *testing.T) {
	s := NewStore(Limits{MaxUtterances: 2}, nil)
	mustApply(t, s, final("c", 1, Caller, "a"), t0)
	mustApply(t, s, final("c", 2, Caller, "b"), t0)
	snap, _ := s.Snapshot("c")
	snap.Utterances[0].Text = "mutated"
	mustApply(t, s, final("c", 3, Caller, "c"), t0)
	again, _ := s.Snapshot("c")
	if texts(again.Utterances) != "b|c" || snap.Utterances[1].Text != "b" {
		t.Fatalf("snapshot shares memory: %q / %q", texts(again.Utterances), texts(snap.Utterances))
	}
}

func TestSweep(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := NewStore(Limits{IdleTTL: 10 * time.Minute, EndedTTL: 2 * time.Minute, MaxCalls: 3}, m)

	mustApply(t, s, final("idle", 1, Caller, "a"), t0)
	mustApply(t, s, final("ended", 1, Caller, "a"), t0.Add(5*time.Minute))
	mustApply(t, s, Event{CallID: "ended", Type: TypeCallEnded}, t0.Add(5*time.Minute))
	mustApply(t, s, final("live", 1, Caller, "a"), t0.Add(6*time.Minute))
	if s.Len() != 3 || testutil.ToFloat64(m.ActiveCalls) != 3 {
		t.Fatalf("Len %d, gauge %v", s.Len(), testutil.ToFloat64(m.ActiveCalls))
	}
	_, idleCh := s.Snapshot("idle")

	// Nothing is old enough yet.
	if n := s.Sweep(t0.Add(6 * time.Minute)); n != 0 {
		t.Fatalf("early sweep evicted %d", n)
	}
	// 10m01s: idle has been idle > 10m; ended ended 5m01s ago > 2m.
	if n := s.Sweep(t0.Add(10*time.Minute + time.Second)); n != 2 {
		t.Fatalf("sweep evicted %d, want 2", n)
	}
	if !closed(idleCh) {
		t.Fatal("eviction did not wake waiters")
	}
	for id, exists := range map[string]bool{"idle": false, "ended": false, "live": true} {
		if snap, _ := s.Snapshot(id); snap.Exists != exists {
			t.Errorf("%s exists=%v", id, snap.Exists)
		}
	}
	if got := testutil.ToFloat64(m.CallsEvicted.WithLabelValues("idle")); got != 1 {
		t.Errorf("evicted idle = %v", got)
	}
	if got := testutil.ToFloat64(m.CallsEvicted.WithLabelValues("ended")); got != 1 {
		t.Errorf("evicted ended = %v", got)
	}

	// Capacity is a limit at Apply (TestLimits), not an eviction: a sweep
	// leaves the calls held alone.
	base := t0.Add(11 * time.Minute)
	mustApply(t, s, final("cap0", 1, Caller, "a"), base)
	if n := s.Sweep(base.Add(time.Second)); n != 0 {
		t.Fatalf("sweep evicted %d calls within their TTLs", n)
	}
	if snap, _ := s.Snapshot("cap0"); !snap.Exists {
		t.Fatal("cap0 evicted")
	}
	s.Sweep(base.Add(11 * time.Minute))

	// An evicted call starts afresh.
	mustApply(t, s, final("cap0", 1, Caller, "new"), base.Add(12*time.Second))
	if snap, _ := s.Snapshot("cap0"); texts(snap.Utterances) != "new" {
		t.Fatalf("re-created call %q", texts(snap.Utterances))
	}
}

func TestTurns(t *testing.T) {
	u := func(id, seq uint64, sp Speaker, text string, mod func(*Utterance)) Utterance {
		x := Utterance{ID: id, Seq: seq, Speaker: sp, Text: text, ReceivedAt: t0.Add(time.Duration(id) * time.Second)}
		if mod != nil {
			mod(&x)
		}
		return x
	}
	times := func(a, b int64) func(*Utterance) {
		return func(x *Utterance) { x.StartMS, x.EndMS, x.HasTimes = a, b, true }
	}
	snap := Snapshot{Utterances: []Utterance{
		u(1, 1, Agent, "Shall I book it?", func(x *Utterance) { x.ResponseID = "r1"; times(0, 900)(x) }),
		u(2, 2, Caller, " yes ", func(x *Utterance) { times(1000, 1200)(x); x.Lang = "en" }),
		u(3, 3, Caller, "please", times(1300, 1600)),
		u(4, 5, Agent, "Booking", func(x *Utterance) { x.ResponseID = "r2"; x.Interrupted = true; times(1700, 1800)(x) }),
		u(5, 6, Agent, "now.", func(x *Utterance) { x.ResponseID = "r2" }),
		u(6, 7, Caller, "wait", times(2000, 2100)),
	}}

	turns := snap.Turns("")
	if len(turns) != 4 {
		t.Fatalf("%d turns", len(turns))
	}
	want := []Turn{
		{ID: 1, Speaker: Agent, Text: "Shall I book it?", StartMS: 0, EndMS: 900, HasTimes: true, FirstSeq: 1, LastSeq: 1, ResponseID: "r1", ReceivedAt: t0.Add(1 * time.Second)},
		{ID: 2, Speaker: Caller, Text: "yes please", StartMS: 1000, EndMS: 1600, HasTimes: true, FirstSeq: 2, LastSeq: 3, Lang: "en", ReceivedAt: t0.Add(3 * time.Second)},
		{ID: 4, Speaker: Agent, Text: "Booking now.", StartMS: 1700, EndMS: 0, HasTimes: false, FirstSeq: 5, LastSeq: 6, ResponseID: "r2", Interrupted: true, ReceivedAt: t0.Add(5 * time.Second)},
		{ID: 6, Speaker: Caller, Text: "wait", StartMS: 2000, EndMS: 2100, HasTimes: true, FirstSeq: 7, LastSeq: 7, ReceivedAt: t0.Add(6 * time.Second)},
	}
	wantN := []int{1, 2, 2, 1}
	for i := range want {
		got := turns[i]
		if len(got.Utterances) != wantN[i] {
			t.Errorf("turn %d has %d utterances, want %d", i, len(got.Utterances), wantN[i])
		}
		got.Utterances = nil
		if !turnEqual(got, want[i]) {
			t.Errorf("turn %d:\n got  %+v\n want %+v", i, got, want[i])
		}
	}

	// Skipping r2 joins the caller's turns around it.
	turns = snap.Turns("r2")
	if len(turns) != 2 || turns[1].Text != "yes please wait" || turns[1].ID != 2 || turns[1].LastSeq != 7 || len(turns[1].Utterances) != 3 {
		t.Fatalf("skip r2: %+v", turns)
	}
	// Skipping only affects agent utterances.
	snap.Utterances[5].ResponseID = "r2"
	if n := len(snap.Turns("r2")[1].Utterances); n != 3 {
		t.Fatalf("skip removed a caller utterance: %d", n)
	}
	// Appending to one turn's utterances must not clobber the next turn.
	turns = snap.Turns("")
	_ = append(turns[0].Utterances, Utterance{Text: "x"})
	if turns[1].Utterances[0].Text != " yes " {
		t.Fatal("turns share backing arrays")
	}
	if got := (Snapshot{}).Turns(""); got != nil {
		t.Fatalf("empty snapshot turns %+v", got)
	}
}

func turnEqual(a, b Turn) bool {
	a.Utterances, b.Utterances = nil, nil
	return a.ID == b.ID && a.Speaker == b.Speaker && a.Text == b.Text && a.StartMS == b.StartMS &&
		a.EndMS == b.EndMS && a.HasTimes == b.HasTimes && a.FirstSeq == b.FirstSeq && a.LastSeq == b.LastSeq &&
		a.Lang == b.Lang && a.ResponseID == b.ResponseID && a.Interrupted == b.Interrupted && a.ReceivedAt.Equal(b.ReceivedAt)
}

// TestStoreConcurrent is for the race detector: writers, readers and a
// sweeper on overlapping calls.
func TestStoreConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := NewStore(Limits{MaxUtterances: 8, MaxCalls: 20}, m)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				call := fmt.Sprintf("c%d", i%37)
				s.Apply(final(call, uint64(i+1), Caller, "yes"), t0)
				s.Apply(interim(call, 0, Caller, "y"), t0)
			}
		}()
	}
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				snap, _ := s.Snapshot(fmt.Sprintf("c%d", i%37))
				_ = snap.Turns("")
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			s.Sweep(t0)
		}
	}()
	wg.Wait()
	if float64(s.Len()) != testutil.ToFloat64(m.ActiveCalls) {
		t.Fatalf("Len %d, gauge %v", s.Len(), testutil.ToFloat64(m.ActiveCalls))
	}
}
