package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// The fault tests of issue 10: a three-node JetStream cluster, three guard
// replicas on it, and the faults production sees. Each ends with the same
// three counts (ledger.verify): 0 ALLOW without a yes in its evidence, 0
// decision records lost, 0 actions allowed twice.

const appealTool = "submit_appeal"

var appealArgs = map[string]any{"appeal_id": "A-17"}

// threeReplicas is a cluster and three guards on it, with R3 state.
func threeReplicas(t *testing.T) (*jsCluster, []*replica) {
	t.Helper()
	c := newJSCluster(t)
	var rs []*replica
	for range 3 {
		rs = append(rs, startReplica(t, c.url(), 3))
	}
	c.waitStreamsCurrent()
	return c, rs
}

// checkAll sends n identical Checks to each replica at once.
func checkAll(t *testing.T, rs []*replica, l *ledger, n int, call string) []*yesguardv1.CheckResponse {
	t.Helper()
	var mu sync.Mutex
	var out []*yesguardv1.CheckResponse
	var wg sync.WaitGroup
	for _, r := range rs {
		for range n {
			wg.Go(func() {
				resp, err := r.check(context.Background(), call, appealTool, appealArgs)
				if err != nil {
					t.Errorf("Check: %v", err)
					return
				}
				l.add(call, resp)
				mu.Lock()
				out = append(out, resp)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return out
}

func outcomes(rs []*yesguardv1.CheckResponse) map[yesguardv1.Outcome]int {
	n := map[yesguardv1.Outcome]int{}
	for _, r := range rs {
		n[r.GetOutcome()]++
	}
	return n
}

// Identical Checks spread over the replicas: one ALLOW; a Complete on one
// replica serves the duplicates on the others.
func TestFaultIdenticalChecksAcrossReplicas(t *testing.T) {
	_, rs := threeReplicas(t)
	pub := newPublisher(t, rs[0].cfg.NATSURL)
	l := newLedger("Yes.")
	var calls []string
	for i := range 5 {
		call := fmt.Sprint("spread-", i)
		calls = append(calls, call)
		pub.conversation(call)
		eventuallyFor(t, "every replica holds the yes", func() bool {
			for _, r := range rs {
				if snap, _ := r.srv.store.Snapshot(call); len(snap.Utterances) < 2 {
					return false
				}
			}
			return true
		})
		got := checkAll(t, rs, l, 3, call)
		if n := outcomes(got); n[yesguardv1.Outcome_OUTCOME_ALLOW] != 1 || n[yesguardv1.Outcome_OUTCOME_DUPLICATE] != 8 {
			for _, r := range got {
				t.Logf("%s/%s: %s", r.GetOutcome(), r.GetReason(), r.GetDetail())
			}
			t.Fatalf("%s: %v, want 1 ALLOW and 8 DUPLICATE", call, n)
		}
	}
	// The ALLOW's approval, redeemed on every replica at once (R3
	// approvals bucket): exactly one redeem wins.
	token := l.answered[l.allowed[calls[1]][0]].GetApproval()
	var wg sync.WaitGroup
	var mu sync.Mutex
	redeemed := map[yesguardv1.Reason]int{}
	for _, r := range rs {
		for range 3 {
			wg.Go(func() {
				resp := r.redeem(t, token, appealArgs, appealTool, calls[1])
				mu.Lock()
				redeemed[resp.GetReason()]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if redeemed[yesguardv1.Reason_REASON_REDEEMED] != 1 || redeemed[yesguardv1.Reason_REASON_ALREADY_REDEEMED] != 8 {
		t.Fatalf("9 concurrent redeems on 3 replicas: %v, want 1 REDEEMED and 8 ALREADY_REDEEMED", redeemed)
	}

	// A Complete on replica 2 reaches a duplicate on replica 0.
	allowID := l.allowed[calls[0]][0]
	result, _ := structpb.NewStruct(map[string]any{"ticket": "T-1"})
	if _, err := rs[2].gc.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: allowID, Result: result}); err != nil {
		t.Fatal(err)
	}
	eventuallyFor(t, "the result on another replica", func() bool {
		resp, err := rs[0].check(t.Context(), calls[0], appealTool, appealArgs)
		if err != nil {
			t.Fatal(err)
		}
		l.add(calls[0], resp)
		return resp.GetOriginalResult().GetFields()["ticket"].GetStringValue() == "T-1"
	})
	l.verify(t, rs[1], calls...)
}

// Kill a NATS node while a Check waits for the caller's yes: the Check is
// answered (on the yes, or refused while the replica cannot vouch for the
// transcript), never twice allowed, and its record survives.
func TestFaultNATSNodeKilledMidCall(t *testing.T) {
	c, rs := threeReplicas(t)
	pub := newPublisher(t, c.url(1, 2))
	l := newLedger("Yes.")
	call := "node-kill"
	pub.publish(event(call, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	eventuallyFor(t, "replica 0 holds the question", func() bool {
		snap, _ := rs[0].srv.store.Snapshot(call)
		return snap.Exists
	})
	got := make(chan *yesguardv1.CheckResponse, 1)
	go func() {
		resp, err := rs[0].check(context.Background(), call, appealTool, appealArgs)
		if err != nil {
			t.Errorf("Check during the node's loss: %v", err)
		}
		got <- resp
	}()
	eventuallyFor(t, "the Check in flight", func() bool { return rs[0].inFlight() == 1 })
	c.kill(0)
	pub.publish(event(call, transcript.Caller, "stt", 1, 1, "Yes."))
	first := <-got
	l.add(call, first)
	t.Logf("during the loss: %s/%s (%s)", first.GetOutcome(), first.GetReason(), first.GetDetail())

	c.start(0)
	c.waitStreamsCurrent()
	for _, r := range rs {
		eventuallyFor(t, "replica serving again", r.serving)
	}
	// Whatever the first answer, the action is allowed at most once more
	// across the replicas, and only on the yes.
	checkAll(t, rs, l, 2, call)
	l.verify(t, rs[2], call)
	if len(l.allowed[call]) != 1 {
		t.Errorf("the yes allowed the action %d times, want once", len(l.allowed[call]))
	}
}

// Stop and restart the whole embedded server: its reservations, evidence
// uses, records and transcript are in the data directory, so the same
// Check is a duplicate, Complete for the old decision id works, and a
// replay of the events allows nothing.
func TestFaultEmbeddedServerRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second, DataDir: dir}
	r := startReplicaCfg(t, cfg)
	pub := newPublisher(t, r.srv.NATSURL())
	l := newLedger("Yes.")
	call := "restart"
	pub.conversation(call)
	eventuallyFor(t, "the yes applied", func() bool { snap, _ := r.srv.store.Snapshot(call); return len(snap.Utterances) == 2 })
	first, err := r.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || first.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("before the restart: %v, %v", first, err)
	}
	l.add(call, first)
	stopServer(t, r.srv)

	r2 := startReplicaCfg(t, cfg) // the same data directory
	// The publishers reconnect within the reconnect grace; until it ends
	// every Check is refused.
	eventuallyFor(t, "the reconnect grace over", r2.serving)
	pub2 := newPublisher(t, r2.srv.NATSURL())
	// The at-least-once publisher replays its events.
	pub2.conversation(call)
	again, err := r2.check(t.Context(), call, appealTool, appealArgs)
	if err != nil {
		t.Fatal(err)
	}
	l.add(call, again)
	if again.GetOutcome() != yesguardv1.Outcome_OUTCOME_DUPLICATE || again.GetOriginalDecisionId() != first.GetDecisionId() {
		t.Fatalf("after the restart: %s/%s original %q, want DUPLICATE of %s", again.GetOutcome(), again.GetReason(), again.GetOriginalDecisionId(), first.GetDecisionId())
	}
	// The key and the approvals bucket are in the data directory too: the
	// approval from before the restart redeems, once.
	wantReason(t, "an approval from before the restart", r2.redeem(t, first.GetApproval(), appealArgs, appealTool, call), yesguardv1.Reason_REASON_REDEEMED)
	wantReason(t, "its second redeem", r2.redeem(t, first.GetApproval(), appealArgs, appealTool, call), yesguardv1.Reason_REASON_ALREADY_REDEEMED)
	if _, err := r2.gc.Complete(t.Context(), &yesguardv1.CompleteRequest{DecisionId: first.GetDecisionId()}); err != nil {
		t.Fatalf("Complete of the decision made before the restart: %v", err)
	}
	// Other arguments, whose values the question still states (so that the
	// judge passes them and the book must refuse the turn's second use).
	other, err := r2.check(t.Context(), call, appealTool, map[string]any{"appeal_id": "A-17", "priority": "high"})
	if err != nil || other.GetReason() != yesguardv1.Reason_REASON_EVIDENCE_USED {
		t.Fatalf("the same yes for other arguments after the restart: %v, %v", other, err)
	}
	l.add(call+"/A-17-high", other)
	l.verify(t, r2, call)
}

// Kill a replica while a Check waits on it, restart it, and replay the
// call's events (a new message for each, as a publisher that lost its
// acks sends them): it rebuilds the call from the stream, allows the
// action once, and the replay allows nothing more.
func TestFaultReplicaKilledMidCall(t *testing.T) {
	c, rs := threeReplicas(t)
	pub := newPublisher(t, c.url())
	l := newLedger("Yes.")
	call := "replica-kill"
	pub.publish(event(call, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	eventuallyFor(t, "replica 1 holds the question", func() bool { snap, _ := rs[1].srv.store.Snapshot(call); return snap.Exists })
	cut := make(chan error, 1)
	go func() {
		_, err := rs[1].check(context.Background(), call, appealTool, appealArgs)
		cut <- err
	}()
	eventuallyFor(t, "the Check in flight", func() bool { return rs[1].inFlight() == 1 })
	rs[1].kill()
	if err := <-cut; err == nil {
		t.Log("the Check on the killed replica was answered before the kill")
	}
	pub.publish(event(call, transcript.Caller, "stt", 1, 1, "Yes."))

	restarted := startReplica(t, c.url(), 3)
	eventuallyFor(t, "the call rebuilt from the stream", func() bool {
		snap, _ := restarted.srv.store.Snapshot(call)
		return len(snap.Utterances) == 2 && snap.Gap == ""
	})
	first, err := restarted.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || first.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("after the restart: %v, %v", first, err)
	}
	l.add(call, first)
	// The replay: new messages with the same runs and seqs.
	for _, ev := range []transcript.Event{
		event(call, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"),
		event(call, transcript.Caller, "stt", 1, 1, "Yes."),
	} {
		pub.publishAs(ev, "replay-"+ev.Source)
	}
	eventuallyFor(t, "the replay applied (or dropped as repeats)", func() bool { return restarted.srv.js.ingester.Load().Applied() >= 4 })
	if snap, _ := restarted.srv.store.Snapshot(call); len(snap.Utterances) != 2 {
		t.Fatalf("the replay added utterances: %d", len(snap.Utterances))
	}
	checkAll(t, []*replica{rs[0], rs[2], restarted}, l, 2, call)
	l.verify(t, rs[0], call)
}

// Events published while a replica's NATS node is down are in the stream:
// once reconnected the replica catches up (refusing meanwhile), and judges
// the caller's "Wait, no" that came during the outage. A publisher whose
// event never reached the stream leaves a gap: refused until it fills.
func TestFaultEventsPublishedDuringOutage(t *testing.T) {
	c := newJSCluster(t)
	// This replica connects to node 0 only (not to the nodes node 0
	// tells it of), so node 0's loss is its outage; the others keep the
	// stream.
	r := startReplicaCfg(t, Config{GRPCAddr: "127.0.0.1:0", NATSURL: c.url(0), JSReplicas: 3, ShutdownTimeout: 10 * time.Second, DataDir: t.TempDir()},
		WithNATSOptions(nats.IgnoreDiscoveredServers()))
	other := startReplica(t, c.url(1, 2), 3)
	c.waitStreamsCurrent()
	pub := newPublisher(t, c.url(1, 2))
	l := newLedger("Yes.")
	call := "outage"
	pub.publish(event(call, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	eventuallyFor(t, "replica holds the question", func() bool { snap, _ := r.srv.store.Snapshot(call); return snap.Exists })

	c.kill(0)
	eventuallyFor(t, "the replica sees its outage", func() bool { return !r.srv.feedUp() })
	resp, err := r.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE {
		t.Fatalf("during the outage: %v, %v", resp, err)
	}
	l.add(call, resp)
	pub.publish(event(call, transcript.Caller, "stt", 1, 1, "Yes."))
	pub.publish(event(call, transcript.Caller, "stt", 1, 2, "Wait, no."))
	c.start(0)
	eventuallyFor(t, "the replica caught up", r.serving)
	resp, err = r.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("after the outage: %s/%s (%s), %v; want the caller's no", resp.GetOutcome(), resp.GetReason(), resp.GetDetail(), err)
	}
	l.add(call, resp)

	// The publisher's seq 2 never reached the stream: a gap.
	gap := "outage-gap"
	pub.publish(event(gap, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	pub.publish(event(gap, transcript.Caller, "stt", 1, 1, "Yes."))
	pub.publish(event(gap, transcript.Caller, "stt", 1, 3, "Go ahead."))
	eventuallyFor(t, "the gap seen", func() bool { snap, _ := other.srv.store.Snapshot(gap); return snap.Gap != "" })
	resp, err = other.check(t.Context(), gap, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_GAP {
		t.Fatalf("with seq 2 missing: %v, %v", resp, err)
	}
	l.add(gap, resp)
	pub.publish(event(gap, transcript.Caller, "stt", 1, 2, "Wait, no."))
	eventuallyFor(t, "the gap filled", func() bool { snap, _ := other.srv.store.Snapshot(gap); return snap.Gap == "" })
	resp, err = other.check(t.Context(), gap, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("once seq 2 arrived: %v, %v", resp, err)
	}
	l.add(gap, resp)
	l.verify(t, other, call, gap)
}

// Two publishers with colliding seqs, a publisher restart and a huge seq,
// through the stream: the caller's no is never lost, and the huge seq
// allows nothing.
func TestFaultSeqCollisionsRestartAndHugeSeq(t *testing.T) {
	_, rs := threeReplicas(t)
	pub := newPublisher(t, rs[0].cfg.NATSURL)
	l := newLedger("Yes.", "Yes, go ahead.")
	wait := func(call string, n int) {
		eventuallyFor(t, "events applied", func() bool { snap, _ := rs[1].srv.store.Snapshot(call); return len(snap.Utterances) >= n })
	}
	// tts and stt both count from 1.
	pub.conversation("collide")
	pub.publish(event("collide", transcript.Caller, "stt", 1, 2, "Wait, no."))
	wait("collide", 3)
	resp, err := rs[1].check(t.Context(), "collide", appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("colliding seqs: %v, %v", resp, err)
	}
	l.add("collide", resp)

	// The recogniser restarts (epoch 2) and its first event is the no.
	pub.conversation("restart")
	pub.publish(event("restart", transcript.Caller, "stt", 2, 1, "No."))
	wait("restart", 3)
	resp, err = rs[2].check(t.Context(), "restart", appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("publisher restart: %v, %v", resp, err)
	}
	l.add("restart", resp)

	// A caller event with seq 2^64-1 is rejected and leaves the call
	// uncertain: nothing is allowed on it.
	pub.publish(event("huge", transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	pub.publish(event("huge", transcript.Caller, "stt", 1, 1<<64-1, "Yes, go ahead."))
	eventuallyFor(t, "the jump seen", func() bool { snap, _ := rs[0].srv.store.Snapshot("huge"); return snap.Gap != "" })
	for _, r := range rs {
		resp, err := r.check(t.Context(), "huge", appealTool, appealArgs)
		if err != nil || resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW {
			t.Fatalf("huge seq: %v, %v", resp, err)
		}
		l.add("huge", resp)
	}
	l.verify(t, rs[0], "collide", "restart", "huge")
}

// A slow consumer: while a replica lags the stream (a flood it has not
// applied yet, with the call's yes and no at its end), its Checks are
// refused rather than judged on a transcript without the caller's no; once
// it has caught up, the no is judged.
func TestFaultSlowConsumer(t *testing.T) {
	c := newJSCluster(t)
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSURL: c.url(), JSReplicas: 3, ShutdownTimeout: 10 * time.Second, DataDir: t.TempDir(),
		TranscriptMaxLag: time.Millisecond}
	r := startReplicaCfg(t, cfg)
	c.waitStreamsCurrent()
	pub := newPublisher(t, c.url())
	l := newLedger("Yes.")
	call := "slow"
	pub.publish(event(call, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	eventuallyFor(t, "the question applied", func() bool { snap, _ := r.srv.store.Snapshot(call); return snap.Exists })

	// The flood: published asynchronously, acknowledged in batches.
	const flood = 20000
	acks := make([]jetstreamAck, 0, flood)
	for i := range flood {
		acks = append(acks, pub.publishAsync(event(fmt.Sprint("flood-", i%500), transcript.Caller, "stt", 1, uint64(i/500+1), "words words words")))
	}
	pub.publish(event(call, transcript.Caller, "stt", 1, 1, "Yes."))
	pub.publish(event(call, transcript.Caller, "stt", 1, 2, "Wait, no."))
	waitAcks(t, acks)
	resp, err := r.check(t.Context(), call, appealTool, appealArgs)
	if err != nil {
		t.Fatal(err)
	}
	l.add(call, resp)
	if resp.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("judged %q while lagging: ALLOW", resp.GetAnswerText())
	}
	t.Logf("while lagging: %s/%s (%s)", resp.GetOutcome(), resp.GetReason(), resp.GetDetail())
	eventuallyFor(t, "caught up with the flood", func() bool {
		return r.srv.js.ingester.Load().Behind(time.Now()) == "" && r.srv.js.ingester.Load().Applied() >= flood+3
	})
	resp, err = r.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("caught up: %v, %v", resp, err)
	}
	l.add(call, resp)
	l.verify(t, r, call)
}
