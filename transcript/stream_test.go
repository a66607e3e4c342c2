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
	if _, err := js.CreateOrUpdateStream(ctx, StreamConfig("YG_TRANSCRIPT", testPrefix, time.Hour, 64<<20, 0, 2*time.Minute, 1)); err != nil {
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

func startStream(t *testing.T, js jetstream.JetStream, store *Store) *StreamIngester {
	t.Helper()
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, store, Limits{}, nil, NewMetrics(nil), StreamOptions{})
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
	in2 := startStream(t, js, second)
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
	// A resync is behind until the loop has asked the server again; with
	// nothing new that may be at once, so only the way back is asserted
	// (that Resync marks it behind: TestStreamResyncMarksBehind).
	in2.Resync()
	waitUntil(t, "caught up again after a resync with nothing new", in2.CaughtUp)
}

// TestStreamCatchUpAfterTheRebuildWindow: a replica restarted when every
// event of the stream is older than its rebuild window has nothing to
// replay, and is caught up at once (it used to wait for ever: its
// consumer starts at the stream's end and delivers nothing).
func TestStreamCatchUpAfterTheRebuildWindow(t *testing.T) {
	js, _ := jetStreamOn(t)
	for i := range 5 {
		publishEvent(t, js, sourced("old", Caller, "stt", 1, uint64(i+1), "words"), "")
	}
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, NewStore(Limits{}, nil), Limits{}, nil, NewMetrics(nil),
		StreamOptions{Rebuild: time.Nanosecond}) // every event published above is older
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	waitUntil(t, "caught up with nothing to replay", in.CaughtUp)
	// Nothing before the window is waited for either.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := in.Settle(ctx, "old"); err != nil {
		t.Fatalf("Settle with nothing to replay: %v", err)
	}
	publishEvent(t, js, sourced("new", Caller, "stt", 1, 1, "yes"), "")
	waitUntil(t, "a new event applied", func() bool { return in.Applied() == 6 })
}

// Resync marks a caught-up ingester behind before it returns, and says so
// (OnChange).
func TestStreamResyncMarksBehind(t *testing.T) {
	js, _ := jetStreamOn(t)
	var behind atomic.Int32
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, NewStore(Limits{}, nil), Limits{}, nil, NewMetrics(nil), StreamOptions{
		OnChange: func() { behind.Add(1) },
	})
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	waitUntil(t, "caught up", in.CaughtUp)
	before := behind.Load()
	in.Resync()
	if behind.Load() == before {
		t.Fatal("Resync did not report the ingester behind")
	}
	waitUntil(t, "caught up again", in.CaughtUp)
}
