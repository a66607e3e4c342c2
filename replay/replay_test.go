package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/guard"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

func say(call string, seq uint64, sp transcript.Speaker, text string) transcript.Event {
	return transcript.Event{CallID: call, Seq: seq, Speaker: sp, Type: transcript.TypeTranscript, Text: text, Final: true, Lang: "en"}
}

// refusal is the record a guard writes for "Yes. Wait, no." at at.
func refusal(call string, at time.Time) *yesguardv1.Decision {
	args, _ := approval.CanonicalArgs(nil)
	return &yesguardv1.Decision{
		DecisionId: ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String(), Time: timestamppb.New(at),
		CallId: call, Tool: "submit_appeal", ArgsHash: approval.ArgsHash(args), Args: string(args),
		Outcome: yesguardv1.Outcome_OUTCOME_REFUSE, Reason: yesguardv1.Reason_REASON_NEGATED,
		Evidence: &yesguardv1.Evidence{Detail: `negation "wait"`}, Kind: yesguardv1.DecisionKind_DECISION_KIND_CHECK,
	}
}

// TestJSONLRoundTrip: what a Writer writes, ReadJSONL reads back; a
// decision log's line is a decision line as it stands; a bad line is an
// error naming it.
func TestJSONLRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Event(say("c1", 1, transcript.Agent, "Shall I submit your appeal now?"), t0)
	w.Event(say("c1", 2, transcript.Caller, "Yes. Wait, no."), t0.Add(300*time.Millisecond))
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	d := refusal("c1", t0.Add(400*time.Millisecond))
	raw, _ := protojson.Marshal(d)
	// As the decision log writes it.
	b.WriteString(`{"level":"info","ts":"2026-12-01T12:00:00.4Z","logger":"yesguard.decisions","msg":"decision","decision":` + string(compact(raw)) + "}\n\n")
	rec, err := ReadJSONL(&b)
	if err != nil {
		t.Fatal(err)
	}
	c := rec.Call("c1")
	if c == nil || len(c.Events) != 2 || len(c.Records) != 1 || c.Events[1].Event.Text != "Yes. Wait, no." || !c.Events[1].ReceivedAt.Equal(t0.Add(300*time.Millisecond)) {
		t.Fatalf("read back %+v", c)
	}
	res, err := Replay(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed() != 0 || !res.Pairs[0].Same {
		t.Fatalf("replayed %s/%s (%s), want the recorded refusal", res.Pairs[0].Now.Outcome, res.Pairs[0].Now.Reason, res.Pairs[0].Now.GetEvidence().GetDetail())
	}

	for _, tc := range []struct{ in, want string }{
		{`{"event":{"call_id":"c"}}`, "line 1: event: received_at is required"},
		{"\n" + `{"decision":{"call_id":"c","time":"2026-12-01T12:00:00Z"},"event":{}}`, "line 2: want"},
		{`{"decision":{"call_id":"c"}}`, "line 1: decision: a record needs a call_id and a time"},
		{`not json`, "line 1:"},
		{``, "no events and no decisions"},
	} {
		if _, err := ReadJSONL(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadJSONL(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestReplayTakesTheEventsOfItsTime: a Check is judged on the events that
// had arrived by its time plus its wait, not on the later ones.
func TestReplayTakesTheEventsOfItsTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d := refusal("c1", t0.Add(100*time.Millisecond))
	d.WaitedMs = 250 // the "Wait, no." landed 300 ms after the question, within its wait
	c := &Call{ID: "c1", Records: []*yesguardv1.Decision{d}, Events: []Event{
		{Event: say("c1", 1, transcript.Agent, "Shall I submit your appeal now?"), ReceivedAt: t0},
		{Event: say("c1", 2, transcript.Caller, "Yes. Wait, no."), ReceivedAt: t0.Add(300 * time.Millisecond)},
		// After the decision: not what the guard had.
		{Event: say("c1", 3, transcript.Agent, "Okay, I won't. Shall I submit it tomorrow?"), ReceivedAt: t0.Add(2 * time.Second)},
		{Event: say("c1", 4, transcript.Caller, "Yes please."), ReceivedAt: t0.Add(3 * time.Second)},
	}}
	res, err := Replay(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Pairs[0]; !p.Same || p.Now.GetEvidence().GetAnswer().GetText() != "Yes. Wait, no." {
		t.Fatalf("replayed %s/%s on %q", p.Now.Outcome, p.Now.Reason, p.Now.GetEvidence().GetAnswer().GetText())
	}
	// Had it waited less, the answer was not in yet.
	d.WaitedMs = 100
	res, _ = Replay(context.Background(), c, Options{})
	if p := res.Pairs[0]; p.Same || p.Now.Reason != yesguardv1.Reason_REASON_NO_ANSWER {
		t.Fatalf("with the answer not yet in: %s/%s", p.Now.Outcome, p.Now.Reason)
	}
}

// A duplicate that saw its original done replays done although it ended
// a little before the Complete's record (written after the book had the
// result); a pair whose outcome agrees but whose detail does not is not
// marked plain [same].
func TestReplayDuplicateAfterItsComplete(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	args, _ := approval.CanonicalArgs(nil)
	rec := func(at time.Time, o yesguardv1.Outcome, r yesguardv1.Reason, detail string) *yesguardv1.Decision {
		return &yesguardv1.Decision{
			DecisionId: ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String(), Time: timestamppb.New(at),
			CallId: "d1", Tool: "submit_appeal", ArgsHash: approval.ArgsHash(args), Args: string(args),
			Outcome: o, Reason: r, Evidence: &yesguardv1.Evidence{Detail: detail}, Kind: yesguardv1.DecisionKind_DECISION_KIND_CHECK,
		}
	}
	allow := rec(t0.Add(20*time.Millisecond), yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED, "a detail the guard no longer writes")
	dup := rec(t0.Add(30*time.Millisecond), yesguardv1.Outcome_OUTCOME_DUPLICATE, yesguardv1.Reason_REASON_DUPLICATE, guard.DetailOriginalDone)
	dup.WaitedMs, dup.OriginalDecisionId = 20, allow.DecisionId // it waited for the original's result, ending at 50 ms
	complete := &yesguardv1.Decision{
		DecisionId: ulid.MustNew(ulid.Timestamp(t0), ulid.DefaultEntropy()).String(), Time: timestamppb.New(t0.Add(52 * time.Millisecond)),
		CallId: "d1", Kind: yesguardv1.DecisionKind_DECISION_KIND_COMPLETE, OriginalDecisionId: allow.DecisionId, Result: `{"status":"submitted"}`,
	}
	c := &Call{ID: "d1", Records: []*yesguardv1.Decision{allow, dup, complete}, Events: []Event{
		{Event: say("d1", 1, transcript.Agent, "Shall I submit your appeal now?"), ReceivedAt: t0},
		{Event: say("d1", 2, transcript.Caller, "Yes."), ReceivedAt: t0.Add(10 * time.Millisecond)},
	}}
	res, err := Replay(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got *Pair
	for i := range res.Pairs {
		if res.Pairs[i].Recorded == dup {
			got = &res.Pairs[i]
		}
	}
	if got == nil || !got.Same || !got.DetailSame {
		t.Fatalf("the duplicate replayed as %s/%s %q, want it done as recorded", got.Now.Outcome, got.Now.Reason, got.Now.GetEvidence().GetDetail())
	}
	var out bytes.Buffer
	Text(&out, []*Result{res})
	if !strings.Contains(out.String(), "[same outcome, other detail]") || !strings.Contains(out.String(), "(1 of them with another detail)") {
		t.Fatalf("the ALLOW whose detail changed is not marked so:\n%s", out.String())
	}
	if res.Changed() != 0 {
		t.Fatalf("changed: %d", res.Changed())
	}
}

// jetStream starts a real nats-server with JetStream and the guard's two
// streams.
func jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultStreams
	for name, subj := range map[string]string{s.TranscriptStream: s.TranscriptPrefix + ".>", s.DecisionStream: s.DecisionPrefix + ".>"} {
		if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{subj}}); err != nil {
			t.Fatal(err)
		}
	}
	return js
}

// TestReadStreams: a call is read from the transcript and decision streams
// by subject (other calls' messages are not), with each event's stream
// timestamp as its arrival, and replayed.
func TestReadStreams(t *testing.T) {
	js := jetStream(t)
	ctx := t.Context()
	s := DefaultStreams
	pub := func(subject string, v any) {
		t.Helper()
		var b []byte
		if m, ok := v.(*yesguardv1.Decision); ok {
			b, _ = protojson.Marshal(m)
		} else {
			b, _ = json.Marshal(v)
		}
		if _, err := js.Publish(ctx, subject, b); err != nil {
			t.Fatal(err)
		}
	}
	pub(s.TranscriptPrefix+".c1", say("c1", 1, transcript.Agent, "Shall I submit your appeal now?"))
	pub(s.TranscriptPrefix+".c2", say("c2", 1, transcript.Agent, "Shall I cancel it?"))
	pub(s.TranscriptPrefix+".c1", say("c1", 2, transcript.Caller, "Yes. Wait, no."))
	pub(s.TranscriptPrefix+".c1", map[string]any{"call_id": "c1", "type": "shout"}) // dropped, as the guard drops it
	// The Check came after both events reached the stream.
	pub(s.DecisionPrefix+".c1", refusal("c1", time.Now().Add(time.Millisecond)))
	pub(s.DecisionPrefix+".c2", refusal("c2", time.Now()))

	c, err := ReadStreams(ctx, js, s, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Events) != 2 || len(c.Records) != 1 || c.Dropped != 1 || c.Events[0].ReceivedAt.IsZero() {
		t.Fatalf("read %d events, %d records, %d dropped: %+v", len(c.Events), len(c.Records), c.Dropped, c)
	}
	res, err := Replay(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed() != 0 {
		t.Fatalf("replay changed: %+v", res.Pairs[0].Now)
	}
	// Under a policy that needs no yes, the refusal is changed.
	open := filepath.Join(t.TempDir(), "open.yaml")
	if err := os.WriteFile(open, []byte("tools:\n  submit_appeal:\n    confirm: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = Replay(ctx, c, Options{Policy: open})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	Text(&out, []*Result{res})
	if res.Changed() != 1 || !strings.Contains(out.String(), "[CHANGED]") || !strings.Contains(out.String(), "1 changed.") {
		t.Fatalf("under an open policy:\n%s", out.String())
	}
	if _, err := ReadStreams(ctx, js, s, "nobody"); err == nil {
		t.Error("a call with nothing on the streams read without error")
	}
}
