package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// counterOf is a counter of the replica's registry (0 when absent).
func (r *replica) counterOf(name string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// The node holding the guard's transcript consumer is lost: the guard
// recreates the consumer itself, from the sequence after the last it
// applied, as soon as the cluster places it again, rather than waiting
// for the client's own reset (heartbeats missed for seconds, then
// attempts of 10 s each); Checks on events published after the loss are
// judged on them, and no action is allowed twice. Every Check in between
// refused for 2.4 to 13.4 s.
func TestFailoverConsumerNodeLost(t *testing.T) {
	c := newJSCluster(t)
	r := startReplica(t, c.url(), 3)
	c.waitStreamsCurrent()
	pub := newPublisher(t, c.url())
	l := newLedger("Yes.")
	before := "before-loss"
	pub.conversation(before)
	eventuallyFor(t, "the yes applied", func() bool { snap, _ := r.srv.store.Snapshot(before); return len(snap.Utterances) >= 2 })
	resp, err := r.check(t.Context(), before, appealTool, appealArgs)
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("before the loss: %v, %v", resp, err)
	}
	l.add(before, resp)

	// The node the guard's consumer is on.
	stream, err := pub.js.Stream(t.Context(), TranscriptStream)
	if err != nil {
		t.Fatal(err)
	}
	lister := stream.ListConsumers(t.Context())
	var host string
	for info := range lister.Info() {
		if info.Cluster != nil {
			host = info.Cluster.Leader
		}
	}
	if err := lister.Err(); err != nil || host == "" {
		t.Fatalf("the transcript consumer's node: %q, %v", host, err)
	}
	victim := -1
	for i, o := range c.opts {
		if o.ServerName == host {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("no node named %q", host)
	}
	restarts := r.counterOf("yesguard_transcript_consumer_restarts_total")
	c.kill(victim)

	// A call published after the loss (acknowledged once the stream has
	// a leader again) is judged on its yes.
	after := "after-loss"
	pub.conversation(after)
	eventuallyFor(t, "the yes published after the loss allowed", func() bool {
		resp, err := r.check(t.Context(), after, appealTool, appealArgs)
		if err != nil {
			return false
		}
		l.add(after, resp)
		return resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW
	})
	if got := r.counterOf("yesguard_transcript_consumer_restarts_total"); got <= restarts {
		t.Fatalf("consumer restarts %v after the loss of its node (%v before), want the ingester to recreate it", got, restarts)
	}
	l.verify(t, r, before, after)
	if len(l.allowed[after]) != 1 {
		t.Fatalf("the yes after the loss allowed %d times, want once", len(l.allowed[after]))
	}
}

// The node the guard is connected to is lost: the guard fails over to
// another node at once, and since the cluster stayed up (the publishers on
// the lost node fail over as fast), it refuses for a short grace, not the
// whole reconnect grace (3 s: the whole refusal window's budget).
func TestFailoverGraceIsShort(t *testing.T) {
	c := newJSCluster(t)
	r := startReplica(t, c.url(), 3)
	c.waitStreamsCurrent()
	nc := r.srv.nc.Load()
	was := nc.ConnectedUrl()
	victim := -1
	for i, o := range c.opts {
		if strings.HasSuffix(was, fmt.Sprintf(":%d", o.Port)) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("the guard is connected to %q, no node of the cluster", was)
	}
	c.kill(victim)
	eventuallyFor(t, "the guard failed over", func() bool {
		p := r.srv.lastServer.Load()
		return nc.IsConnected() && p != nil && *p != was
	})
	if left := time.Until(time.Unix(0, r.srv.graceUntil.Load())); left > failoverGrace {
		t.Fatalf("reconnect grace after a failover: %s left, want at most %s", left, failoverGrace)
	}
	eventuallyFor(t, "serving again", r.serving)
}
