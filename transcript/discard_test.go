package transcript

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Events the stream discards (its limits) before a stalled replica read
// them leave every call it holds uncertain. Red team finding 4: the
// replica, resumed, allowed the yes before a "Wait, no." it never saw.
func TestStreamDiscardWhileStalled(t *testing.T) {
	js, _ := jetStreamOn(t)
	cfg := StreamConfig("YG_TRANSCRIPT", testPrefix, time.Hour, 64<<20, 0, 2*time.Minute, 1)
	// Discarding the oldest stands for what the stream still discards
	// by age (MaxAge) or a purge.
	cfg.MaxMsgs, cfg.Discard = 100, jetstream.DiscardOld
	if _, err := js.CreateOrUpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	store := NewStore(Limits{}, nil)
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, store, Limits{}, nil, NewMetrics(nil), StreamOptions{})
	// The stall: the first message of call "stall" blocks the consumer
	// until released.
	stallSeq, stalled, release := stallAt(in)
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })

	publishEvent(t, js, sourced("c", Agent, "tts", 1, 1, "Shall I submit your appeal now?"), "")
	publishEvent(t, js, sourced("c", Caller, "stt", 1, 1, "Yes."), "")
	waitUntil(t, "the yes applied", func() bool { return in.Applied() == 2 })

	stallSeq.Store(3) // the next message
	publishEvent(t, js, sourced("stall", Caller, "stt", 1, 1, "Hello."), "")
	<-stalled
	// More than the consumer pulls at once (512), so that the "Wait, no."
	// stays in the stream, then enough that the stream (100 messages)
	// discards it.
	for i := range 600 {
		publishEvent(t, js, sourced(fmt.Sprint("other-", i), Caller, "stt", 1, 1, "Hi."), "")
	}
	publishEvent(t, js, sourced("c", Caller, "stt", 1, 2, "Wait, no."), "")
	for i := range 200 {
		publishEvent(t, js, sourced(fmt.Sprint("later-", i), Caller, "stt", 1, 1, "Hi."), "")
	}
	s, err := js.Stream(t.Context(), "YG_TRANSCRIPT")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(t.Context(), testPrefix+".c"); err != jetstream.ErrMsgNotFound {
		t.Fatalf("the stream still holds an event of the call (%v): the test does not discard it", err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	waitUntil(t, "the stream applied", func() bool { return in.Applied() >= info.State.LastSeq })

	snap, _ := store.Snapshot("c")
	if texts(snap.Utterances) != "Shall I submit your appeal now?|Yes." {
		t.Fatalf("utterances %q", texts(snap.Utterances))
	}
	if !strings.Contains(snap.Gap, "discarded") {
		t.Fatalf("the call is not uncertain after the stream discarded events it never applied: gap %q", snap.Gap)
	}
}

// A consumer that stops delivering while events wait (a dead node, a lost
// consumer, a stalled delivery) makes the ingester behind, saying why,
// before its heartbeats would notice. Red team finding 21: replicas stayed
// SERVING for 8 s and refused new calls as unknown.
func TestStalledConsumerIsBehind(t *testing.T) {
	js, _ := jetStreamOn(t)
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, NewStore(Limits{}, nil), Limits{}, nil, NewMetrics(nil), StreamOptions{})
	stallSeq, stalled, release := stallAt(in)
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	publishEvent(t, js, sourced("c", Agent, "tts", 1, 1, "Shall I submit your appeal now?"), "")
	waitUntil(t, "caught up", func() bool { return in.CaughtUp() && in.Applied() == 1 })

	stallSeq.Store(2)
	publishEvent(t, js, sourced("new-call", Caller, "stt", 1, 1, "Hello."), "")
	<-stalled
	waitUntil(t, "behind while the consumer is stalled", func() bool { return !in.CaughtUp() })
	if why := in.Behind(time.Now()); !strings.Contains(why, "stalled") {
		t.Fatalf("Behind %q does not say the consumer is stalled", why)
	}
	close(release)
	waitUntil(t, "caught up once it delivers again", in.CaughtUp)
	if why := in.Behind(time.Now()); why != "" {
		t.Fatalf("still behind: %q", why)
	}
}

// stallAt makes in's consumer block, once, on the stream sequence stored in
// seq: stalled closes when it does, and closing release lets it go on.
func stallAt(in *StreamIngester) (seq *atomic.Uint64, stalled, release chan struct{}) {
	seq = new(atomic.Uint64)
	stalled, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	in.beforeHandle = func(s uint64) {
		if s == seq.Load() {
			once.Do(func() { close(stalled); <-release })
		}
	}
	return seq, stalled, release
}

// Overrunning the stream while a replica lags made the stream discard
// events that replica had not applied, silently for their publishers. Now
// the stream refuses the new event instead (the publisher is told, and
// retries with the same message id), the ingester makes room only from
// what it has applied, and while it cannot it counts the stream full and
// every call it holds is uncertain.
func TestStreamOverrunWhileStalledRefusesThePublisher(t *testing.T) {
	js, _ := jetStreamOn(t)
	cfg := StreamConfig("YG_TRANSCRIPT", testPrefix, time.Hour, 256<<10, 0, 2*time.Minute, 1)
	cfg.MaxMsgSize = 8 << 10
	if _, err := js.CreateOrUpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	store := NewStore(Limits{}, nil)
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, store, Limits{}, nil, NewMetrics(nil), StreamOptions{})
	stallSeq, stalled, release := stallAt(in)
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	publishEvent(t, js, sourced("c", Agent, "tts", 1, 1, "Shall I submit your appeal now?"), "")
	publishEvent(t, js, sourced("c", Caller, "stt", 1, 1, "Yes."), "")
	waitUntil(t, "the yes applied", func() bool { return in.Applied() == 2 })

	stallSeq.Store(3)
	text := strings.Repeat("flood ", 680)
	var refused error
	for i := 0; i < 200 && refused == nil; i++ {
		b, _ := json.Marshal(sourced(fmt.Sprint("flood-", i), Caller, "x", 1, 1, text))
		_, refused = js.Publish(t.Context(), testPrefix+fmt.Sprint(".flood-", i), b)
		if i == 0 {
			<-stalled
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum bytes exceeded") {
		t.Fatalf("the publisher past the stream's bound was told %v, want the stream's bytes limit", refused)
	}
	waitUntil(t, "the stream counts as full", func() bool { return in.Full() != "" })
	if snap, _ := store.Snapshot("c"); !strings.Contains(snap.Gap, "--transcript-max-bytes") {
		t.Errorf("the call held is not uncertain while the stream refuses events: gap %q", snap.Gap)
	}
	s, err := js.Stream(t.Context(), "YG_TRANSCRIPT")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(t.Context()); err != nil || info.State.FirstSeq > in.Applied()+1 {
		t.Fatalf("stream state %+v (%v): events the replica never applied (after %d) are gone", info.State, err, in.Applied())
	}
	// Once it applies what the stream holds, it makes room from that.
	close(release)
	waitUntil(t, "room again", func() bool { return in.Full() == "" })
	if snap, _ := store.Snapshot("c"); snap.Gap == "" {
		t.Error("the call held is no longer uncertain once the stream has room: what was refused may be its caller's")
	}
}
