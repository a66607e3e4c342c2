package probe

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/transcript"
)

// The acked publish of the probes (transcript.PublishAcked): why it is
// acked, and how often it is tried.
const (
	AckAttempts = transcript.AckAttempts
	AckWait     = transcript.AckWait
)

// ErrNoStream is PublishAcked's error when no JetStream stream stores the
// subject (the guard's memory state, or its stream not set up yet), so
// nothing can acknowledge the event.
var ErrNoStream = transcript.ErrNoStream

// MsgID is the event's Nats-Msg-Id, as the README's event contract and the
// TypeScript client write it: <call_id>.<source>.<epoch>.<seq>; "" for an
// event without a seq (nothing tells its repeats apart).
func MsgID(ev transcript.Event) string { return transcript.MsgID(ev) }

// PublishAcked sends one transcript event as a JetStream publish and waits
// for the stream's ack (transcript.PublishAcked), the same Nats-Msg-Id
// every time. It returns ErrNoStream (wrapped) when no stream answers at
// all.
func PublishAcked(ctx context.Context, js jetstream.JetStream, prefix string, ev transcript.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = transcript.PublishAcked(ctx, js, prefix+"."+ev.CallID, b, transcript.MsgID(ev))
	return err
}
