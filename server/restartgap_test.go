package server

import (
	"testing"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// A run whose first events never arrived stays refused across a restart.
// Red team finding 7: the replay took a run's first seq above 1 for
// history, and the restarted binary allowed what it had refused.
func TestGapAcrossRestart(t *testing.T) {
	cfg := Config{GRPCAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second, DataDir: t.TempDir(),
		ReconnectGrace: -1} // no publisher to wait for: this test is about the replay
	r := startReplicaCfg(t, cfg)
	pub := newPublisher(t, r.srv.NATSURL())
	call := "headless"
	pub.publish(event(call, transcript.Agent, "tts", 1, 1, "Shall I submit the appeal A-17?"))
	pub.publish(event(call, transcript.Caller, "stt", 1, 2, "Yes.")) // stt's seq 1 never arrives
	eventuallyFor(t, "the yes applied", func() bool { snap, _ := r.srv.store.Snapshot(call); return len(snap.Utterances) == 2 })
	resp, err := r.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_GAP {
		t.Fatalf("before the restart: %v, %v", resp, err)
	}
	r.kill()

	r2 := startReplicaCfg(t, cfg) // the same data directory
	eventuallyFor(t, "serving", r2.serving)
	resp, err = r2.check(t.Context(), call, appealTool, appealArgs)
	if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_TRANSCRIPT_GAP {
		t.Fatalf("after the restart: %s/%s (%s), %v; want TRANSCRIPT_GAP as before it", resp.GetOutcome(), resp.GetReason(), resp.GetEvidence().GetDetail(), err)
	}
}
