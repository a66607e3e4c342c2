package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// askLangs are the seven languages and the plain yes of each.
var askLangs = []struct{ lang, yes, no, filler string }{
	{"en", "yes", "no", "One moment."},
	{"es", "sí", "no", "Un momento."},
	{"de", "ja", "nein", "Einen Moment."},
	{"fr", "oui", "non", "Un instant."},
	{"it", "sì", "no", "Un momento."},
	{"nl", "ja", "nee", "Een moment."},
	{"pt", "sim", "não", "Um momento."},
}

// askTools are the confirmed tools of policy.example.yaml with arguments.
var askTools = []struct {
	tool string
	args map[string]any
}{
	{"submit_appeal", map[string]any{"appeal_id": "A-17"}},
	{"book_appointment", map[string]any{"date": "2026-12-08", "time": "15:00"}},
	{"cancel_appointment", map[string]any{"appointment_id": "42"}},
	{"pay_bill", map[string]any{"amount": 71.35}},
	{"file_dispute", map[string]any{"amount": 40.0}},
}

// utter publishes a final in lang, with an optional response id, and
// waits until the guard took it.
func (e *e2e) utter(call string, sp transcript.Speaker, lang, text, responseID string) {
	e.t.Helper()
	before := e.eventsSeen()
	e.mu.Lock()
	e.seq[call]++
	seq := e.seq[call]
	e.mu.Unlock()
	if err := probe.Publish(e.pub, DefaultSubjectPrefix, transcript.Event{
		CallID: call, Seq: seq, Speaker: sp, Type: transcript.TypeTranscript, Text: text, Final: true, Lang: lang, ResponseID: responseID,
	}); err != nil {
		e.t.Fatal(err)
	}
	e.waitApplied(before, 1)
}

func (e *e2e) mustCheck(call, tool string, args map[string]any) *yesguardv1.CheckResponse {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	r, err := e.check(ctx, call, tool, args)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// refusedWithAsk drives a Check that refuses with the guard's question.
func (e *e2e) refusedWithAsk(call, tool, lang, filler, yes string, args map[string]any) *yesguardv1.Ask {
	e.t.Helper()
	e.utter(call, transcript.Agent, lang, filler, "")
	e.utter(call, transcript.Caller, lang, yes, "")
	r := e.mustCheck(call, tool, args)
	if r.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || r.GetAsk() == nil {
		e.t.Fatalf("%s %s: want a REFUSE with an ask, got %s %s ask=%v (%s)", lang, tool, r.GetOutcome(), r.GetReason(), r.GetAsk(), r.GetDetail())
	}
	if r.GetAsk().GetLang() != lang || r.GetAsk().GetId() == "" || !strings.Contains(r.GetMessage(), r.GetAsk().GetText()) {
		e.t.Fatalf("%s %s: ask %v, message %q", lang, tool, r.GetAsk(), r.GetMessage())
	}
	return r.GetAsk()
}

func examplePolicy(t *testing.T) e2eOpt {
	b, err := os.ReadFile("../policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return withPolicy(string(b))
}

// In all seven languages, for every confirmed tool of policy.example.yaml:
// a refused Check carries the guard's question, the question spoken as the
// agent's turn and a plain yes make the next Check ALLOW, resting on the
// guard's question, over NATS and gRPC with the JetStream state.
func TestAskSpokenThenYesAllows(t *testing.T) {
	e := startE2E(t, examplePolicy(t))
	n := 0
	for _, l := range askLangs {
		for _, tc := range askTools {
			n++
			call := fmt.Sprintf("ask-%s-%s", l.lang, tc.tool)
			a := e.refusedWithAsk(call, tc.tool, l.lang, l.filler, l.yes, tc.args)
			// Half the asks carry their id as the response id, half are
			// matched on their text.
			rid := ""
			if n%2 == 0 {
				rid = a.GetId()
			}
			e.utter(call, transcript.Agent, l.lang, a.GetText(), rid)
			e.utter(call, transcript.Caller, l.lang, l.yes, "")
			r := e.mustCheck(call, tc.tool, tc.args)
			if r.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
				t.Errorf("%s %s: ask %q then %q: %s %s (%s)", l.lang, tc.tool, a.GetText(), l.yes, r.GetOutcome(), r.GetReason(), r.GetDetail())
				continue
			}
			if got := r.GetEvidence().GetGuardQuestion(); got != a.GetId() {
				t.Errorf("%s %s: guard_question %q, want %q", l.lang, tc.tool, got, a.GetId())
			}
			line := e.waitLogged(r.GetDecisionId())
			if ev, _ := line["evidence"].(map[string]any); ev["guard_question"] != a.GetId() {
				t.Errorf("%s %s: the record's evidence %v has no guard_question %s", l.lang, tc.tool, ev, a.GetId())
			}
			t.Logf("%s %-18s %s", l.lang, tc.tool, a.GetText())
		}
	}
	issued := testutil.ToFloat64(askCounter(t, e, "issued"))
	recognised := testutil.ToFloat64(askCounter(t, e, "recognised"))
	if issued != float64(n) || recognised < float64(n) {
		t.Errorf("yesguard_guard_asks_total: issued %v, recognised %v; want %d and at least %d", issued, recognised, n, n)
	}
}

// askCounter reads one series of yesguard_guard_asks_total from e's registry.
func askCounter(t *testing.T, e *e2e, event string) prometheus.Counter {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	for _, mf := range mfs {
		if mf.GetName() != "yesguard_guard_asks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "event" && lp.GetValue() == event {
					c.Add(m.GetCounter().GetValue())
				}
			}
		}
	}
	return c
}

