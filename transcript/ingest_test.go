package transcript

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startNATS runs an embedded NATS server for the test and returns a
// connection for the ingester and one for publishing.
func startNATS(t *testing.T) (sub, pub *nats.Conn) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats server not ready")
	}
	connect := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	return connect(), connect()
}

// waitFor waits, on the store's change channels, until cond holds for the
// call's snapshot.
func waitFor(t *testing.T, s *Store, callID string, what string, cond func(Snapshot) bool) Snapshot {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		snap, ch := s.Snapshot(callID)
		if cond(snap) {
			return snap
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; last snapshot %+v", what, snap)
		}
	}
}

func publishJSON(t *testing.T, nc *nats.Conn, subject string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject, data); err != nil {
		t.Fatal(err)
	}
}

func TestIngesterNATS(t *testing.T) {
	subConn, pubConn := startNATS(t)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	core, logs := observer.New(zap.DebugLevel)
	store := NewStore(Limits{}, m)
	in := NewIngester(subConn, testPrefix, store, Limits{}, zap.New(core), m)
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
	defer in.Stop()
	// The subscription must be known to the server before publishing.
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}

	subj := testPrefix + ".call-1"
	// Malformed events first: NATS keeps one publisher's order, so once the
	// good events below are applied, these have been handled too.
	bad := []struct{ subject, data string }{
		{subj, `not json`},
		{subj, `{"call_id":"call-2","speaker":"caller","type":"speech_started"}`},
		{subj, `{"call_id":"call-1","speaker":"robot","type":"speech_started"}`},
		{testPrefix + ".call-1.extra", `{"call_id":"call-1","speaker":"caller","type":"speech_started"}`},
	}
	for _, b := range bad {
		if err := pubConn.Publish(b.subject, []byte(b.data)); err != nil {
			t.Fatal(err)
		}
	}

	publishJSON(t, pubConn, subj, map[string]any{"call_id": "call-1", "seq": 1, "speaker": "agent", "type": "transcript",
		"text": "Shall I book the 3pm slot?", "final": true, "response_id": "r1"})
	publishJSON(t, pubConn, subj, map[string]any{"call_id": "call-1", "seq": 2, "speaker": "caller", "type": "speech_started"})
	publishJSON(t, pubConn, subj, map[string]any{"call_id": "call-1", "seq": 3, "speaker": "caller", "type": "transcript", "text": "ye", "final": false})
	publishJSON(t, pubConn, subj, map[string]any{"call_id": "call-1", "seq": 4, "speaker": "caller", "type": "transcript", "text": "yes please",
		"final": true, "start_ms": 3100, "end_ms": 3900, "lang": "en-GB"})
	publishJSON(t, pubConn, subj, map[string]any{"call_id": "call-1", "seq": 4, "speaker": "caller", "type": "transcript", "text": "yes please", "final": true}) // redelivery
	publishJSON(t, pubConn, subj, map[string]any{"call_id": "call-1", "seq": 5, "speaker": "caller", "type": "speech_stopped"})
	publishJSON(t, pubConn, subj, map[string]any{"call_id": "call-1", "seq": 6, "type": "call_ended"})

	snap := waitFor(t, store, "call-1", "call_ended", func(s Snapshot) bool { return s.Ended })
	if got := texts(snap.Utterances); got != "Shall I book the 3pm slot?|yes please" {
		t.Fatalf("utterances %q", got)
	}
	if snap.CallerInFlight || snap.Lang != "en-GB" {
		t.Fatalf("snapshot %+v", snap)
	}
	turns := snap.Turns("")
	if len(turns) != 2 || turns[1].Speaker != Caller || !turns[1].HasTimes || turns[1].EndMS != 3900 {
		t.Fatalf("turns %+v", turns)
	}

	for reason, want := range map[string]float64{
		ReasonBadJSON: 1, ReasonCallIDMismatch: 1, ReasonUnknownSpeaker: 1, ReasonBadSubject: 1, ReasonDuplicateSeq: 1,
	} {
		if got := testutil.ToFloat64(m.EventsRejected.WithLabelValues(reason)); got != want {
			t.Errorf("events_rejected_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("call_ended", "none")); got != 1 {
		t.Errorf("events_total{call_ended,none} = %v", got)
	}
	if got := testutil.ToFloat64(m.ActiveCalls); got != 1 {
		t.Errorf("active_calls = %v", got)
	}
	if store.Len() != 1 {
		t.Errorf("rejected events created calls: Len %d", store.Len())
	}
	if n := logs.FilterMessage("transcript event rejected").Len(); n != 4 {
		t.Errorf("%d reject log lines, want 4", n)
	}
}

// TestIngesterStopDrains checks that Stop applies what was already
// received, and that nothing is applied after it.
func TestIngesterStopDrains(t *testing.T) {
	subConn, pubConn := startNATS(t)
	lim := Limits{MaxUtterances: 1000, MaxEventsPerSecond: 1 << 20} // 500 events of one call at once
	store := NewStore(lim, nil)
	in := NewIngester(subConn, testPrefix, store, lim, nil, nil)
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 1; i <= n; i++ {
		publishJSON(t, pubConn, testPrefix+".c", map[string]any{"call_id": "c", "seq": i, "speaker": "caller", "type": "transcript",
			"text": fmt.Sprint("u", i), "final": true})
	}
	if err := pubConn.Flush(); err != nil {
		t.Fatal(err)
	}
	// A round trip on the ingester's connection after the publisher's flush:
	// every message above has reached the ingester's client (NATS delivers
	// in order per connection pair, and the PONG follows them).
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := in.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	snap, _ := store.Snapshot("c")
	if len(snap.Utterances) != n {
		t.Fatalf("after Stop %d of %d applied", len(snap.Utterances), n)
	}
	// After Stop nothing more arrives.
	publishJSON(t, pubConn, testPrefix+".c", map[string]any{"call_id": "c", "seq": n + 1, "speaker": "caller", "type": "transcript", "text": "late", "final": true})
	if err := pubConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if snap, _ := store.Snapshot("c"); len(snap.Utterances) != n {
		t.Fatalf("applied after Stop: %d", len(snap.Utterances))
	}
	if err := in.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestIngesterStopAfterClose(t *testing.T) {
	subConn, _ := startNATS(t)
	in := NewIngester(subConn, testPrefix, NewStore(Limits{}, nil), Limits{}, zap.NewNop(), nil)
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	subConn.Close()
	if err := in.Stop(); err != nil {
		t.Fatalf("Stop after the connection closed: %v", err)
	}
}

func TestHandleNeverPanics(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	in := NewIngester(nil, testPrefix, NewStore(Limits{}, m), Limits{}, nil, m)
	for _, d := range []string{"", "{", "null", "[]", `{"call_id":1}`, "\x00\xff", `{"call_id":"c","type":"call_ended"}`} {
		in.Handle(testPrefix+".c", []byte(d))
		in.Handle("", []byte(d))
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("call_ended", "none")); got != 1 {
		t.Fatalf("events %v", got)
	}
}

var benchEvent = []byte(`{"call_id":"CA3f9c2d1e8b7a4f6e9d0c1b2a3f4e5d6c","seq":42,"speaker":"caller","type":"transcript",` +
	`"text":"yes that's right, please go ahead and book the three pm slot","final":true,"start_ms":81230,"end_ms":84410,"lang":"en-US","confidence":0.94}`)

// BenchmarkIngest measures Handle on a realistic caller final: 256 calls,
// seqs increasing per call, so every event is decoded, placed and bounded.
func BenchmarkIngest(b *testing.B) {
	const calls, perCall = 256, 64
	type msg struct {
		subject string
		data    []byte
	}
	msgs := make([]msg, 0, calls*perCall)
	for seq := 1; seq <= perCall; seq++ {
		for c := 0; c < calls; c++ {
			id := fmt.Sprintf("CA3f9c2d1e8b7a4f6e9d0c1b2a3f4e%04d", c)
			data := fmt.Sprintf(`{"call_id":%q,"seq":%d,"speaker":"caller","type":"transcript",`+
				`"text":"yes that's right, please go ahead and book the three pm slot","final":true,`+
				`"start_ms":%d,"end_ms":%d,"lang":"en-US","confidence":0.94}`, id, seq, seq*4000, seq*4000+3200)
			msgs = append(msgs, msg{testPrefix + "." + id, []byte(data)})
		}
	}
	m := NewMetrics(nil)
	newIn := func() *Ingester {
		// MaxUtterances below perCall: the bound is exercised too.
		lim := Limits{MaxUtterances: 32}
		return NewIngester(nil, testPrefix, NewStore(lim, m), lim, nil, m)
	}
	in := newIn()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(msgs)
		if j == 0 && i > 0 {
			b.StopTimer()
			in = newIn() // seqs would repeat
			b.StartTimer()
		}
		in.Handle(msgs[j].subject, msgs[j].data)
	}
	b.StopTimer()
	if got := testutil.ToFloat64(m.EventsRejected.WithLabelValues(ReasonDuplicateSeq)); got != 0 {
		b.Fatalf("%v duplicates", got)
	}
}

func BenchmarkApplyFinal(b *testing.B) {
	store := NewStore(Limits{}, NewMetrics(nil))
	ev, err := Decode(testPrefix, testPrefix+".CA3f9c2d1e8b7a4f6e9d0c1b2a3f4e5d6c", benchEvent, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev.Seq = uint64(i + 1)
		store.Apply(ev, now)
	}
}

func BenchmarkSnapshot(b *testing.B) {
	store := NewStore(Limits{}, nil)
	for c := 0; c < 1000; c++ {
		id := fmt.Sprint("call-", c)
		for i := 1; i <= 20; i++ {
			sp := Caller
			if i%2 == 0 {
				sp = Agent
			}
			store.Apply(final(id, uint64(i), sp, "yes that's right, please go ahead"), time.Now())
		}
	}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprint("call-", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			snap, _ := store.Snapshot(ids[i%len(ids)])
			if !snap.Exists {
				b.Fatal("missing")
			}
			i++
		}
	})
}
