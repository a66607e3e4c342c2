package probe

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/internal/natstest"
	"github.com/yesguard/yesguard/transcript"
)

// An ack that never comes (the server dropped the publish) is retried
// with the same Nats-Msg-Id, so the stream stores a retry once. A
// responder on a real server stands for a stream that drops the first
// try and stores the second.
func TestPublishAckedRetriesTheSameMessage(t *testing.T) {
	ns := natstest.JetStream(t)
	nc, js := natstest.Connect(t, ns.ClientURL())
	var mu sync.Mutex
	var ids []string
	if _, err := nc.Subscribe("yesguard.transcript.c1", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
		if len(ids) == 2 { // drop the first
			_ = m.Respond([]byte(`{"stream":"YESGUARD_TRANSCRIPT","seq":1}`))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ev := transcript.Event{CallID: "c1", Source: "cli", Epoch: 7, Seq: 3, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "No, wait."}
	if err := PublishAcked(context.Background(), js, "yesguard.transcript", ev); err != nil {
		t.Fatalf("PublishAcked: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != "c1.cli.7.3" || ids[1] != ids[0] {
		t.Fatalf("tries carried Nats-Msg-Id %q, want c1.cli.7.3 twice", ids)
	}
}

// Nobody takes the subject: ErrNoStream at once, not a wait.
func TestPublishAckedWithoutAStream(t *testing.T) {
	ns := natstest.JetStream(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := PublishAcked(ctx, js, "yesguard.transcript", transcript.Event{CallID: "c1", Seq: 1, Type: transcript.TypeTranscript})
	if !errors.Is(err, ErrNoStream) {
		t.Fatalf("PublishAcked with no stream: %v, want ErrNoStream", err)
	}
}
