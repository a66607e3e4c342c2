// Package streamread reads every message of some subjects of a JetStream
// stream, oldest first, without leaving state on the server: how yesguard
// replay (from the streams) and the guard (for ListDecisions' events) read
// one call.
package streamread

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// FetchWait bounds the wait for one batch of a stream's messages.
const FetchWait = 5 * time.Second

// Each hands every message of the subjects that the stream holds when it
// is called, oldest first, to each with the time the stream received it,
// through an ordered consumer filtered to the subjects: an ephemeral
// consumer that needs no acks and is gone when the read ends. An error
// from each ends the read with it.
func Each(ctx context.Context, js jetstream.JetStream, stream string, subjects []string, each func(m jetstream.Msg, at time.Time) error) error {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	left := info.NumPending
	for left > 0 {
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(FetchWait))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			if err := each(m, meta.Timestamp); err != nil {
				return err
			}
			left = meta.NumPending
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%d messages of %s did not arrive within %s", left, subjects[0], FetchWait)
		}
	}
	return nil
}