// The question texts: stated arguments as people say them.
func TestAskTexts(t *testing.T) {
	e := startE2E(t, examplePolicy(t))
	for _, tc := range []struct{ lang, tool, want string }{
		{"en", "pay_bill", "Shall I pay your bill of $71.35 now?"},
		{"es", "book_appointment", "¿Le reservo la cita del martes 8 de diciembre a las 15:00?"},
		{"en", "book_appointment", "Shall I book your appointment for Tuesday, December 8 at 3:00 PM?"},
		{"de", "pay_bill", "Soll ich Ihre Rechnung über 71,35 $ jetzt bezahlen?"},
		{"nl", "pay_bill", "Zal ik uw rekening van $ 71,35 nu betalen?"},
	} {
		args := map[string]any{"amount": 71.35}
		if tc.tool == "book_appointment" {
			args = map[string]any{"date": "2026-12-08", "time": "15:00"}
		}
		a := e.refusedWithAsk("texts-"+tc.lang+tc.tool, tc.tool, tc.lang, "Hm.", "ja", args)
		if a.GetText() != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.lang, tc.tool, a.GetText(), tc.want)
		}
	}
}

// The unsafe side: the guard's question stands only for its call, tool
// and arguments, within its life, spoken before the caller's answer and
// after the guard issued it, and answered with a yes.
func TestAskUnsafeSideRefuses(t *testing.T) {
	pol, err := os.ReadFile("../policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A question the judge cannot read as one about paying, so that only
	// its recognition could allow.
	odd := strings.Replace(string(pol), `en: "Shall I pay your bill of {amount} now?"`, `en: "Ready for the {amount} thing?"`, 1)
	odd = strings.Replace(odd, "ask_ttl: 2m", "ask_ttl: 2s", 1)
	e := startE2E(t, withPolicy(odd))
	pay := map[string]any{"amount": 71.35}
	refuse := func(name string, r *yesguardv1.CheckResponse, want yesguardv1.Reason) {
		t.Helper()
		if r.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || (want != 0 && r.GetReason() != want) {
			t.Errorf("%s: %s %s (%s), want REFUSE %s", name, r.GetOutcome(), r.GetReason(), r.GetDetail(), want)
		}
		if r.GetEvidence().GetGuardQuestion() != "" && r.GetReason() != yesguardv1.Reason_REASON_NEGATED {
			t.Errorf("%s: rests on guard question %s", name, r.GetEvidence().GetGuardQuestion())
		}
	}

	t.Run("the ask alone allows", func(t *testing.T) {
		a := e.refusedWithAsk("u-ok", "pay_bill", "en", "Hm.", "yes", pay)
		e.utter("u-ok", transcript.Agent, "en", a.GetText(), "")
		e.utter("u-ok", transcript.Caller, "en", "yes", "")
		if r := e.mustCheck("u-ok", "pay_bill", pay); r.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			t.Fatalf("control: %s %s (%s)", r.GetOutcome(), r.GetReason(), r.GetDetail())
		}
	})
	t.Run("other arguments", func(t *testing.T) {
		a := e.refusedWithAsk("u-args", "pay_bill", "en", "Hm.", "yes", pay)
		e.utter("u-args", transcript.Agent, "en", a.GetText(), a.GetId())
		e.utter("u-args", transcript.Caller, "en", "yes", "")
		refuse("other args", e.mustCheck("u-args", "pay_bill", map[string]any{"amount": 80.0}), 0)
	})
	t.Run("another tool", func(t *testing.T) {
		a := e.refusedWithAsk("u-tool", "pay_bill", "en", "Hm.", "yes", pay)
		e.utter("u-tool", transcript.Agent, "en", a.GetText(), a.GetId())
		e.utter("u-tool", transcript.Caller, "en", "yes", "")
		refuse("another tool", e.mustCheck("u-tool", "file_dispute", pay), 0)
	})
	t.Run("another call", func(t *testing.T) {
		a := e.refusedWithAsk("u-callA", "pay_bill", "en", "Hm.", "yes", pay)
		e.utter("u-callB", transcript.Agent, "en", a.GetText(), a.GetId())
		e.utter("u-callB", transcript.Caller, "en", "yes", "")
		refuse("another call", e.mustCheck("u-callB", "pay_bill", pay), 0)
	})
	t.Run("a no", func(t *testing.T) {
		a := e.refusedWithAsk("u-no", "pay_bill", "en", "Hm.", "yes", pay)
		e.utter("u-no", transcript.Agent, "en", a.GetText(), "")
		e.utter("u-no", transcript.Caller, "en", "no", "")
		refuse("a no", e.mustCheck("u-no", "pay_bill", pay), yesguardv1.Reason_REASON_NEGATED)
	})
	t.Run("spoken after the answer", func(t *testing.T) {
		a := e.refusedWithAsk("u-after", "pay_bill", "en", "Hm.", "yes", pay)
		e.utter("u-after", transcript.Caller, "en", "yes", "")
		e.utter("u-after", transcript.Agent, "en", a.GetText(), a.GetId())
		refuse("spoken after", e.mustCheck("u-after", "pay_bill", pay), yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER)
	})
	t.Run("spoken before the guard issued it", func(t *testing.T) {
		// The model says the very text first; the guard then issues the
		// same question: the turn spoken before it is not the guard's.
		e.utter("u-before", transcript.Agent, "en", "Ready for the $71.35 thing?", "")
		e.utter("u-before", transcript.Caller, "en", "yes", "")
		r := e.mustCheck("u-before", "pay_bill", pay)
		refuse("first", r, 0)
		if r.GetAsk().GetText() != "Ready for the $71.35 thing?" {
			t.Fatalf("ask %v", r.GetAsk())
		}
		refuse("repeated before issue", e.mustCheck("u-before", "pay_bill", pay), 0)
	})
	t.Run("expired", func(t *testing.T) {
		a := e.refusedWithAsk("u-exp", "pay_bill", "en", "Hm.", "yes", pay)
		e.utter("u-exp", transcript.Agent, "en", a.GetText(), "")
		e.utter("u-exp", transcript.Caller, "en", "yes", "")
		// The ask's life is a clock comparison: past its end it is over.
		time.Sleep(time.Until(a.GetExpiresAt().AsTime()) + 200*time.Millisecond)
		refuse("expired", e.mustCheck("u-exp", "pay_bill", pay), 0)
	})
	t.Run("no ask for a negation or a duplicate", func(t *testing.T) {
		e.utter("u-neg", transcript.Agent, "en", "Shall I pay your bill of $71.35 now?", "")
		e.utter("u-neg", transcript.Caller, "en", "no", "")
		if r := e.mustCheck("u-neg", "pay_bill", pay); r.GetReason() != yesguardv1.Reason_REASON_NEGATED || r.GetAsk() != nil {
			t.Errorf("negation: %s ask=%v", r.GetReason(), r.GetAsk())
		}
		if r := e.mustCheck("u-ok", "pay_bill", pay); r.GetOutcome() != yesguardv1.Outcome_OUTCOME_DUPLICATE || r.GetAsk() != nil {
			t.Errorf("duplicate: %s ask=%v", r.GetOutcome(), r.GetAsk())
		}
	})
}

// GET /prompt serves what `yesguard prompt` prints, for the policy in
// force.
func TestPromptOverHTTP(t *testing.T) {
	e := startE2E(t, examplePolicy(t), func(c *Config) { c.HTTPAddr = "127.0.0.1:0" })
	resp, err := http.Get("http://" + e.srv.HTTPAddr() + "/prompt?tool=pay_bill&lang=de")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "(de) Soll ich Ihre Rechnung über {amount} jetzt bezahlen?") {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	resp2, err := http.Get("http://" + e.srv.HTTPAddr() + "/prompt?lang=xx")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown language: status %d", resp2.StatusCode)
	}
}
