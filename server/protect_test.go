package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// TestRedactionInTheLogAndListDecisions: with --redact-drop, --redact-hash
// and --redact-digits, the card number and the e-mail the pipeline passed
// and the caller's digits are absent from the decision log and from
// ListDecisions (records and transcript), the hashed field is there as
// its keyed hash, args_hash is of the arguments as given, and the Check's
// own answer is redacted by the same rules (red team F7: a pipeline token
// reads no more of a call than an auditor).
func TestRedactionInTheLogAndListDecisions(t *testing.T) {
	key := filepath.Join(t.TempDir(), "redact.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startE2E(t, func(c *Config) {
		c.RedactDrop, c.RedactHash, c.RedactKeyFile, c.RedactDigits = "card.number", "customer.email", key, 4
	})
	const card, email = "4242424242424242", "dana@example.org"
	e.say("red-1", transcript.Agent, "Shall I pay the bill of 71.25 with the card ending 4242 now?")
	e.say("red-1", transcript.Caller, "Yes, the card 4242 4242 4242 4242 is fine.")
	args := map[string]any{"amount": 71.25, "card": map[string]any{"number": card}, "customer": map[string]any{"email": email}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.check(ctx, "red-1", "pay_bill", args)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(resp.String(), "4242") || !strings.Contains(resp.GetAnswerText(), "#### ####") {
		t.Errorf("the Check answer was not redacted: question %q, answer %q", resp.GetQuestionSentence(), resp.GetAnswerText())
	}
	st, _ := structpb.NewStruct(args)
	canonical, _ := approval.CanonicalArgs(st)
	wantHash := approval.ArgsHash(canonical)

	logged := e.waitLogged(resp.GetDecisionId())
	line := fmt.Sprint(logged)
	list, err := e.client.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: "red-1", IncludeTranscript: true})
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := protojson.Marshal(list)
	for where, text := range map[string]string{"the decision log": line, "ListDecisions": string(listed)} {
		for _, secret := range []string{card, email, "4242"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q:\n%s", where, secret, text)
			}
		}
		if !strings.Contains(text, "hmac:") {
			t.Errorf("%s lacks the hashed e-mail:\n%s", where, text)
		}
	}
	if logged["args_hash"] != wantHash {
		t.Errorf("args_hash %v, want the hash of the arguments as given %s", logged["args_hash"], wantHash)
	}
	if len(list.GetDecisions()) != 1 || list.GetDecisions()[0].GetArgsHash() != wantHash {
		t.Errorf("ListDecisions: %d records, args_hash %q", len(list.GetDecisions()), list.GetDecisions()[0].GetArgsHash())
	}
	if len(list.GetTranscript()) == 0 {
		t.Error("ListDecisions gave no transcript")
	}
}

// TestCompleteFailedDoesNotFreeTheYesForOtherArguments: through the real
// server, in both states: after Complete{failed}, the same action may be
// retried on the same yes, but the yes does not allow other arguments.
func TestCompleteFailedDoesNotFreeTheYesForOtherArguments(t *testing.T) {
	for _, state := range []string{StateMemory, StateJetStream} {
		t.Run(state, func(t *testing.T) {
			e := startE2E(t, func(c *Config) { c.State = state })
			e.say("fail-1", transcript.Agent, "Shall I submit your appeal now?")
			e.say("fail-1", transcript.Caller, "Yes, please.")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			check := func(appeal string) *yesguardv1.CheckResponse {
				t.Helper()
				resp, err := e.check(ctx, "fail-1", "submit_appeal", map[string]any{"appeal_id": appeal})
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			first := check("A-17")
			if first.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
				t.Fatalf("first: %v %v", first.GetOutcome(), first.GetReason())
			}
			if _, err := e.client.Complete(ctx, &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId(), Failed: true}); err != nil {
				t.Fatal(err)
			}
			if other := check("A-99"); other.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || other.GetReason() != yesguardv1.Reason_REASON_EVIDENCE_USED {
				t.Errorf("other arguments on the failed action's yes: %v %v, want REFUSE EVIDENCE_USED", other.GetOutcome(), other.GetReason())
			}
			if retry := check("A-17"); retry.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
				t.Errorf("the failed action retried: %v %v, want ALLOW", retry.GetOutcome(), retry.GetReason())
			}
		})
	}
}

