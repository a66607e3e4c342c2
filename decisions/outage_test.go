package decisions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/yesguard/yesguard/internal/natstest"
)

// hangGuard is how long a call that should answer at once may take before
// the test calls it hung: far past any scheduling delay on a loaded
// machine, far short of the hour the connection's requests may wait.
const hangGuard = 30 * time.Second

// answers runs f and reports whether it returned within hangGuard.
func answers(f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(hangGuard):
		return false
	}
}

// Finding 17: while NATS was down, a record's Add waited for the stream up
// to its context's end (the Check's deadline), and List waited to the
// client's. Now Add queues at once and List fails at once; the queued
// record is stored once NATS is back.
func TestStreamFailsFastWhileNATSIsDown(t *testing.T) {
	srv := natstest.StartRestartable(t)
	_, js, down, up := natstest.ConnectWatched(t, srv.ClientURL())
	if _, err := js.CreateOrUpdateStream(t.Context(), StreamConfig("YG_DECISIONS", DefaultSubjectPrefix, time.Hour, 64<<20, 100, 1)); err != nil {
		t.Fatal(err)
	}
	s := NewStream(js, "YG_DECISIONS", DefaultSubjectPrefix)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	spoolDir := t.TempDir()
	if _, err := s.OpenSpool(spoolDir); err != nil {
		t.Fatal(err)
	}
	spoolFile := filepath.Join(spoolDir, "decisions-0.spool")

	srv.Stop()
	<-down
	d := record("outage", 0, 10)
	var addErr, listErr, recentErr error
	// A context that never ends: only the store's own rule can answer.
	if !answers(func() { addErr = s.Add(context.Background(), d) }) {
		t.Fatal("Add hung while NATS was down")
	}
	if !errors.Is(addErr, ErrUnavailable) || s.Queued() != 1 {
		t.Errorf("Add while NATS was down: %v, %d queued; want ErrUnavailable and 1 queued", addErr, s.Queued())
	}
	if spooled, err := readSpool(spoolFile); err != nil || len(spooled) != 1 || spooled[0].GetDecisionId() != d.GetDecisionId() {
		t.Errorf("the spool holds %v (%v), want the queued record", spooled, err)
	}
	if !answers(func() { _, _, listErr = s.List(context.Background(), "outage", 0, "") }) {
		t.Fatal("List hung while NATS was down")
	}
	if !answers(func() { _, recentErr = s.Recent(context.Background(), 0) }) {
		t.Fatal("Recent hung while NATS was down")
	}
	if !errors.Is(listErr, ErrUnavailable) || !errors.Is(recentErr, ErrUnavailable) {
		t.Errorf("List, Recent while NATS was down: %v, %v; want ErrUnavailable", listErr, recentErr)
	}

	srv.Start()
	<-up
	// The queued record is stored: wait for the queue to drain.
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	for s.Queued() != 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d records still queued after NATS came back", s.Queued())
		case <-time.After(20 * time.Millisecond):
		}
	}
	list, _, err := s.List(ctx, "outage", 0, "")
	if err != nil || len(list) != 1 || list[0].GetDecisionId() != d.GetDecisionId() {
		t.Fatalf("after the outage: %v, %v; want the queued record", list, err)
	}
	// Stored: the spool is emptied.
	if st, err := os.Stat(spoolFile); err != nil || st.Size() != 0 {
		t.Errorf("the spool after every record was stored: %v, %v; want it empty", st, err)
	}
}

// A burst of records queued at once (NATS down, or a stream slower than
// the Checks' deadlines) shares the spool's syncs: each Add still returns
// with its record synced, but they do not wait for a sync each in turn,
// which held the answers of a burst up for seconds.
func TestSpoolBurstSharesSyncs(t *testing.T) {
	srv := natstest.StartRestartable(t)
	_, js, down, _ := natstest.ConnectWatched(t, srv.ClientURL())
	if _, err := js.CreateOrUpdateStream(t.Context(), StreamConfig("YG_DECISIONS", DefaultSubjectPrefix, time.Hour, 64<<20, 100, 1)); err != nil {
		t.Fatal(err)
	}
	s := NewStream(js, "YG_DECISIONS", DefaultSubjectPrefix)
	t.Cleanup(func() {
		// NATS stays down: what is queued stays in the spool.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	spoolDir := t.TempDir()
	if _, err := s.OpenSpool(spoolDir); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	<-down
	const burst = 500
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range burst {
		wg.Go(func() {
			<-start
			if err := s.Add(context.Background(), record(fmt.Sprint("burst-", i), time.Duration(i), 10)); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Add while NATS was down: %v, want ErrUnavailable", err)
			}
		})
	}
	close(start)
	wg.Wait()
	spooled, err := readSpool(filepath.Join(spoolDir, "decisions-0.spool"))
	if err != nil || len(spooled) != burst {
		t.Fatalf("the spool holds %d records (%v), want %d", len(spooled), err, burst)
	}
	if n := s.spool.syncs.Load(); n > burst/5 {
		t.Fatalf("%d records spooled at once took %d syncs, want them shared (at most %d)", burst, n, burst/5)
	}
	t.Logf("%d records spooled at once: %d syncs", burst, s.spool.syncs.Load())
}
