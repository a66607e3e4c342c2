package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// The flood phase: a publisher on its own connection sends 4 KB caller
// finals over floodCalls call ids as fast as NATS takes them (issue 11's
// attack), bounded by the phase's time and floodMaxEvents.
const (
	floodCalls     = 500
	floodTextBytes = 4000
	floodMaxEvents = 2_000_000
	floodTimeout   = 10 * time.Second // a Check's deadline in this phase: generous, so a slow answer is measured, not cut
)

// flood times Checks of fresh calls (a question and a yes published, then
// the Check, timed) one after the other, first on a quiet guard and then
// while the flood runs, half of d each, and reports the p50 and p99 of
// both and how many were not ALLOW.
func (b *bench) flood(ctx context.Context, d time.Duration) error {
	b.log("flood: %s quiet, then %s under a flood of %d-byte events", d/2, d/2, floodTextBytes)
	quiet, qbad, _, err := b.timedChecks(ctx, "quiet", d/2)
	if err != nil {
		return err
	}

	fc, err := nats.Connect(b.t.natsURL, append(b.t.natsOpts, nats.Name("yesguard-bench-flood"))...)
	if err != nil {
		return fmt.Errorf("nats flood publisher: %w", err)
	}
	defer fc.Close()
	text := strings.Repeat("flood ", floodTextBytes/6)
	payloads := make([][]byte, floodCalls)
	subjects := make([]string, floodCalls)
	for i := range payloads {
		call := fmt.Sprintf("flood-%s-%d", b.runID, i)
		subjects[i] = b.t.prefix + "." + call
		payloads[i] = []byte(fmt.Sprintf(`{"call_id":%q,"speaker":"caller","type":"transcript","final":true,"text":%q}`, call, text))
	}
	base, _, err := b.t.absorbed(ctx)
	if err != nil {
		return err
	}
	var sent atomic.Int64
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; fctx.Err() == nil && i < floodMaxEvents; i++ {
			if fc.Publish(subjects[i%floodCalls], payloads[i%floodCalls]) != nil {
				return
			}
			if sent.Add(1)%1000 == 0 {
				_ = fc.Flush() // as fast as the server takes them, no faster
			}
		}
	})
	start := time.Now()
	flooded, fbad, why, err := b.timedChecks(ctx, "flood", d/2)
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	if err != nil {
		return err
	}
	after, ok, _ := b.t.absorbed(ctx)
	// What the guard still holds of the flood is drained before the next
	// phase, or the guard's stop, so that neither pays for this one.
	drained, err := b.t.waitQuiet(ctx)
	if err != nil {
		return err
	}
	if !drained {
		b.notes = append(b.notes, fmt.Sprintf("flood: the guard was still taking the flood in %s after it stopped; the phases after it pay for that", quietWait))
	}

	rows := []struct {
		what string
		p    float64
	}{{"p50", 50}, {"p99", 99}}
	for _, r := range rows {
		b.rows = append(b.rows, row{
			measure: fmt.Sprintf("Check ALLOW %s during a flood (n=%d) vs quiet (n=%d)", r.what, len(flooded), len(quiet)),
			guard:   ms(flooded.pct(r.p)), floor: ms(quiet.pct(r.p)),
			ratio: ratio(float64(flooded.pct(r.p)), float64(quiet.pct(r.p))),
			goal:  "answered within the deadline; ALLOW",
		})
	}
	offered := float64(sent.Load()) / elapsed.Seconds()
	note := fmt.Sprintf("flood: %d events of %d bytes on %d calls offered in %s (%s, %.0f MB/s)",
		sent.Load(), len(payloads[0]), floodCalls, elapsed.Round(10*time.Millisecond), perSec(offered), offered*float64(len(payloads[0]))/1e6)
	if ok {
		note += fmt.Sprintf("; the guard took in %.0f of them meanwhile (applied or rejected by its limits)", after-base)
	}
	b.notes = append(b.notes, note+"; each Check is of a fresh call whose question and yes are published just before it, behind the flood")
	if qbad > 0 {
		b.notes = append(b.notes, fmt.Sprintf("flood: %d quiet Checks had another outcome than ALLOW", qbad))
	}
	if fbad > 0 {
		// Fail closed: a Check whose call the guard could not apply in
		// time under the flood refuses (TRANSCRIPT_GAP).
		b.notes = append(b.notes, fmt.Sprintf("flood: %d of %d flooded Checks were refused, not ALLOWed (%s)", fbad, len(flooded), why))
	}
	return nil
}

// timedChecks runs fresh-call Checks one after the other for d (at least
// 20), and returns their latencies, how many were not ALLOW, and their
// reasons.
func (b *bench) timedChecks(ctx context.Context, tag string, d time.Duration) (lat, int, string, error) {
	var out lat
	bad := 0
	reasons := map[string]int{}
	args := &structpb.Struct{Fields: map[string]*structpb.Value{"slot": structpb.NewStringValue("slot-1")}}
	deadline := time.Now().Add(d)
	for i := 0; i < 20 || time.Now().Before(deadline); i++ {
		c := newConv(b.t.prefix, fmt.Sprintf("%s-%s-%d", tag, b.runID, i), b.rng)
		c.final(transcript.Agent, pick(b.rng, bookQuestions))
		c.final(transcript.Caller, pick(b.rng, yeses))
		for _, m := range c.take() {
			if err := b.pub.Publish(m.subject, m.data); err != nil {
				return nil, 0, "", fmt.Errorf("publish: %w", err)
			}
		}
		if err := b.pub.Flush(); err != nil {
			return nil, 0, "", fmt.Errorf("flush: %w", err)
		}
		cctx, cancel := context.WithTimeout(ctx, floodTimeout)
		t0 := time.Now()
		resp, err := b.guard.Check(cctx, &yesguardv1.CheckRequest{CallId: c.call, Tool: bookTool, Args: args})
		took := time.Since(t0)
		cancel()
		if err != nil {
			return nil, 0, "", fmt.Errorf("%s check: %w", tag, err)
		}
		out = append(out, took)
		if resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			bad++
			reasons[strings.ToLower(strings.TrimPrefix(resp.GetReason().String(), "REASON_"))]++
		}
		if ctx.Err() != nil {
			return nil, 0, "", ctx.Err()
		}
	}
	var why []string
	for r, n := range reasons {
		why = append(why, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(why)
	return out, bad, strings.Join(why, ", "), nil
}
