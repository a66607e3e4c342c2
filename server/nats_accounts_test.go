package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// F1 of the security red team, through the real server wiring: a pipeline
// publishing transcripts whose reply subject is a call's decision subject
// had JetStream store its PubAcks there, and past decisions_per_call the
// call's real records were gone from ListDecisions. The pipeline's account
// holds none of the guard's state, so its acks land nowhere: the records
// stay.
func TestPipelineAcksDoNotEraseDecisions(t *testing.T) {
	const perCall = 5
	srv, _, _ := startConfigured(t, func(c *Config) { c.DecisionsPerCall = perCall })
	pipe, _ := violations(t, srv.NATSURL()) // the loopback default: any local client is the pipeline
	client := yesguardv1.NewGuardClient(plainClient(t, srv.GRPCAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const call = "ack-victim"
	first, err := askYes(t, pipe, client, ctx, call)
	if err != nil || first.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("Check = %v, %v; want ALLOW", first, err)
	}
	listed := func() []string {
		resp, err := client.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{CallId: call})
		if err != nil {
			return nil
		}
		var ids []string
		for _, d := range resp.GetDecisions() {
			ids = append(ids, d.GetDecisionId())
		}
		return ids
	}
	eventuallyFor(t, "the ALLOW listed", func() bool { return slices.Contains(listed(), first.GetDecisionId()) })

	// The attack: 4×decisions_per_call transcripts (on a call of no
	// interest) whose acks name the victim's decision subject.
	for range 4 * perCall {
		if err := pipe.PublishMsg(&nats.Msg{Subject: DefaultSubjectPrefix + ".rt-carrier", Reply: "yesguard.decisions." + call, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// Barrier: acks go out in order, so once this acked publish is
	// acknowledged every ack above was sent; the guard's next record of
	// the call is stored behind wherever they went.
	pjs, err := jetstream.New(pipe)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pjs.Publish(ctx, DefaultSubjectPrefix+".rt-carrier", []byte(`{}`)); err != nil {
		t.Fatalf("the pipeline's acked publish: %v", err)
	}
	again, err := askYes(t, pipe, client, ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	eventuallyFor(t, "the second decision listed", func() bool { return slices.Contains(listed(), again.GetDecisionId()) })
	if ids := listed(); !slices.Contains(ids, first.GetDecisionId()) {
		t.Fatalf("ListDecisions(%s) = %v: the ALLOW %s was pushed out of the decision stream by the pipeline's acks", call, ids, first.GetDecisionId())
	}
}
