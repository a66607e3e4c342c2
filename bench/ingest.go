package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/server"
)

// ingestRounds: each side runs this many times; the best run of each is
// reported (the machine is shared, and noise only slows).
const ingestRounds = 3

// ingestGoal is issue 15's goal: the guard takes in at least this share of
// what a bare consumer of the same messages does.
const ingestGoal = 0.8

// ingest publishes N events as fast as one connection can and times, from
// the first publish to the last message taken in, the guard and a bare
// consumer that only counts. The floor is the guard's own transport: with
// the memory state a bare core subscriber (its own subject, the same
// payloads, apart from the guard's run); with the JetStream state a bare
// ordered consumer of the guard's transcript stream, reading the very
// messages the guard reads, at the same time.
func (b *bench) ingest(ctx context.Context) error {
	n := b.cfg.IngestEvents
	js := b.cfg.State == "jetstream"
	b.log("ingestion: %d events, %d rounds, jetstream %v", n, ingestRounds, js)
	var bestBare, bestGuard time.Duration
	guardOK := true
	keep := func(best *time.Duration, el time.Duration) {
		if *best == 0 || el < *best {
			*best = el
		}
	}
	measureRound := b.ingestCore
	if js {
		measureRound = b.ingestJetStream
	}
	for round := 0; round < ingestRounds; round++ {
		msgs := ingestStream(b.t.prefix, fmt.Sprintf("ingest-%s-%d", b.runID, round), n, b.rng)
		base, ok, err := b.t.absorbed(ctx)
		if err != nil {
			return err
		}
		bare, guard, err := measureRound(ctx, msgs, base, ok)
		if err != nil {
			return err
		}
		keep(&bestBare, bare)
		if !ok {
			guardOK = false
			continue
		}
		keep(&bestGuard, guard)
	}
	bareRate := float64(n) / bestBare.Seconds()
	guardRate := 0.0
	if guardOK {
		guardRate = float64(n) / bestGuard.Seconds()
	} else {
		b.notes = append(b.notes, "ingestion: the external guard's absorption needs -metrics-url")
	}
	measure, goal := "ingestion, core subscription, events/s", "≥ 0.80x a bare core subscriber"
	if js {
		measure, goal = "ingestion, JetStream consumer, events/s", "≥ 0.80x a bare JetStream consumer"
	}
	b.rows = append(b.rows, row{fmt.Sprintf("%s (%dk events, best of %d)", measure, n/1000, ingestRounds),
		perSec(guardRate), perSec(bareRate), ratio(guardRate, bareRate), goal, atLeast(frac(guardRate, bareRate), ingestGoal)})
	if js {
		b.notes = append(b.notes, "ingestion, JetStream: the events are published once, on the guard's subjects; the guard's ordered consumer and a bare ordered consumer of the same stream (pulls of 512, as the guard's) read them at the same time, each timed from the first publish to its last message")
	} else {
		b.notes = append(b.notes, "ingestion, core: the bare subscriber hears the same payloads on a subject the guard does not hear, in a run of its own before the guard's")
	}
	if b.t.embedded {
		b.notes = append(b.notes, "ingestion and wake-up: the in-process guard reads the embedded NATS server over its in-process connection; the bare consumer and the publisher use TCP loopback")
	}
	return nil
}

// publishAll publishes msgs on the bench's publisher, each on subj(i) when
// subj is set, and flushes.
func (b *bench) publishAll(msgs []msg, subj func(i int) string) error {
	for i, m := range msgs {
		s := m.subject
		if subj != nil {
			s = subj(i)
		}
		if err := b.pub.Publish(s, m.data); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	if err := b.pub.FlushTimeout(30 * time.Second); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// ingestCore times a bare core subscriber taking in msgs' payloads, then
// the guard taking in msgs (from its counters, when ok).
func (b *bench) ingestCore(ctx context.Context, msgs []msg, base float64, ok bool) (bare, guard time.Duration, err error) {
	if bare, err = b.ingestBareCore(msgs); err != nil || !ok {
		return bare, 0, err
	}
	t0 := time.Now()
	if err := b.publishAll(msgs, nil); err != nil {
		return 0, 0, err
	}
	if _, err := b.t.waitAbsorbed(ctx, base+float64(len(msgs)), absorbStep, absorbWait); err != nil {
		return 0, 0, err
	}
	return bare, time.Since(t0), nil
}

// ingestBareCore times a bare core subscriber taking in msgs' payloads on
// subjects the guard does not hear.
func (b *bench) ingestBareCore(msgs []msg) (time.Duration, error) {
	n := int64(len(msgs))
	var count atomic.Int64
	done := make(chan struct{})
	sub, err := b.bare.Subscribe("bench.bare.>", func(*nats.Msg) {
		if count.Add(1) == n {
			close(done)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return 0, fmt.Errorf("pending limits: %w", err)
	}
	if err := b.bare.Flush(); err != nil {
		return 0, fmt.Errorf("flush: %w", err)
	}
	t0 := time.Now()
	if err := b.publishAll(msgs, func(i int) string { return "bench.bare." + msgs[i].subject[len(b.t.prefix)+1:] }); err != nil {
		return 0, err
	}
	select {
	case <-done:
	case <-time.After(absorbWait):
		return 0, fmt.Errorf("bare subscriber got %d of %d", count.Load(), n)
	}
	return time.Since(t0), nil
}

// ingestJetStream publishes msgs once on the guard's subjects and times
// both the guard (from its counters, when ok) and a bare ordered consumer
// of the guard's transcript stream that starts after the stream's last
// message and only counts.
func (b *bench) ingestJetStream(ctx context.Context, msgs []msg, base float64, ok bool) (bare, guard time.Duration, err error) {
	js, err := jetstream.New(b.bare)
	if err != nil {
		return 0, 0, fmt.Errorf("jetstream: %w", err)
	}
	name := server.TranscriptStreamName(b.t.prefix)
	st, err := js.Stream(ctx, name)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	cons, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.t.prefix + ".>"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    info.State.LastSeq + 1,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("bare consumer: %w", err)
	}
	n := int64(len(msgs))
	var count atomic.Int64
	var lastAt atomic.Int64 // unix ns of the n-th message
	done := make(chan struct{})
	cc, err := cons.Consume(func(jetstream.Msg) {
		if count.Add(1) == n {
			lastAt.Store(time.Now().UnixNano())
			close(done)
		}
	}, jetstream.PullMaxMessages(512))
	if err != nil {
		return 0, 0, fmt.Errorf("bare consumer: %w", err)
	}
	defer cc.Stop()
	t0 := time.Now()
	if err := b.publishAll(msgs, nil); err != nil {
		return 0, 0, err
	}
	if ok {
		if _, err := b.t.waitAbsorbed(ctx, base+float64(n), absorbStep, absorbWait); err != nil {
			return 0, 0, err
		}
		guard = time.Since(t0)
	}
	select {
	case <-done:
	case <-time.After(absorbWait):
		return 0, 0, fmt.Errorf("bare JetStream consumer got %d of %d", count.Load(), n)
	case <-ctx.Done():
		return 0, 0, errors.Join(ctx.Err(), fmt.Errorf("bare JetStream consumer got %d of %d", count.Load(), n))
	}
	return time.Unix(0, lastAt.Load()).Sub(t0), guard, nil
}