// TestLimitHitThroughTheServer: a caller final whose lang is over
// --max-lang-bytes is dropped, counted under its limit, and leaves its
// call refusing (the "no" it may carry is missing), with a detail that
// names the limit; the agent speaking again ends that.
func TestLimitHitThroughTheServer(t *testing.T) {
	e := startE2E(t)
	before := e.eventsSeen()
	e.say("lim-1", transcript.Agent, "Shall I submit your appeal now?")
	e.say("lim-1", transcript.Caller, "Yes.")
	e.raw(DefaultSubjectPrefix+".lim-1", `{"call_id":"lim-1","speaker":"caller","type":"transcript","final":true,"text":"Wait, no.","lang":"`+strings.Repeat("x", 64)+`"}`)
	e.waitApplied(before, 3)
	if got := labelled(t, e.reg, "yesguard_transcript_limit_hits_total", "limit", transcript.LimitLangBytes); got != 1 {
		t.Errorf("limit_hits_total{limit=lang_bytes} = %v, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.check(ctx, "lim-1", "submit_appeal", map[string]any{"appeal_id": "A-17"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || resp.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_GAP ||
		!strings.Contains(resp.GetDetail(), transcript.ReasonLangTooLong) {
		t.Errorf("Check after a dropped caller final: %v %v %q, want REFUSE TRANSCRIPT_GAP naming %s",
			resp.GetOutcome(), resp.GetReason(), resp.GetDetail(), transcript.ReasonLangTooLong)
	}
	e.say("lim-1", transcript.Agent, "Shall I submit your appeal A-17 now?")
	e.say("lim-1", transcript.Caller, "Yes, please.")
	resp, err = e.check(ctx, "lim-1", "submit_appeal", map[string]any{"appeal_id": "A-17"})
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Errorf("after the agent asked again: %v %v %v", resp.GetOutcome(), resp.GetReason(), err)
	}
}

// TestFloodDoesNotStarveChecks: while a publisher floods the guard with
// 4 KB events on other calls, at twice the events a second the limit lets
// each call send and over the bytes a call may hold, clean calls are
// still judged right, and every Check is answered before a generous
// deadline, in both states. The flood is paced to 2000 events a second
// (8 MB/s), which the guard absorbs even under the race detector; it
// asserts no timing beyond the deadline: bench's flood phase measures the
// Check p99 under an unpaced flood. (A flood of new call ids past
// --max-calls, or of bytes past --max-total-bytes, refuses new calls
// instead: TestLimits.)
func TestFloodDoesNotStarveChecks(t *testing.T) {
	for _, state := range []string{StateMemory, StateJetStream} {
		t.Run(state, func(t *testing.T) { floodAndCheck(t, state) })
	}
}

func floodAndCheck(t *testing.T, state string) {
	e := startE2E(t, func(c *Config) {
		c.State = state
		c.Limits.MaxCallBytes = 32 << 10
		c.Limits.MaxTotalBytes = 64 << 20
		c.Limits.MaxEventsPerSecond = 20
	})
	flood, err := nats.Connect(e.srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	text := strings.Repeat("flood ", 680) // 4080 bytes
	const (
		floodCalls = 50
		burst      = 100                   // events every tick: 2000 a second, 40 a call
		tick       = 50 * time.Millisecond //
		ticks      = 80                    // 4 s, 8000 events, 32 MB
	)
	payloads := make([][]byte, floodCalls)
	for i := range payloads {
		payloads[i] = []byte(fmt.Sprintf(`{"call_id":"flood-%d","speaker":"caller","type":"transcript","final":true,"text":%q}`, i, text))
	}
	var sent, done atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(1)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := 0; n < ticks; n++ {
			for range burst {
				i := int(sent.Add(1))
				if err := flood.Publish(fmt.Sprint(DefaultSubjectPrefix, ".flood-", i%floodCalls), payloads[i%floodCalls]); err != nil {
					return
				}
			}
			_ = flood.Flush()
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	})
	defer func() {
		stop()
		wg.Wait()
	}()
	for sent.Load() < 4*burst { // under way before the clean calls start
		time.Sleep(time.Millisecond)
	}
	// Clean calls, one after the other, until the flood is over: at
	// least 10. (A count would end them before the flood hits its limits
	// when the machine is fast.)
	checks := 0
	for ; checks < 10 || done.Load() == 0; checks++ {
		call := fmt.Sprint("clean-", checks)
		e.say(call, transcript.Agent, "Shall I submit your appeal now?")
		e.say(call, transcript.Caller, "Yes, please.")
		// The widest wait the default policy allows (max_wait): a flood may
		// delay a Check on a loaded machine, but not starve it.
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-17"})
		resp, err := e.client.Check(cctx, &yesguardv1.CheckRequest{CallId: call, Tool: "submit_appeal", Args: args, WaitMs: 3000})
		cancel()
		if err != nil {
			t.Fatalf("%s under the flood: %v (%d flood events sent)", call, err, sent.Load())
		}
		if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			t.Fatalf("%s under the flood: %v %v %q, want ALLOW (%d flood events sent)", call, resp.GetOutcome(), resp.GetReason(), resp.GetDetail(), sent.Load())
		}
	}
	stop()
	wg.Wait()
	for _, limit := range []string{transcript.LimitEventsPerSecond, transcript.LimitCallBytes} {
		if got := labelled(t, e.reg, "yesguard_transcript_limit_hits_total", "limit", limit); got == 0 {
			t.Errorf("the flood never hit limit %s", limit)
		}
	}
	t.Logf("%d flood events sent while %d clean calls were judged", sent.Load(), checks)
}
