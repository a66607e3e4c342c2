package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// The throughput phase's mix (issue 15: "mostly first-time decisions, with
// ALLOW, REFUSE and DUPLICATE in the proportions a contact centre sees").
//
// Every Check but a retry is a first-time decision: it comes after a
// fresh question and answer on its call, as a model calls the tool right
// after the caller answers. What the caller answers is drawn from
// answerMix. An agent that asks before it acts hears a plain yes most of
// the time; a third of callers decline, make it conditional or are not
// sure yet, and those Checks are refused by what the caller said (not by
// the cheap EVIDENCE_USED refusal of a yes already used, which flattered
// the phase before). A few ALLOWs are retried by the model with the same
// arguments after the original completed (a timeout on its side, a
// repeated tool call): DUPLICATE.
var answerMix = []struct {
	kind   string
	weight int
	texts  []string
	want   yesguardv1.Outcome
}{
	{"plain yes", 65, yeses, yesguardv1.Outcome_OUTCOME_ALLOW},
	{"no", 15, []string{"No, not yet.", "No thanks, I'll call back.", "No, don't book it."}, yesguardv1.Outcome_OUTCOME_REFUSE},
	{"yes with a condition", 12, []string{"Yes, but only if it's in the morning.", "Yes, if Dr Patel can't do Monday."}, yesguardv1.Outcome_OUTCOME_REFUSE},
	{"not sure", 8, []string{"Hmm, I'm not sure, maybe later.", "I don't know, let me think about it."}, yesguardv1.Outcome_OUTCOME_REFUSE},
}

// retryShare of ALLOWs are Completed and then Checked again with the same
// arguments: DUPLICATE.
const retryShare = 0.10

// Throughput phase sizes.
const (
	chatterCalls = 500                  // other calls talking meanwhile (the stream), never Checked
	refillStep   = 5 * time.Millisecond // how often answered calls get their next exchange
)

// tcall is one call of the throughput pool: ready to be Checked once its
// latest question and answer are in the guard.
type tcall struct {
	c    *conv
	want yesguardv1.Outcome
}

// pickAnswer draws the caller's answer from answerMix.
func pickAnswer(rng *rand.Rand) (text string, want yesguardv1.Outcome) {
	total := 0
	for _, m := range answerMix {
		total += m.weight
	}
	n := rng.IntN(total)
	for _, m := range answerMix {
		if n < m.weight {
			return pick(rng, m.texts), m.want
		}
		n -= m.weight
	}
	panic("unreachable")
}

// exchange adds the agent's question and the caller's answer to tc's call.
func (tc *tcall) exchange(rng *rand.Rand) []msg {
	tc.c.final(transcript.Agent, pick(rng, bookQuestions))
	var text string
	text, tc.want = pickAnswer(rng)
	tc.c.final(transcript.Caller, text)
	return tc.c.take()
}

