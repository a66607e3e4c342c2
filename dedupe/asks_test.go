package dedupe

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/internal/natstest"
)

// A question issued on one replica is known on another, for its action
// only, until it expires; concurrent issues for one action all land; the
// key carries a TTL on the server.
func TestKVAsksAcrossReplicas(t *testing.T) {
	ns := natstest.JetStream(t)
	a, b := replicaBook(t, ns.ClientURL()), replicaBook(t, ns.ClientURL())
	now := time.Now()
	key := Key{CallID: "c1", Tool: "pay", ArgsHash: "h1"}
	ask := Ask{ID: "ask_1", Text: "Pay?", Norm: "pay", Lang: "en", Issued: now, Expires: now.Add(time.Minute)}
	if err := a.IssueAsk(t.Context(), key, ask); err != nil {
		t.Fatal(err)
	}
	got, err := b.AsksFor(t.Context(), key, now)
	if err != nil || len(got) != 1 || got[0].ID != "ask_1" || !got[0].Issued.Equal(now) {
		t.Fatalf("the other replica reads %v, %v", got, err)
	}
	for _, other := range []Key{{CallID: "c2", Tool: "pay", ArgsHash: "h1"}, {CallID: "c1", Tool: "dispute", ArgsHash: "h1"}, {CallID: "c1", Tool: "pay", ArgsHash: "h2"}} {
		if got, _ := b.AsksFor(t.Context(), other, now); len(got) != 0 {
			t.Errorf("%v holds the ask of another action: %v", other, got)
		}
	}
	if got, _ := b.AsksFor(t.Context(), key, now.Add(time.Minute)); len(got) != 0 {
		t.Errorf("an expired ask is live: %v", got)
	}

	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			book := []*KV{a, b}[i%2]
			x := ask
			x.ID = fmt.Sprint("ask_c", i)
			if err := book.IssueAsk(t.Context(), key, x); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, _ = a.AsksFor(t.Context(), key, now)
	ids := map[string]bool{}
	for _, x := range got {
		ids[x.ID] = true
	}
	for i := range 6 {
		if !ids[fmt.Sprint("ask_c", i)] {
			t.Errorf("concurrent issue %d was lost: %v", i, got)
		}
	}

	_, js := natstest.Connect(t, ns.ClientURL())
	st, err := js.Stream(t.Context(), "KV_yesguard_test")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(t.Context(), "$KV.yesguard_test."+askKeyOf(key))
	if err != nil {
		t.Fatal(err)
	}
	if ttl := msg.Header.Get(jetstream.MsgTTLHeader); ttl == "" {
		t.Errorf("the ask key has no TTL: headers %v", msg.Header)
	}
}

func TestMemoryAsks(t *testing.T) {
	b := NewMemory(nil)
	now := time.Now()
	key := Key{CallID: "c1", Tool: "pay", ArgsHash: "h1"}
	for i := range maxAsks + 3 {
		_ = b.IssueAsk(t.Context(), key, Ask{ID: fmt.Sprint(i), Issued: now, Expires: now.Add(time.Minute)})
	}
	got, _ := b.AsksFor(t.Context(), key, now)
	if len(got) != maxAsks || got[len(got)-1].ID != fmt.Sprint(maxAsks+2) {
		t.Errorf("bounded to the newest %d: %v", maxAsks, got)
	}
	if got, _ := b.AsksFor(t.Context(), key, now.Add(time.Minute)); len(got) != 0 {
		t.Errorf("expired asks are live: %v", got)
	}
}
