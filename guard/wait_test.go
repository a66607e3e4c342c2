package guard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

func gaugeValue(g prometheus.Gauge) float64 { return testutil.ToFloat64(g) }

// waitFor polls cond for a test's synchronisation (never for an
// assertion on time), failing after a generous bound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkAsync starts a Check and returns its answer's channel.
func checkAsync(t *testing.T, h *harness, call string, opts ...checkOpt) <-chan *Verdict {
	ch := make(chan *Verdict, 1)
	go func() { ch <- h.check(call, "submit_appeal", nil, opts...) }()
	waitFor(t, func() bool { return h.inFlight() >= 1 })
	return ch
}

func longWait(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, "testdata/policy.yaml")
	pol, _ := LoadPolicy("testdata/policy.yaml")
	pol.Defaults.Wait = Duration(5 * time.Second)
	if err := h.g.Reload(pol, h.g.rules.Load().locales); err != nil {
		t.Fatal(err)
	}
	return h
}

// The request races the transcript: the Check arrives before the caller's
// yes, while the previous caller line is in the transcript. It must be
// judged on the yes, and answer when the yes lands, not at the wait's end.
func TestCheckWaitsForTheCurrentTurn(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Caller, "I'd like to appeal the decision.")
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	got := checkAsync(t, h, "c")
	time.Sleep(100 * time.Millisecond) // the transcript lags the model
	h.say("c", transcript.Caller, "Yes.")
	resp := <-got
	want(t, resp, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if resp.GetEvidence().GetAnswer().GetText() != "Yes." {
		t.Fatalf("judged %q, want the yes", resp.GetEvidence().GetAnswer().GetText())
	}
	// Woken by the event: far short of the 5 s wait.
	if resp.GetWaitedMs() >= 4000 {
		t.Fatalf("waited %d ms: the event did not wake the check", resp.GetWaitedMs())
	}
}

func TestCheckWaitsForSpeechInFlight(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	h.say("c", transcript.Caller, "Yes.")
	h.event("c", transcript.Event{Speaker: transcript.Caller, Type: transcript.TypeSpeechStarted}, time.Now())
	got := checkAsync(t, h, "c")
	h.say("c", transcript.Caller, "Wait, no.")
	want(t, <-got, refuse, yesguardv1.Reason_REASON_NEGATED)
}

func TestCheckWaitsForRespondingTo(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?", withTimes(0, 1500))
	h.say("c", transcript.Caller, "Let me think.", withTimes(1600, 2000))
	h.say("c", transcript.Agent, "Take your time. Shall I submit it?", withTimes(2100, 3000))
	h.say("c", transcript.Caller, "Yes.", withTimes(3100, 3400))
	// The model answered a caller turn that ends at 5200 ms: wait for it.
	got := checkAsync(t, h, "c", respondingTo(5200))
	h.say("c", transcript.Caller, "No, don't.", withTimes(4800, 5200))
	want(t, <-got, refuse, yesguardv1.Reason_REASON_NEGATED)
}

func TestTimeoutJudgesWhatIsThere(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml") // wait 300ms
	h.say("c", transcript.Caller, "I want to appeal.")
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	resp := h.check("c", "submit_appeal", nil)
	want(t, resp, refuse, yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER)
	if resp.GetEvidence().GetAnswer().GetText() != "I want to appeal." {
		t.Fatalf("answer = %v", resp.GetEvidence().GetAnswer())
	}
}

func TestDeadlineShorterThanWait(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	resp := h.checkCtx(ctx, "c", "submit_appeal", nil)
	want(t, resp, refuse, yesguardv1.Reason_REASON_NO_ANSWER)
	if resp.GetWaitedMs() >= 1000 {
		t.Fatalf("waited %d ms past a 200 ms deadline", resp.GetWaitedMs())
	}
}

