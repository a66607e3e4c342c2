package server

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/internal/streamread"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// maxCallEventBytes bounds ListDecisions' include_events (their encoded
// size): with a page of records beside them, one answer stays under
// gRPC's 4 MB default message size. A long call of interim results fits
// in it many times over.
const maxCallEventBytes = 1 << 20

// errTooManyEvents ends a read of more than maxCallEventBytes of events.
var errTooManyEvents = status.Errorf(codes.ResourceExhausted,
	"include_events: the call's transcript events take more than %d bytes, more than one answer carries; read them from the transcript stream (yesguard replay --from-streams)", maxCallEventBytes)

// callEvents reads one call's events from the transcript stream, each as
// the ingester decodes it (an event it would drop is left out), with the
// stream's timestamp as its arrival, redacted as ListDecisions' transcript
// is. It is the service's Events with the JetStream state.
func (s *Server) callEvents(ctx context.Context, callID string) ([]*yesguardv1.ReceivedEvent, error) {
	select {
	case <-s.js.ready:
	default:
		return nil, errStateNotReady
	}
	js, err := jetstream.New(s.nc.Load())
	if err != nil {
		return nil, err
	}
	prefix := s.cfg.SubjectPrefix
	limits := s.cfg.Limits
	var out []*yesguardv1.ReceivedEvent
	size := 0
	err = streamread.Each(ctx, js, TranscriptStreamName(prefix), []string{prefix + "." + callID}, func(m jetstream.Msg, at time.Time) error {
		ev, err := transcript.Decode(prefix, m.Subject(), m.Data(), limits)
		if err != nil {
			return nil
		}
		re := &yesguardv1.ReceivedEvent{Event: eventProto(ev), ReceivedAt: timestamppb.New(at)}
		if size += proto.Size(re); size > maxCallEventBytes {
			return errTooManyEvents
		}
		out = append(out, re)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.redactor.Events(out), nil
}

// eventProto is the contract's message of a decoded event.
func eventProto(ev transcript.Event) *yesguardv1.TranscriptEvent {
	p := &yesguardv1.TranscriptEvent{
		CallId: ev.CallID, Seq: ev.Seq, Speaker: string(ev.Speaker), Type: string(ev.Type),
		Text: ev.Text, Final: ev.Final, Lang: ev.Lang, ResponseId: ev.ResponseID,
		Interrupted: ev.Interrupted, Source: ev.Source, Epoch: ev.Epoch,
	}
	if ev.StartMS != nil {
		p.StartMs = *ev.StartMS
	}
	if ev.EndMS != nil {
		p.EndMs = *ev.EndMS
	}
	if ev.Confidence != nil {
		p.Confidence = *ev.Confidence
	}
	return p
}
