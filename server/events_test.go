package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// ListDecisions' include_events returns the call's events as the
// transcript stream holds them (another call's are not), with their
// arrival, redacted as the transcript is; a guard without the stream says
// it keeps none.
func TestListDecisionsIncludeEvents(t *testing.T) {
	srv, _, _ := startConfigured(t, func(c *Config) { c.RedactDigits = 4 })
	client := yesguardv1.NewGuardClient(plainClient(t, srv.GRPCAddr()))
	pub, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ev := range []transcript.Event{
		{CallID: "ev-1", Seq: 1, Source: "tts", Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Shall I pay the bill?"},
		{CallID: "ev-2", Seq: 1, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Another call."},
		{CallID: "ev-1", Seq: 1, Source: "stt", Speaker: transcript.Caller, Type: transcript.TypeSpeechStarted},
		{CallID: "ev-1", Seq: 2, Source: "stt", Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Yes, card 4242 4242 4242 4242."},
	} {
		if err := probe.Publish(pub, DefaultSubjectPrefix, ev); err != nil {
			t.Fatal(err)
		}
	}
	var resp *yesguardv1.ListDecisionsResponse
	eventuallyFor(t, "the three events of ev-1 in the stream", func() bool {
		resp, err = client.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: "ev-1", IncludeEvents: true})
		return err == nil && len(resp.GetEvents()) == 3
	})
	evs := resp.GetEvents()
	if evs[1].GetEvent().GetType() != string(transcript.TypeSpeechStarted) || evs[2].GetEvent().GetSeq() != 2 || evs[2].GetEvent().GetSource() != "stt" {
		t.Errorf("events out of order or changed: %v", evs)
	}
	for _, e := range evs {
		if e.GetReceivedAt() == nil || e.GetEvent().GetCallId() != "ev-1" {
			t.Errorf("event without its arrival or of another call: %v", e)
		}
	}
	if text := evs[2].GetEvent().GetText(); strings.Contains(text, "4242") || !strings.Contains(text, "####") {
		t.Errorf("the caller's digits unredacted: %q", text)
	}

	// More than one answer carries: refused, saying where to read them.
	long := strings.Repeat("word ", maxCallEventBytes/(300*5)+1)
	for i := range 300 {
		ev := transcript.Event{CallID: "ev-big", Seq: uint64(i + 1), Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: false, Text: long}
		if err := probe.Publish(pub, DefaultSubjectPrefix, ev); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyFor(t, "the long call refused", func() bool {
		_, err = client.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: "ev-big", IncludeEvents: true})
		return status.Code(err) == codes.ResourceExhausted
	})
	if !strings.Contains(err.Error(), "--from-streams") {
		t.Errorf("the long call's refusal does not say where to read it: %v", err)
	}

	mem, _, _ := startConfigured(t, func(c *Config) { c.State = StateMemory })
	_, err = yesguardv1.NewGuardClient(plainClient(t, mem.GRPCAddr())).ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: "ev-1", IncludeEvents: true})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no transcript stream") {
		t.Errorf("include_events on state memory: %v, want FailedPrecondition saying there is no stream", err)
	}
}
