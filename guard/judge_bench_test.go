package guard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// benchLang is one language's words for the benchmark policy's tools.
type benchLang struct {
	bookVerbs, bookObjects []string
	payVerbs, payObjects   []string
}

// benchLangs are the policy words per language; a language whose locale is
// not loaded is left out of the policy (a policy may not name it).
var benchLangs = map[string]benchLang{
	"en": {[]string{"book", "schedule"}, []string{"appointment", "booking"}, []string{"pay"}, []string{"bill", "payment"}},
	"es": {[]string{"reservar", "agendar"}, []string{"cita"}, []string{"pagar"}, []string{"factura", "pago"}},
	"de": {[]string{"buchen", "vereinbaren"}, []string{"Termin"}, []string{"bezahlen"}, []string{"Rechnung"}},
	"fr": {[]string{"réserver", "prendre"}, []string{"rendez-vous"}, []string{"payer", "régler"}, []string{"facture"}},
	"it": {[]string{"prenotare", "fissare"}, []string{"appuntamento"}, []string{"pagare", "saldare"}, []string{"bolletta", "fattura"}},
	"pt": {[]string{"marcar", "agendar"}, []string{"consulta"}, []string{"pagar"}, []string{"fatura", "conta"}},
	"nl": {[]string{"boeken", "inplannen"}, []string{"afspraak"}, []string{"betalen"}, []string{"rekening"}},
}

// judgeSample is one typical decision: the agent's turn, the caller's
// answer, the tool called and the verdict the rules must reach (the
// benchmark fails rather than time the wrong path).
type judgeSample struct {
	lang, name    string
	agent, caller string
	tool          string
	args          map[string]any
	outcome       yesguardv1.Outcome
	reason        yesguardv1.Reason
}

