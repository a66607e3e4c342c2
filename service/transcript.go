package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/auth"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// MaxPublishEvents bounds the events of one PublishTranscript request.
const MaxPublishEvents = 256

// TranscriptWriter stores transcript events in the transcript stream
// (transcript.Writer); its errors are transcript.Writer.Write's.
type TranscriptWriter interface {
	Write(ctx context.Context, ev transcript.Event, guardSequenced bool) (transcript.Written, error)
}

// ErrNoTranscriptStream is a TranscriptWriter's error while the guard has
// no transcript stream to write into (its JetStream state is not set up
// yet): the events were not stored, and a retry may succeed.
var ErrNoTranscriptStream = errors.New("the transcript stream is not set up yet")

// PublishTranscript stores a pipeline's transcript events in the guard's
// transcript stream, in their order, and answers once every one is
// stored. Only the pipeline role may, and a token bound to call-id
// prefixes only for its calls (checked for every event before any is
// stored). An event the ingesters would reject is InvalidArgument naming
// the event and the reason; the events before it stay stored. Without a
// transcript stream of its own to write into (the memory state, or an
// external NATS, where the guard holds no pipeline credential) it is
// FailedPrecondition.
func (s *Service) PublishTranscript(ctx context.Context, req *yesguardv1.PublishTranscriptRequest) (*yesguardv1.PublishTranscriptResponse, error) {
	if err := auth.RequireRole(ctx, auth.RolePipeline); err != nil {
		s.CountError(codes.PermissionDenied)
		return nil, err
	}
	evs := req.GetEvents()
	switch {
	case len(evs) == 0:
		s.CountError(codes.InvalidArgument)
		return nil, status.Error(codes.InvalidArgument, "events: at least one event is needed")
	case len(evs) > MaxPublishEvents:
		s.CountError(codes.InvalidArgument)
		return nil, status.Errorf(codes.InvalidArgument, "events: %d events, at most %d in one request: send them in several", len(evs), MaxPublishEvents)
	}
	for i, ev := range evs {
		if err := auth.RequireCall(ctx, ev.GetCallId()); err != nil {
			s.CountError(codes.PermissionDenied)
			return nil, status.Errorf(codes.PermissionDenied, "events[%d]: %s", i, status.Convert(err).Message())
		}
	}
	if s.cfg.Transcripts == nil {
		s.CountError(codes.FailedPrecondition)
		return nil, status.Error(codes.FailedPrecondition, "this guard takes no transcript over gRPC: it needs the JetStream state (not --state memory) on the embedded NATS server (not --nats-url); publish the transcript on NATS instead")
	}
	resp := &yesguardv1.PublishTranscriptResponse{Events: make([]*yesguardv1.PublishedTranscriptEvent, 0, len(evs))}
	for i, pe := range evs {
		w, err := s.cfg.Transcripts.Write(ctx, eventOf(pe), req.GetGuardSequenced())
		if err != nil {
			code, msg := writeError(err)
			s.CountError(code)
			return nil, status.Errorf(code, "events[%d] (call %q): %s; the %d events before it are stored", i, pe.GetCallId(), msg, i)
		}
		resp.Events = append(resp.Events, &yesguardv1.PublishedTranscriptEvent{
			Source: w.Source, Epoch: w.Epoch, Seq: w.Seq, StreamSeq: w.StreamSeq, Duplicate: w.Duplicate})
	}
	return resp, nil
}

// writeError maps a TranscriptWriter's error onto the code a client acts
// on: its mistake (InvalidArgument, do not retry as is) or the guard's
// (Unavailable, retry: a request the client numbered is stored once).
func writeError(err error) (codes.Code, string) {
	var re *transcript.RejectError
	switch {
	case errors.As(err, &re):
		return codes.InvalidArgument, fmt.Sprintf("rejected as NATS would reject it (%s): %s", re.Reason, re.Detail)
	case errors.Is(err, transcript.ErrNumbering):
		return codes.InvalidArgument, err.Error()
	case errors.Is(err, context.Canceled):
		return codes.Canceled, "not stored, or not known to be: " + err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, "not stored, or not known to be: " + err.Error()
	}
	return codes.Unavailable, "not stored, or not known to be: " + err.Error()
}

// eventOf is the event a NATS publisher would send for pe. The proto
// cannot tell 0 from unset: a start_ms, end_ms or confidence of 0 is left
// out.
func eventOf(pe *yesguardv1.TranscriptEvent) transcript.Event {
	ev := transcript.Event{
		CallID:      pe.GetCallId(),
		Seq:         pe.GetSeq(),
		Speaker:     transcript.Speaker(pe.GetSpeaker()),
		Type:        transcript.EventType(pe.GetType()),
		Text:        pe.GetText(),
		Final:       pe.GetFinal(),
		Lang:        pe.GetLang(),
		ResponseID:  pe.GetResponseId(),
		Interrupted: pe.GetInterrupted(),
		Source:      pe.GetSource(),
		Epoch:       pe.GetEpoch(),
	}
	if v := pe.GetStartMs(); v != 0 {
		ev.StartMS = &v
	}
	if v := pe.GetEndMs(); v != 0 {
		ev.EndMS = &v
	}
	if v := pe.GetConfidence(); v != 0 {
		ev.Confidence = &v
	}
	return ev
}