func TestCancelledCallerStillJudged(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	want(t, h.checkCtx(ctx, "c", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_NO_ANSWER)
}

func TestUnknownCallThatAppearsDuringTheWait(t *testing.T) {
	h := longWait(t)
	got := checkAsync(t, h, "late")
	h.say("late", transcript.Agent, "Shall I submit the appeal?")
	h.say("late", transcript.Caller, "Yes.")
	want(t, <-got, allow, yesguardv1.Reason_REASON_CONFIRMED)
}

func TestWaitFor(t *testing.T) {
	pol, err := ParsePolicy(strings.NewReader(`
defaults: {wait: 900ms, max_wait: 2s}
tools:
  slow_stt_tool: {wait: 1800ms}
  plain_tool: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		tool      string
		requested time.Duration
		want      time.Duration
	}{
		{"defaults", "plain_tool", 0, 900 * time.Millisecond},
		{"unlisted tool takes the defaults", "refund_order", 0, 900 * time.Millisecond},
		{"the tool's own wait", "slow_stt_tool", 0, 1800 * time.Millisecond},
		{"the request's wait beats the tool's", "slow_stt_tool", 300 * time.Millisecond, 300 * time.Millisecond},
		{"the request's wait is capped at max_wait", "plain_tool", time.Minute, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pol.WaitFor(tc.tool, tc.requested); got != tc.want {
				t.Fatalf("WaitFor(%q, %s) = %s, want %s", tc.tool, tc.requested, got, tc.want)
			}
		})
	}
}

func TestPolicyRejectsWaitsAboveMaxWait(t *testing.T) {
	_, err := ParsePolicy(strings.NewReader("defaults: {wait: 3s, max_wait: 2s}\ntools:\n  t1: {wait: 5s}\n  t2: {wait: 0s}\n"))
	for _, field := range []string{"defaults.wait", "tools.t1.wait", "tools.t2.wait"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("error %v does not name %s", err, field)
		}
	}
}

// A Check's own wait_ms replaces the tool's wait: with the tool waiting
// 5 s and the request 50 ms, an unanswered question is judged long before
// the tool's wait would end.
func TestRequestWaitReplacesTheToolWait(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	resp := h.check("c", "submit_appeal", nil, func(r *Request) { r.Wait = 50 * time.Millisecond })
	want(t, resp, refuse, yesguardv1.Reason_REASON_NO_ANSWER)
	if resp.GetWaitedMs() >= 4000 {
		t.Fatalf("waited %d ms: the request's 50 ms wait was not used", resp.GetWaitedMs())
	}
}

// A gap in a publisher's seqs refuses with TRANSCRIPT_GAP once the wait
// ends; an event that fills it during the wait lets the check be judged.
func TestGapRefusesUntilFilled(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml") // wait 300ms
	ev := func(call string, sp transcript.Speaker, seq uint64, text string) {
		t.Helper()
		src := "stt"
		if sp == transcript.Agent {
			src = "tts"
		}
		e := transcript.Event{CallID: call, Speaker: sp, Type: transcript.TypeTranscript, Final: true, Text: text, Source: src, Epoch: 1, Seq: seq}
		if ok, why := h.store.Apply(e, time.Now()); !ok {
			t.Fatal(why)
		}
	}
	ev("gap", transcript.Agent, 1, "Shall I submit the appeal?")
	ev("gap", transcript.Caller, 1, "Yes.")
	ev("gap", transcript.Caller, 3, "Go ahead.") // seq 2 ("Wait, no.") is missing
	resp := h.check("gap", "submit_appeal", nil)
	want(t, resp, refuse, yesguardv1.Reason_REASON_TRANSCRIPT_GAP)
	if !strings.Contains(resp.GetEvidence().GetDetail(), "seq 2") {
		t.Fatalf("detail %q does not say what is missing", resp.GetEvidence().GetDetail())
	}

	h2 := longWait(t)
	h = h2
	ev("fill", transcript.Agent, 1, "Shall I submit the appeal?")
	ev("fill", transcript.Caller, 1, "Yes.")
	ev("fill", transcript.Caller, 3, "Go ahead.")
	got := checkAsync(t, h, "fill")
	ev("fill", transcript.Caller, 2, "Wait, no.")
	want(t, <-got, refuse, yesguardv1.Reason_REASON_NEGATED)
}

// While the feed is behind (catching up after a start or a reconnect),
// every Check refuses with TRANSCRIPT_GAP and the feed's reason.
func TestFeedBehindRefuses(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	h.say("c", transcript.Caller, "Yes.")
	h.g.cfg.Feed = func() (FeedState, string) {
		return FeedBehind, "catching up with the transcript stream: 12 events to apply"
	}
	resp := h.check("c", "submit_appeal", nil)
	want(t, resp, refuse, yesguardv1.Reason_REASON_TRANSCRIPT_GAP)
	if !strings.Contains(resp.GetEvidence().GetDetail(), "catching up") {
		t.Fatalf("detail %q", resp.GetEvidence().GetDetail())
	}
}

// The evidence names the publisher of each turn (Turn.source).
func TestEvidenceNamesTheSources(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	for _, e := range []transcript.Event{
		{CallID: "s", Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Shall I submit the appeal?", Source: "tts", Epoch: 1, Seq: 1},
		{CallID: "s", Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Yes.", Source: "stt", Epoch: 1, Seq: 1},
	} {
		if ok, why := h.store.Apply(e, time.Now()); !ok {
			t.Fatal(why)
		}
	}
	resp := h.check("s", "submit_appeal", nil)
	want(t, resp, allow, yesguardv1.Reason_REASON_CONFIRMED)
	if q, a := resp.GetEvidence().GetQuestion().GetSource(), resp.GetEvidence().GetAnswer().GetSource(); q != "tts" || a != "stt" {
		t.Fatalf("sources: question %q, answer %q", q, a)
	}
	if resp.Turn.GetSource() != "stt" {
		t.Fatalf("the turn used: %v", resp.Turn)
	}
}

// The agent's filler for the very response a Check carries ("Okay, one
// moment.") settles no gap for that Check: the Check leaves the filler out,
// so for it nothing the agent said came after the missing "Wait, no.".
// Red team finding 2: the filler cleared every gap and the yes was allowed.
func TestFillerOfTheCheckSettlesNoGap(t *testing.T) {
	for _, tc := range []struct {
		name string
		miss func(h *harness, call string) // leaves the call uncertain after the yes
	}{
		{"seq gap", func(h *harness, call string) {
			h.apply(transcript.Event{CallID: call, Speaker: transcript.Caller, Type: transcript.TypeSpeechStopped, Source: "stt", Epoch: 1, Seq: 3})
		}},
		{"rejected seq jump", func(h *harness, call string) {
			ev := transcript.Event{CallID: call, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Wait, no.", Source: "stt", Epoch: 1, Seq: 1 << 63}
			if ok, _ := h.store.Apply(ev, time.Now()); ok {
				h.t.Fatal("a seq jump of 2^63 was applied")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, during := range []bool{false, true} {
				h := newHarness(t, "testdata/policy.yaml")
				call := fmt.Sprintf("%s-%v", strings.ReplaceAll(tc.name, " ", "-"), during)
				h.apply(transcript.Event{CallID: call, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Shall I submit your appeal now?", Source: "tts", Epoch: 1, Seq: 1})
				h.apply(transcript.Event{CallID: call, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Yes.", Source: "stt", Epoch: 1, Seq: 1})
				tc.miss(h, call)
				filler := transcript.Event{CallID: call, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Okay, one moment.", Source: "tts", Epoch: 1, Seq: 2, ResponseID: "resp-1"}
				var resp *Verdict
				if during {
					got := checkAsync(t, h, call, respID("resp-1"))
					h.apply(filler)
					resp = <-got
				} else {
					h.apply(filler)
					resp = h.check(call, "submit_appeal", nil, respID("resp-1"))
				}
				want(t, resp, refuse, yesguardv1.Reason_REASON_TRANSCRIPT_GAP)

				// Agent speech of another response settles it: the caller's
				// answer to a new question is judged.
				h.apply(transcript.Event{CallID: call, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Shall I submit your appeal now?", Source: "tts", Epoch: 1, Seq: 3, ResponseID: "resp-2"})
				h.apply(transcript.Event{CallID: call, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Yes, please.", Source: "stt", Epoch: 2, Seq: 1})
				want(t, h.check(call, "submit_appeal", nil, respID("resp-3")), allow, yesguardv1.Reason_REASON_CONFIRMED)
			}
		})
	}
}

// Audio time from two clocks (a recogniser restarted with a new epoch that
// counts from 0 again; a speech side stamping 5 s behind) does not decide
// who spoke last: an utterance that audio time puts before the other
// speaker's, from another run that arrived earlier, leaves the call
// uncertain. Red team finding 8: both were allowed.
func TestTwoClocksDoNotDecideWhoSpokeLast(t *testing.T) {
	ev := func(call string, sp transcript.Speaker, src string, epoch, seq uint64, text string, start, end int64) transcript.Event {
		return transcript.Event{CallID: call, Speaker: sp, Type: transcript.TypeTranscript, Final: true, Text: text,
			Source: src, Epoch: epoch, Seq: seq, StartMS: &start, EndMS: &end}
	}
	h := newHarness(t, "testdata/policy.yaml")
	// (a) The recogniser restarts; its new run counts audio time from 0.
	h.apply(ev("a", transcript.Agent, "tts", 1, 1, "Shall I submit the appeal?", 20000, 21800))
	h.apply(ev("a", transcript.Caller, "stt", 1, 1, "Yes.", 22000, 22300))
	h.apply(ev("a", transcript.Caller, "stt", 2, 1, "Wait, no.", 300, 700))
	want(t, h.check("a", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_TRANSCRIPT_GAP)

	// (b) The speech side's clock is 5 s behind the recogniser's.
	h.apply(ev("b", transcript.Agent, "tts", 1, 1, "Shall I submit the appeal?", 0, 1500))
	h.apply(ev("b", transcript.Caller, "stt", 1, 1, "Yes.", 7000, 7300))
	h.apply(ev("b", transcript.Agent, "tts", 1, 2, "Done. Shall I also cancel your subscription?", 3000, 5000))
	want(t, h.check("b", "cancel_subscription", nil), refuse, yesguardv1.Reason_REASON_TRANSCRIPT_GAP)

	// One clock: a late caller final in its place is judged.
	h.apply(ev("one", transcript.Agent, "tts", 1, 1, "Shall I submit the appeal?", 0, 1500))
	h.apply(ev("one", transcript.Caller, "tts", 1, 3, "Wait, no.", 2600, 3000))
	h.apply(ev("one", transcript.Caller, "tts", 1, 2, "Yes.", 2000, 2400))
	want(t, h.check("one", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_NEGATED)
}