// throughput measures health checks and then Checks at the same
// concurrency while other calls talk at StreamRate events/s. Each Check
// takes a ready call of the pool (its last exchange a question and an
// answer drawn from answerMix, taken in by the guard), so that every
// decision but a retry is a first-time one; the call then gets its next
// exchange, and is ready again once the guard has taken it in. Those
// exchanges count toward the stream: the chatter is cut by as much, so
// both halves see about StreamRate events/s when the refills stay under it.
func (b *bench) throughput(ctx context.Context, l *loaded, dh, dc time.Duration) error {
	conc := b.cfg.Concurrency
	b.log("throughput: %d calls, concurrency %d, health %s, Check %s", len(l.scale), conc, dh, dc)
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }

	pool := make([]*tcall, len(l.scale))
	var msgs []msg
	for i, c := range l.scale {
		pool[i] = &tcall{c: c}
		msgs = append(msgs, pool[i].exchange(b.rng)...)
	}
	// Each goroutine below has its own rng, and the convs it touches use
	// it: the chatter's calls streamRng, the pool's b.rng (only the
	// refiller touches them during the phase).
	streamRng := rand.New(rand.NewPCG(b.cfg.Seed, 7))
	chatter := make([]*conv, chatterCalls)
	for i := range chatter {
		chatter[i] = newConv(b.t.prefix, fmt.Sprintf("chatter-%s-%d", b.runID, i), streamRng)
		chatter[i].history(1)
		msgs = append(msgs, chatter[i].take()...)
	}
	if err := b.publishAbsorbed(ctx, msgs); err != nil {
		return err
	}
	base, counted, err := b.t.absorbed(ctx)
	if err != nil {
		return err
	}

	// published counts every event the phase publishes, raised before each
	// publish, so that the guard having taken in base+published events
	// means it has every event published before (one connection keeps
	// their order).
	var published, refilled atomic.Int64
	stop := make(chan struct{})
	var bg sync.WaitGroup
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			bg.Wait()
		}
	}()
	publish := func(ms []msg) error {
		published.Add(int64(len(ms)))
		for _, m := range ms {
			if err := b.pub.Publish(m.subject, m.data); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
		return nil
	}

	// The chatter: every 10 ms, small-talk exchanges on random other
	// calls, StreamRate events/s less the refills published meanwhile.
	var streamed atomic.Int64
	bg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		owed := 0.0
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			owed += float64(b.cfg.StreamRate)/100 - float64(refilled.Swap(0))
			owed = max(owed, -float64(b.cfg.StreamRate)/100) // refills above the rate are not owed back later
			for owed >= 2 {
				c := chatter[streamRng.IntN(len(chatter))]
				c.final(transcript.Agent, pick(streamRng, agentSmallTalk))
				c.final(transcript.Caller, pick(streamRng, callerSmallTalk))
				ms := c.take()
				if err := publish(ms); err != nil {
					fail(err)
					return
				}
				streamed.Add(int64(len(ms)))
				owed -= float64(len(ms))
			}
		}
	})

	// Health at the same concurrency, under the same stream.
	streamStart := time.Now()
	var healthN atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(dh)
	t0 := time.Now()
	for w := 0; w < conc; w++ {
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := b.ping(ctx); err != nil {
					fail(fmt.Errorf("health check: %w", err))
					return
				}
				healthN.Add(1)
			}
		})
	}
	wg.Wait()
	healthRate := float64(healthN.Load()) / time.Since(t0).Seconds()
	healthStream := float64(streamed.Swap(0)) / time.Since(streamStart).Seconds()
	if firstErr != nil {
		return firstErr
	}

	// The refiller: answered calls get their next exchange, and go back to
	// ready once the guard has taken it in. Only it touches a call's conv
	// between its Checks.
	ready := make(chan *tcall, len(pool))
	for _, tc := range pool {
		ready <- tc
	}
	answered := make(chan *tcall, len(pool))
	refillRng := b.rng
	var refills atomic.Int64
	bg.Go(func() {
		type batch struct {
			calls  []*tcall
			target float64
			at     time.Time
		}
		var waiting []batch
		tick := time.NewTicker(refillStep)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var bt batch
			for len(answered) > 0 {
				tc := <-answered
				ms := tc.exchange(refillRng)
				if err := publish(ms); err != nil {
					fail(err)
					return
				}
				refilled.Add(int64(len(ms)))
				bt.calls = append(bt.calls, tc)
			}
			if len(bt.calls) > 0 {
				bt.target, bt.at = base+float64(published.Load()), time.Now()
				refills.Add(int64(len(bt.calls)))
				waiting = append(waiting, bt)
			}
			if len(waiting) == 0 {
				continue
			}
			if err := b.pub.Flush(); err != nil {
				fail(fmt.Errorf("flush: %w", err))
				return
			}
			in := 0.0
			if counted {
				n, ok, err := b.t.absorbed(ctx)
				if err != nil || !ok {
					fail(fmt.Errorf("throughput: the guard's intake: %v", err))
					return
				}
				in = n
			}
			for len(waiting) > 0 && (counted && waiting[0].target <= in || !counted && time.Since(waiting[0].at) > 50*time.Millisecond) {
				for _, tc := range waiting[0].calls {
					ready <- tc
				}
				waiting = waiting[1:]
			}
		}
	})

	var outcomes [8 * 32]atomic.Int64 // outcome*32 + reason
	var bad, starved, completes, waited atomic.Int64
	var firstBad atomic.Value
	lats := make([]lat, conc)
	var argN atomic.Int64
	judged := func(w int, call string, resp *yesguardv1.CheckResponse, took time.Duration, want yesguardv1.Outcome) {
		lats[w] = append(lats[w], took)
		if resp.GetWaitedMs() >= 1 {
			waited.Add(1)
		}
		outcomes[(int(resp.GetOutcome())%8)*32+int(resp.GetReason())%32].Add(1)
		if resp.GetOutcome() != want {
			bad.Add(1)
			firstBad.CompareAndSwap(nil, fmt.Sprintf("%s: %s/%s, want %s: %s", call, resp.GetOutcome(), resp.GetReason(), want, resp.GetDetail()))
		}
	}
	end = time.Now().Add(dc)
	t0 = time.Now()
	for w := 0; w < conc; w++ {
		rng := rand.New(rand.NewPCG(b.cfg.Seed, uint64(w)+100))
		wg.Go(func() {
			timeout := time.NewTimer(time.Until(end))
			defer timeout.Stop()
			for time.Now().Before(end) {
				var tc *tcall
				select {
				case tc = <-ready:
				default:
					starved.Add(1)
					select {
					case tc = <-ready:
					case <-timeout.C:
						return
					}
				}
				args := slotArgs(int(argN.Add(1)))
				s := time.Now()
				resp, err := b.check(ctx, tc.c.call, args)
				if err != nil {
					fail(fmt.Errorf("check %s: %w", tc.c.call, err))
					return
				}
				judged(w, tc.c.call, resp, time.Since(s), tc.want)
				if resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW && rng.Float64() < retryShare {
					if err := b.complete(ctx, resp); err != nil {
						fail(err)
						return
					}
					completes.Add(1)
					s = time.Now()
					resp, err = b.check(ctx, tc.c.call, args)
					if err != nil {
						fail(fmt.Errorf("retry %s: %w", tc.c.call, err))
						return
					}
					judged(w, tc.c.call, resp, time.Since(s), yesguardv1.Outcome_OUTCOME_DUPLICATE)
				}
				answered <- tc
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	checkStream := float64(streamed.Load()) / el.Seconds()
	refillRate := float64(refills.Load()) * 2 / el.Seconds()
	close(stop)
	bg.Wait()
	if firstErr != nil {
		return firstErr
	}
	var all lat
	for _, l := range lats {
		all = append(all, l...)
	}
	checkRate := float64(len(all)) / el.Seconds()
	b.rows = append(b.rows,
		row{fmt.Sprintf("Check throughput, realistic mix, %d calls, %d concurrent", len(l.scale), conc), perSec(checkRate), perSec(healthRate), ratio(checkRate, healthRate),
			"≥ 0.60x health, same concurrency and stream", atLeast(frac(checkRate, healthRate), 0.6)},
		row{"  Check latency p50 / p99 under that load", us(all.pct(50)) + " / " + us(all.pct(99)), "", "", "", ""},
		row{"  events streamed meanwhile: Checks (refills + chatter) / health", perSec(refillRate + checkStream), perSec(healthStream), "", "", ""},
	)

	var mix []string
	total := int64(len(all))
	for i := range outcomes {
		if n := outcomes[i].Load(); n > 0 {
			o, r := yesguardv1.Outcome(i/32), yesguardv1.Reason(i%32)
			mix = append(mix, fmt.Sprintf("%s/%s %d (%.1f%%)", strings.TrimPrefix(o.String(), "OUTCOME_"), strings.TrimPrefix(r.String(), "REASON_"), n, 100*float64(n)/float64(max(total, 1))))
		}
	}
	slices.Sort(mix)
	var asked []string
	for _, m := range answerMix {
		asked = append(asked, fmt.Sprintf("%s %d%%", m.kind, m.weight))
	}
	b.notes = append(b.notes,
		fmt.Sprintf("throughput mix asked: every Check a first-time decision on a fresh question and answer (%s), and %.0f%% of ALLOWs Completed and retried with the same arguments (DUPLICATE); %d Completes ran in the Checks' time, not counted in their rate", strings.Join(asked, ", "), retryShare*100, completes.Load()),
		fmt.Sprintf("throughput mix produced (%d Checks): %s", total, strings.Join(mix, ", ")),
		fmt.Sprintf("throughput: %d calls checked in turn, each ready again once its next exchange (2 finals) is in the guard; %d other calls chatter so that the stream stays near %d events/s; a worker found no call ready %d times; %d Checks waited >= 1 ms in the guard for the caller's turn", len(l.scale), chatterCalls, b.cfg.StreamRate, starved.Load(), waited.Load()),
	)
	if n := bad.Load(); n > 0 {
		b.notes = append(b.notes, fmt.Sprintf("throughput: %d checks had another outcome than their answer's, e.g. %s", n, firstBad.Load()))
	}
	return nil
}

// complete reports an ALLOW's action done, as the pipeline does after it
// ran the tool, so that a retry is answered DUPLICATE with its result.
func (b *bench) complete(ctx context.Context, allow *yesguardv1.CheckResponse) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	result := &structpb.Struct{Fields: map[string]*structpb.Value{"booked": structpb.NewBoolValue(true)}}
	if _, err := b.guard.Complete(ctx, &yesguardv1.CompleteRequest{DecisionId: allow.GetDecisionId(), Result: result, Approval: allow.GetApproval()}); err != nil {
		return fmt.Errorf("complete %s: %w", allow.GetDecisionId(), err)
	}
	return nil
}
