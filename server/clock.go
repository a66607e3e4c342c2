package server

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// The guard's clock (finding 11 of the red team).
//
// An answer's age is measured from its event's stream timestamp (the
// transcript stream leader's clock), and the duplicate and quantity windows
// from the time an ALLOW recorded in the shared bucket; a replica whose own
// clock was off allowed a 40 s old yes, refused every fresh one, or let a
// repeat through another replica's window. So with the JetStream state the
// engine's clock is NATS's: the replica's wall clock plus the offset of the
// transcript stream leader's, measured from the server time a stream info
// answer carries (the half round trip being the error), the sample with the
// shortest round trip of the last clockSamples kept. Every replica so
// measures ages and windows on one clock, whatever its own says. An offset
// past clockWarn is logged (the host's NTP is broken); until the first
// sample the local clock is used.

// How the offset is sampled.
const (
	clockEvery   = 10 * time.Second
	clockSamples = 6
	clockWarn    = time.Second
)

// natsClock is the local wall clock corrected to NATS's.
type natsClock struct {
	local   func() time.Time // nil: time.Now
	mu      sync.Mutex
	offset  time.Duration
	samples []clockSample
	warned  bool
}

type clockSample struct {
	offset, rtt time.Duration
}

// Now is NATS's time as this replica estimates it.
func (c *natsClock) Now() time.Time {
	c.mu.Lock()
	off := c.offset
	c.mu.Unlock()
	return c.localNow().Add(off)
}

func (c *natsClock) localNow() time.Time {
	if c.local != nil {
		return c.local()
	}
	return time.Now()
}

// Offset is the correction applied to the local clock.
func (c *natsClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// sample measures the offset once against the stream's leader.
func (c *natsClock) sample(ctx context.Context, js jetstream.JetStream, stream string) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start, t0 := time.Now(), c.localNow()
	st, err := js.Stream(sctx, stream)
	if err != nil {
		return 0, err
	}
	rtt := time.Since(start)
	ts := st.CachedInfo().TimeStamp
	if ts.IsZero() {
		return 0, nil // a server too old to say: keep the local clock
	}
	s := clockSample{offset: ts.Sub(t0.Add(rtt / 2)), rtt: rtt}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, s)
	if len(c.samples) > clockSamples {
		c.samples = c.samples[1:]
	}
	best := c.samples[0]
	for _, x := range c.samples[1:] {
		if x.rtt < best.rtt {
			best = x
		}
	}
	c.offset = best.offset
	return c.offset, nil
}

// run samples the offset every clockEvery until ctx ends, and logs an
// offset past clockWarn (once, until it is back within).
func (c *natsClock) run(ctx context.Context, js jetstream.JetStream, stream string, log *zap.Logger) {
	t := time.NewTicker(clockEvery)
	defer t.Stop()
	for {
		if off, err := c.sample(ctx, js, stream); err == nil {
			c.mu.Lock()
			far := off > clockWarn || off < -clockWarn
			warn := far && !c.warned
			c.warned = far
			c.mu.Unlock()
			if warn {
				log.Warn("this replica's clock is off NATS's; ages and windows are measured on NATS's clock (check the host's NTP)",
					zap.Duration("offset", off), zap.String("stream", stream))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// withLocalClock sets the host's wall clock the server corrects (tests: a
// replica whose clock is off).
func withLocalClock(f func() time.Time) Option { return func(o *options) { o.local = f } }
