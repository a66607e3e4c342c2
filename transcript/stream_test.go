package transcript

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/internal/natstest"
)

func jetStreamOn(t *testing.T) (jetstream.JetStream, *nats.Conn) {
	t.Helper()
	nc, js := natstest.Connect(t, natstest.JetStream(t).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, StreamConfig("YG_TRANSCRIPT", testPrefix, time.Hour, 64<<20, 2*time.Minute, 1)); err != nil {
		t.Fatal(err)
	}
	return js, nc
}

func publishEvent(t *testing.T, js jetstream.JetStream, ev Event, msgID string) {
	t.Helper()
	b, _ := json.Marshal(ev)
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := js.Publish(t.Context(), testPrefix+"."+ev.CallID, b, opts...); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 30s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startStream(t *testing.T, js jetstream.JetStream, store *Store, opts ...StreamOptions) *StreamIngester {
	t.Helper()
	var o StreamOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, store, Limits{}, nil, NewMetrics(nil), o)
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := in.Stop(); err != nil {
			t.Error(err)
		}
	})
	return in
}

// TestStreamCatchUpAndRebuild: an ingester is behind until it has applied
// the stream; a second one, started later on an empty store (a restarted
// replica), rebuilds the calls with the same utterance ids and the
// stream's timestamps; a republished message (same Nats-Msg-Id) is stored
// once.
func TestStreamCatchUpAndRebuild(t *testing.T) {
	js, _ := jetStreamOn(t)
	for i := range 50 {
		publishEvent(t, js, sourced(fmt.Sprint("c", i%5), Caller, "stt", 1, uint64(i/5+1), "words"), fmt.Sprint("m", i))
	}
	publishEvent(t, js, sourced("c0", Caller, "stt", 1, 1, "words"), "m0") // a retry inside the window
	first := NewStore(Limits{}, nil)
	in := startStream(t, js, first)
	waitUntil(t, "first ingester caught up", in.CaughtUp)
	if in.Behind(time.Now()) != "" || in.Applied() != 50 {
		t.Fatalf("behind %q, applied %d", in.Behind(time.Now()), in.Applied())
	}
	snap, _ := first.Snapshot("c0")
	if len(snap.Utterances) != 10 || snap.Gap != "" {
		t.Fatalf("c0: %d utterances, gap %q", len(snap.Utterances), snap.Gap)
	}

	publishEvent(t, js, sourced("c0", Agent, "tts", 1, 1, "Shall I?"), "")
	waitUntil(t, "live event applied", func() bool { return in.Applied() == 51 })

	second := NewStore(Limits{}, nil)
	var changes atomic.Int32
	in2 := startStream(t, js, second, StreamOptions{OnChange: func() { changes.Add(1) }})
	waitUntil(t, "second ingester caught up", in2.CaughtUp)
	a, _ := first.Snapshot("c0")
	b, _ := second.Snapshot("c0")
	if len(a.Utterances) != len(b.Utterances) {
		t.Fatalf("rebuilt %d utterances, want %d", len(b.Utterances), len(a.Utterances))
	}
	for i := range a.Utterances {
		if a.Utterances[i].ID != b.Utterances[i].ID || !a.Utterances[i].ReceivedAt.Equal(b.Utterances[i].ReceivedAt) {
			t.Fatalf("utterance %d: %+v rebuilt as %+v", i, a.Utterances[i], b.Utterances[i])
		}
	}
	// Resync marks the ingester behind, and says so, before it returns;
	// catching up again is the loop's, and may come at once (nothing is
	// new), so CaughtUp right after it would be a race.
	before := changes.Load()
	in2.Resync()
	if changes.Load() == before {
		t.Fatal("a resync did not mark the caught-up ingester behind")
	}
	waitUntil(t, "caught up again after a resync with nothing new", in2.CaughtUp)
}

// A start after every message of the stream is older than the replay
// (a guard restarted the next day): nothing is delivered, and the
// ingester is caught up at once instead of waiting for the stream's last
// sequence forever.
func TestStreamCatchUpWithNothingToReplay(t *testing.T) {
	js, _ := jetStreamOn(t)
	for i := range 5 {
		publishEvent(t, js, sourced("old", Caller, "stt", 1, uint64(i+1), "words"), "")
	}
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, NewStore(Limits{}, nil), Limits{}, nil, NewMetrics(nil), StreamOptions{Rebuild: time.Nanosecond})
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := in.Stop(); err != nil {
			t.Error(err)
		}
	})
	waitUntil(t, "caught up with nothing to replay", in.CaughtUp)
	if in.Applied() != 0 {
		t.Errorf("applied %d messages older than the replay", in.Applied())
	}
	publishEvent(t, js, sourced("new", Caller, "stt", 1, 1, "words"), "")
	waitUntil(t, "a live event applied", func() bool { return in.Applied() == 6 })
}
