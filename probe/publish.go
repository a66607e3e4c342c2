package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/transcript"
)

// Acked publishes: why. A core publish is fire and forget: under a flood
// the server may drop it at the transcript stream's ingest queue without a
// word to its publisher, and a caller's "No, wait" lost that way leaves the
// yes before it standing. A JetStream publish is acknowledged once the
// stream has stored the event, so a publisher that waits for the ack and
// retries until it gets one loses nothing silently; the stream stores a
// retry once (Nats-Msg-Id within its duplicate window).
const (
	// AckAttempts bounds the tries of one acked publish.
	AckAttempts = 3
	// AckWait is how long one try waits for its ack.
	AckWait = 2 * time.Second
)

// ErrNoStream is PublishAcked's error when no JetStream stream stores the
// subject (the guard's memory state, or its stream not set up yet), so
// nothing can acknowledge the event.
var ErrNoStream = errors.New("no JetStream stream stores the transcript subject, so nothing acknowledges the event")

// MsgID is the event's Nats-Msg-Id, as the README's event contract and the
// TypeScript client write it: <call_id>.<source>.<epoch>.<seq>; "" for an
// event without a seq (nothing tells its repeats apart).
func MsgID(ev transcript.Event) string {
	if ev.Seq == 0 {
		return ""
	}
	return ev.CallID + "." + ev.Source + "." + strconv.FormatUint(ev.Epoch, 10) + "." + strconv.FormatUint(ev.Seq, 10)
}

// PublishAcked sends one transcript event as a JetStream publish and waits
// for the stream's ack: up to AckAttempts tries of AckWait each, within
// ctx, the same Nats-Msg-Id every time. It returns ErrNoStream (wrapped)
// when no stream answers at all.
func PublishAcked(ctx context.Context, js jetstream.JetStream, prefix string, ev transcript.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	subject := prefix + "." + ev.CallID
	var opts []jetstream.PublishOpt
	if id := MsgID(ev); id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	var last error
	for attempt := 1; attempt <= AckAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, AckWait)
		_, err := js.Publish(actx, subject, b, opts...)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders):
			return fmt.Errorf("publish %s: %w", subject, ErrNoStream)
		case ctx.Err() != nil:
			return fmt.Errorf("publish %s: no ack after %d tries: %w", subject, attempt, ctx.Err())
		}
		last = err
	}
	return fmt.Errorf("publish %s: no ack after %d tries of %v: %w", subject, AckAttempts, AckWait, last)
}
