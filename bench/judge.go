package main

import (
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yesguard/yesguard/patterns"
)

// The judge phase times the rules on one decision in the bench process,
// per language, with testing.Benchmark: patterns.Judge on a question and
// an answer, with the tool's action and the other tools' compiled once, as
// guard.BenchmarkJudge's loop calls it. BenchmarkJudge also times the
// guard's side of the same call (the evidence's turn and match protos),
// which the guard package keeps to itself, so these rows are a floor of
// its figure: a row over the goal is over it in BenchmarkJudge too.
//
// The samples are the confirm and negated rows of guard's judgeSamples
// (guard/judge_bench_test.go), with the same policy words; a sample judged
// otherwise than its row says is reported, not timed.

// judgeBenchTime is testing.Benchmark's time per sample (its
// -test.benchtime): enough for a stable ns/op on a warm loop, short
// enough to keep the run's wall time. The smoke test shortens it.
var judgeBenchTime = "300ms"

// judgeLang is one language's policy words (book_appointment, and
// pay_bill as the other tool) and its two samples.
type judgeLang struct {
	lang                   string
	bookVerbs, bookObjects []string
	payVerbs, payObjects   []string
	question               string
	yes, no                string
}

var judgeLangs = []judgeLang{
	{"en", []string{"book", "schedule"}, []string{"appointment", "booking"}, []string{"pay"}, []string{"bill", "payment"},
		"I can book your appointment for Tuesday at 3 pm. Shall I book it?", "Yes, please.", "No, don't book it yet."},
	{"es", []string{"reservar", "agendar"}, []string{"cita"}, []string{"pagar"}, []string{"factura", "pago"},
		"Puedo reservar su cita para el martes a las tres. ¿Quiere que reserve la cita?", "Sí, por favor.", "No, todavía no."},
	{"de", []string{"buchen", "vereinbaren"}, []string{"Termin"}, []string{"bezahlen"}, []string{"Rechnung"},
		"Ich kann Ihren Termin für Dienstag um 15 Uhr buchen. Soll ich den Termin buchen?", "Ja, bitte.", "Nein, noch nicht."},
	{"fr", []string{"réserver", "prendre"}, []string{"rendez-vous"}, []string{"payer", "régler"}, []string{"facture"},
		"Je peux réserver votre rendez-vous pour mardi à 15 h. Voulez-vous que je réserve le rendez-vous ?", "Oui, s'il vous plaît.", "Non, pas encore."},
	{"it", []string{"prenotare", "fissare"}, []string{"appuntamento"}, []string{"pagare", "saldare"}, []string{"bolletta", "fattura"},
		"Posso prenotare il suo appuntamento per martedì alle 15. Vuole che prenoti l'appuntamento?", "Sì, grazie.", "No, non ancora."},
	{"pt", []string{"marcar", "agendar"}, []string{"consulta"}, []string{"pagar"}, []string{"fatura", "conta"},
		"Posso marcar a sua consulta para terça às 15h. Quer que eu marque a consulta?", "Sim, por favor.", "Não, ainda não."},
	{"nl", []string{"boeken", "inplannen"}, []string{"afspraak"}, []string{"betalen"}, []string{"rekening"},
		"Ik kan uw afspraak voor dinsdag om 15 uur boeken. Zal ik de afspraak boeken?", "Ja, graag.", "Nee, nog niet."},
}

// Issue 15's judging goal, per decision in every language.
const (
	judgeGoalNs     = 2000
	judgeGoalAllocs = 5
)

// judgeResult is one sample's figure.
type judgeResult struct {
	name          string
	ns, allocs    int64
	bytes         int64
	wrong, detail string // set when the sample was judged otherwise than it says
}

var initTesting sync.Once

// measureJudge benchmarks every sample of every loaded locale.
func measureJudge() ([]judgeResult, []string, error) {
	initTesting.Do(testing.Init) // testing.Benchmark reads the test flags
	if err := flag.Set("test.benchtime", judgeBenchTime); err != nil {
		return nil, nil, fmt.Errorf("judge: benchtime %q: %w", judgeBenchTime, err)
	}
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		return nil, nil, fmt.Errorf("judge: locales: %w", err)
	}
	var out []judgeResult
	var missing []string
	known := map[string]bool{}
	for _, jl := range judgeLangs {
		known[jl.lang] = true
		loc := locs.Get(jl.lang)
		if loc == nil {
			continue
		}
		tool := patterns.Tool{
			Action: loc.CompileTool(jl.bookVerbs, jl.bookObjects, nil, nil),
			Others: loc.MergeActions(jl.payVerbs, jl.payObjects),
		}
		for _, s := range []struct {
			name   string
			answer string
			want   patterns.Outcome
		}{{"confirm", jl.yes, patterns.Confirmed}, {"negated", jl.no, patterns.Negated}} {
			in := patterns.Input{
				Answer:   patterns.Turn{Locale: loc, Text: s.answer, Tool: tool},
				Question: &patterns.Turn{Locale: loc, Text: jl.question, Tool: tool},
				Args:     []patterns.Argument{{Name: "slot", Value: "tue-15"}},
			}
			r := judgeResult{name: jl.lang + "/" + s.name}
			if v := patterns.Judge(in); v.Outcome != s.want {
				r.wrong, r.detail = v.Outcome.String(), v.Detail
				out = append(out, r)
				continue
			}
			br := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					patterns.Judge(in)
				}
			})
			r.ns, r.allocs, r.bytes = br.NsPerOp(), br.AllocsPerOp(), br.AllocedBytesPerOp()
			out = append(out, r)
		}
	}
	for _, lang := range locs.Langs() {
		if !known[lang] {
			missing = append(missing, lang)
		}
	}
	return out, missing, nil
}

// judgeRows are the judge phase's rows and notes.
func judgeRows(res []judgeResult, missing []string) ([]row, []string) {
	var rows []row
	var notes []string
	for _, r := range res {
		if r.wrong != "" {
			rows = append(rows, row{fmt.Sprintf("judge %s, per decision", r.name), "-", "-", "-", "≤ 2 µs, ≤ 5 allocs", "not met"})
			notes = append(notes, fmt.Sprintf("judge: %s had another outcome (%s: %s), so it was not timed", r.name, r.wrong, r.detail))
			continue
		}
		rows = append(rows, row{
			fmt.Sprintf("judge %s, per decision", r.name),
			fmt.Sprintf("%s, %d allocs", us2(time.Duration(r.ns)), r.allocs), bytesStr(float64(r.bytes)), "-",
			"≤ 2 µs, ≤ 5 allocs", verdict(r.ns <= judgeGoalNs && r.allocs <= judgeGoalAllocs),
		})
	}
	notes = append(notes, fmt.Sprintf("judge: patterns.Judge (rules 3 to 6: parse both turns, find the question and the yes, match the action and the arguments) timed with testing.Benchmark in the bench process, %s a sample; guard.BenchmarkJudge adds the evidence's protos, so it is at least this; the floor column is the bytes allocated a decision", judgeBenchTime))
	if len(missing) > 0 {
		notes = append(notes, fmt.Sprintf("judge: no sample for the loaded locales %v: add them to judgeLangs", missing))
	}
	return rows, notes
}

// us2 prints a duration in µs with two decimals (judge figures are small).
func us2(d time.Duration) string {
	return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond))
}