// judgeSamples: extend with a row per language and case. Rows of languages
// without a loaded locale are skipped.
var judgeSamples = []judgeSample{
	{"en", "confirm", "I can book your appointment for Tuesday at 3 pm. Shall I book it?", "Yes, please.",
		"book_appointment", map[string]any{"slot": "tue-15"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"en", "two_sentences", "There is an opening on Thursday at 10:30 in the morning. Would you like me to book that appointment?", "Yeah, go ahead.",
		"book_appointment", map[string]any{"slot": "thu-1030"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"en", "bind", "Your balance is $120.50. Shall I pay the $120.50 bill now?", "Yeah, go ahead.",
		"pay_bill", map[string]any{"amount": 120.5}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"en", "negated", "I can book your appointment for Tuesday at 3 pm. Shall I book it?", "No, don't book it yet.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NEGATED},
	{"en", "hedged", "I can book your appointment for Tuesday at 3 pm. Shall I book it?", "Yes, but only if it's in the morning.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
	{"en", "other_action", "Would you like me to pay the bill?", "Yes.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
	// A tool the policy does not list: its verb and object come from its
	// name.
	{"en", "unlisted_tool", "I can see order A-1043 was charged twice. Shall I refund the order?", "Yes, please do.",
		"refund_order", map[string]any{"order": "A-1043"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"es", "confirm", "Puedo reservar su cita para el martes a las tres. ¿Quiere que reserve la cita?", "Sí, por favor.",
		"book_appointment", map[string]any{"slot": "tue-15"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"es", "negated", "Puedo reservar su cita para el martes a las tres. ¿Quiere que reserve la cita?", "No, todavía no.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NEGATED},
	{"de", "confirm", "Ich kann Ihren Termin für Dienstag um 15 Uhr buchen. Soll ich den Termin buchen?", "Ja, bitte.",
		"book_appointment", map[string]any{"slot": "tue-15"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"de", "negated", "Ich kann Ihren Termin für Dienstag um 15 Uhr buchen. Soll ich den Termin buchen?", "Nein, noch nicht.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NEGATED},
	{"fr", "confirm", "Je peux réserver votre rendez-vous pour mardi à 15 h. Voulez-vous que je réserve le rendez-vous ?", "Oui, s'il vous plaît.",
		"book_appointment", map[string]any{"slot": "tue-15"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"fr", "negated", "Je peux réserver votre rendez-vous pour mardi à 15 h. Voulez-vous que je réserve le rendez-vous ?", "Non, pas encore.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NEGATED},
	{"it", "confirm", "Posso prenotare il suo appuntamento per martedì alle 15. Vuole che prenoti l'appuntamento?", "Sì, grazie.",
		"book_appointment", map[string]any{"slot": "tue-15"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"it", "negated", "Posso prenotare il suo appuntamento per martedì alle 15. Vuole che prenoti l'appuntamento?", "No, non ancora.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NEGATED},
	{"pt", "confirm", "Posso marcar a sua consulta para terça às 15h. Quer que eu marque a consulta?", "Sim, por favor.",
		"book_appointment", map[string]any{"slot": "tue-15"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"pt", "negated", "Posso marcar a sua consulta para terça às 15h. Quer que eu marque a consulta?", "Não, ainda não.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NEGATED},
	{"nl", "confirm", "Ik kan uw afspraak voor dinsdag om 15 uur boeken. Zal ik de afspraak boeken?", "Ja, graag.",
		"book_appointment", map[string]any{"slot": "tue-15"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
	{"nl", "negated", "Ik kan uw afspraak voor dinsdag om 15 uur boeken. Zal ik de afspraak boeken?", "Nee, nog niet.",
		"book_appointment", map[string]any{"slot": "tue-15"}, refuse, yesguardv1.Reason_REASON_NEGATED},
}

// benchPolicy writes a policy naming book_appointment and pay_bill in
// every loaded language that benchLangs knows.
func benchPolicy(b *testing.B, locs *patterns.Set) *Policy {
	b.Helper()
	var sb strings.Builder
	list := func(ws []string) string { return "[" + strings.Join(ws, ", ") + "]" }
	tool := func(name string, verbs, objects func(benchLang) []string, extra string) {
		fmt.Fprintf(&sb, "  %s:\n    verbs:\n", name)
		for _, lang := range locs.Langs() {
			if bl, ok := benchLangs[lang]; ok {
				fmt.Fprintf(&sb, "      %s: %s\n", lang, list(verbs(bl)))
			}
		}
		sb.WriteString("    objects:\n")
		for _, lang := range locs.Langs() {
			if bl, ok := benchLangs[lang]; ok {
				fmt.Fprintf(&sb, "      %s: %s\n", lang, list(objects(bl)))
			}
		}
		sb.WriteString(extra)
	}
	sb.WriteString("tools:\n")
	tool("book_appointment", func(l benchLang) []string { return l.bookVerbs }, func(l benchLang) []string { return l.bookObjects }, "")
	tool("pay_bill", func(l benchLang) []string { return l.payVerbs }, func(l benchLang) []string { return l.payObjects }, "    bind: [amount]\n")
	p, err := ParsePolicy(strings.NewReader(sb.String()))
	if err != nil {
		b.Fatalf("bench policy: %v\n%s", err, sb.String())
	}
	return p
}

// benchGuard is a guard over a fresh store and book, without a sink.
func benchGuard(b *testing.B) (*Guard, *transcript.Store) {
	b.Helper()
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		b.Fatal(err)
	}
	store := transcript.NewStore(transcript.Limits{}, transcript.NewMetrics(nil))
	g, err := New(Config{Policy: benchPolicy(b, locs), Locales: locs, Store: store, Book: dedupe.NewMemory(nil)})
	if err != nil {
		b.Fatal(err)
	}
	return g, store
}

// loadSample applies the sample's turns to call, after a few turns of
// earlier conversation, as a call holds them when the model calls a tool.
func loadSample(b *testing.B, store *transcript.Store, call string, s judgeSample, now time.Time) {
	b.Helper()
	evs := []transcript.Event{
		{Speaker: transcript.Agent, Text: "Thank you for calling. How can I help you today?", ResponseID: "r1"},
		{Speaker: transcript.Caller, Text: "Hi, I'd like to sort out my appointment."},
		{Speaker: transcript.Agent, Text: "Of course. Let me look at the calendar for you.", ResponseID: "r2"},
		{Speaker: transcript.Caller, Text: "Thanks."},
		{Speaker: transcript.Agent, Text: s.agent, ResponseID: "r3"},
		{Speaker: transcript.Caller, Text: s.caller},
	}
	for i, ev := range evs {
		ev.CallID, ev.Seq, ev.Type, ev.Final, ev.Lang = call, uint64(i+1), transcript.TypeTranscript, true, s.lang
		start, end := int64(i*3000), int64(i*3000+2500)
		ev.StartMS, ev.EndMS = &start, &end
		if ok, why := store.Apply(ev, now); !ok {
			b.Fatalf("apply %+v: %s", ev, why)
		}
	}
}

func loadedSamples(b *testing.B) []judgeSample {
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		b.Fatal(err)
	}
	var out []judgeSample
	for _, lang := range locs.Langs() {
		n := 0
		for _, s := range judgeSamples {
			if s.lang == lang {
				out = append(out, s)
				n++
			}
		}
		if n == 0 {
			b.Logf("no judge sample for locale %q: add rows to judgeSamples", lang)
		}
	}
	return out
}

// BenchmarkJudge measures the rules on one decision: parsing both turns, finding the question and the
// answer's yes, and building the evidence. The view (snapshot and turns)
// is taken once; the wait, the dedupe book and the decision record are
// left out (see BenchmarkCheck).
func BenchmarkJudge(b *testing.B) {
	for _, s := range loadedSamples(b) {
		b.Run(s.lang+"/"+s.name, func(b *testing.B) {
			g, store := benchGuard(b)
			loadSample(b, store, "call-1", s, time.Now())
			args, err := structpb.NewStruct(s.args)
			if err != nil {
				b.Fatal(err)
			}
			req := &Request{CallID: "call-1", Tool: s.tool, Args: args}
			rs := g.rules.Load()
			c := &check{g: g, rs: rs, tool: rs.tool(s.tool), req: req, args: args.GetFields(), start: time.Now(), v: &Verdict{}}
			v, _ := c.look()
			j := c.judge(v)
			if j.outcome != s.outcome || j.reason != s.reason {
				b.Fatalf("sample judged %s/%s, want %s/%s: %s", j.outcome, j.reason, s.outcome, s.reason, j.evidence.GetDetail())
			}
			b.ReportAllocs()
			for b.Loop() {
				c.judge(v)
			}
		})
	}
}

// BenchmarkCheck measures a whole Check of the engine in process: canonical
// arguments, snapshot, rules, dedupe and metrics (the service's
// validation and decision record are in service.BenchmarkCheck). An ALLOW reserves its action, so each
// ALLOW iteration checks a fresh call; the calls are loaded in batches
// outside the timer.
func BenchmarkCheck(b *testing.B) {
	for _, s := range loadedSamples(b) {
		b.Run(s.lang+"/"+s.name, func(b *testing.B) {
			g, store := benchGuard(b)
			args, err := structpb.NewStruct(s.args)
			if err != nil {
				b.Fatal(err)
			}
			const batch = 4096
			var calls []string
			load := func() {
				now := time.Now()
				calls = calls[:0]
				for i := 0; i < batch; i++ {
					id := fmt.Sprintf("call-%d-%d", time.Now().UnixNano(), i)
					loadSample(b, store, id, s, now)
					calls = append(calls, id)
				}
			}
			load()
			req := func(call string) Request {
				return Request{CallID: call, Tool: s.tool, Args: args, ResponseID: "r4"}
			}
			ctx := context.Background()
			resp := g.Check(ctx, req(calls[0]))
			if resp.GetOutcome() != s.outcome || resp.GetReason() != s.reason {
				b.Fatalf("sample checked %s/%s, want %s/%s: %s", resp.GetOutcome(), resp.GetReason(), s.outcome, s.reason, resp.GetEvidence().GetDetail())
			}
			next := 1
			b.ReportAllocs()
			for b.Loop() {
				if next == batch {
					b.StopTimer()
					load()
					next = 0
					b.StartTimer()
				}
				call := calls[next]
				if s.outcome == allow {
					next++ // a fresh call per ALLOW
				}
				g.Check(ctx, req(call))
			}
		})
	}
}

// BenchmarkCheckStack measures what a Check pays for running on a fresh
// goroutine, as gRPC runs each stream's handler by default: "inline" runs
// the Check on the benchmark's goroutine (its stack already grown), "fresh"
// on a new goroutine each time (its stack grown from the minimum), both on
// the REFUSE path of en/negated so that every iteration does the same work.
func BenchmarkCheckStack(b *testing.B) {
	var s judgeSample
	for _, js := range judgeSamples {
		if js.lang == "en" && js.name == "negated" {
			s = js
		}
	}
	g, store := benchGuard(b)
	loadSample(b, store, "call-1", s, time.Now())
	args, err := structpb.NewStruct(s.args)
	if err != nil {
		b.Fatal(err)
	}
	req := Request{CallID: "call-1", Tool: s.tool, Args: args, ResponseID: "r4"}
	ctx := context.Background()
	b.Run("inline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.Check(ctx, req)
		}
	})
	b.Run("fresh-empty", func(b *testing.B) { // the goroutine and hand-off alone
		done := make(chan error)
		for b.Loop() {
			go func() { done <- nil }()
			<-done
		}
	})
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		done := make(chan struct{})
		for b.Loop() {
			go func() {
				g.Check(ctx, req)
				done <- struct{}{}
			}()
			<-done
		}
	})
}
