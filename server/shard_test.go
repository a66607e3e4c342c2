package server

import (
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// TestShardsByPartition does what "Running in production" tells an SRE to
// do: a subject mapping partitions the calls over two shards, each a guard
// reading its own prefix; a call's Check on its shard (FNV-1a of the call
// id, modulo 2) is judged, on the other shard it is refused.
func TestShardsByPartition(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(faultWait) {
		t.Fatal("not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if err := ns.GlobalAccount().AddMapping("yesguard.transcript.*", "yesguard.shard.{{partition(2,1)}}.{{wildcard(1)}}"); err != nil {
		t.Fatal(err)
	}
	var shards []*replica
	for k := range 2 {
		shards = append(shards, startReplicaCfg(t, Config{GRPCAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), ShutdownTimeout: 10 * time.Second,
			DataDir: t.TempDir(), SubjectPrefix: fmt.Sprintf("yesguard.shard.%d", k)}))
	}
	pub := newPublisher(t, ns.ClientURL())
	l := newLedger("Yes.")
	var calls []string
	for i := range 6 {
		call := fmt.Sprint("sharded-", i)
		calls = append(calls, call)
		h := fnv.New32a()
		h.Write([]byte(call))
		mine := int(h.Sum32() % 2)
		pub.conversation(call) // to yesguard.transcript.<call>, as ever
		eventuallyFor(t, "the call on its shard", func() bool { snap, _ := shards[mine].srv.store.Snapshot(call); return len(snap.Utterances) == 2 })
		resp, err := shards[1-mine].check(t.Context(), call, appealTool, appealArgs)
		if err != nil || resp.GetReason() != yesguardv1.Reason_REASON_UNKNOWN_CALL {
			t.Fatalf("%s on the other shard: %v, %v", call, resp, err)
		}
		l.add(call, resp)
		resp, err = shards[mine].check(t.Context(), call, appealTool, appealArgs)
		if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			t.Fatalf("%s on its shard %d: %v, %v", call, mine, resp, err)
		}
		l.add(call, resp)
		// The other shard never allows it: it has no transcript, and once
		// its mirror of the shared bucket has the reservation it answers
		// DUPLICATE.
		resp, err = shards[1-mine].check(t.Context(), call, appealTool, appealArgs)
		if r := resp.GetReason(); err != nil || r != yesguardv1.Reason_REASON_DUPLICATE && r != yesguardv1.Reason_REASON_UNKNOWN_CALL {
			t.Fatalf("%s on the other shard after the ALLOW: %v, %v", call, resp, err)
		}
		l.add(call, resp)
	}
	l.verify(t, shards[0], calls...) // the decision stream is shared
}
