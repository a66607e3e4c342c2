package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/internal/streamread"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// Streams names where a guard on JetStream keeps a call: its transcript
// events on TranscriptStream, subjects <TranscriptPrefix>.<call_id>, and
// its decision records on DecisionStream, subjects
// <DecisionPrefix>.<call_id>.> (the names package server creates).
type Streams struct {
	TranscriptStream, TranscriptPrefix string
	DecisionStream, DecisionPrefix     string
}

// DefaultStreams are the server's names with the default prefixes.
var DefaultStreams = Streams{
	TranscriptStream: "YESGUARD_TRANSCRIPT", TranscriptPrefix: "yesguard.transcript",
	DecisionStream: "YESGUARD_DECISIONS", DecisionPrefix: "yesguard.decisions",
}

// ReadStreams reads one call from the streams, each through an ordered
// consumer filtered to the call's subject: an ephemeral consumer that
// needs no acks and leaves no state on the server. An event's arrival is
// its stream timestamp, which is when a guard reading the stream had it.
// A record that does not parse is skipped and counted as a dropped event.
func ReadStreams(ctx context.Context, js jetstream.JetStream, s Streams, callID string) (*Call, error) {
	c := &Call{ID: callID}
	limits := transcript.Limits{}
	limits.SetDefaults()
	err := streamread.Each(ctx, js, s.TranscriptStream, []string{s.TranscriptPrefix + "." + callID}, func(m jetstream.Msg, at time.Time) error {
		ev, err := transcript.Decode(s.TranscriptPrefix, m.Subject(), m.Data(), limits)
		if err != nil {
			c.Dropped++
			return nil
		}
		c.Events = append(c.Events, Event{Event: ev, ReceivedAt: at, Raw: append([]byte(nil), m.Data()...)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("transcript stream %s: %w", s.TranscriptStream, err)
	}
	err = streamread.Each(ctx, js, s.DecisionStream, decisions.CallSubjects(s.DecisionPrefix, callID), func(m jetstream.Msg, _ time.Time) error {
		d := new(yesguardv1.Decision)
		if protojson.Unmarshal(m.Data(), d) != nil || d.GetTime() == nil {
			c.Dropped++
			return nil
		}
		c.Records = append(c.Records, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decision stream %s: %w", s.DecisionStream, err)
	}
	if len(c.Events) == 0 && len(c.Records) == 0 {
		return nil, fmt.Errorf("call %q: no events on %s and no records on %s", callID, s.TranscriptStream, s.DecisionStream)
	}
	c.sort()
	return c, nil
}
