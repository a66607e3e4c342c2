package decisionlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/timestamppb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func decision(i int) *yesguardv1.Decision {
	return &yesguardv1.Decision{
		DecisionId: fmt.Sprintf("01JDECISION%04d", i),
		Time:       timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)),
		CallId:     "call-1",
		Tool:       "submit_appeal",
		Outcome:    yesguardv1.Outcome_OUTCOME_REFUSE,
		Reason:     yesguardv1.Reason_REASON_NEGATED,
		Message:    `Ask again: the caller said "no <wait>" & hung up`,
		WaitedMs:   12,
		Args:       `{"id":"A-1"}`,
		Evidence: &yesguardv1.Evidence{
			Answer:  &yesguardv1.Turn{Speaker: "caller", Text: "no, don't", FirstSeq: 7, LastSeq: 7},
			Matches: []*yesguardv1.Match{{Rule: "negation", Pattern: "don't", Text: "don't"}},
		},
	}
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Sync() error { return nil }

func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	return parseLines(t, b.buf.Bytes())
}

func parseLines(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", len(out)+1, err, sc.Bytes())
		}
		out = append(out, m)
	}
	return out
}

// blockingWriter blocks every Write until release is closed, telling
// entered about the first.
type blockingWriter struct {
	syncBuffer
	entered     chan struct{}
	enteredOnce sync.Once
	release     chan struct{}
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.enteredOnce.Do(func() { close(w.entered) })
	<-w.release
	return w.syncBuffer.Write(p)
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func newMetrics() *Metrics { return NewMetrics(prometheus.NewRegistry()) }

func closeLogger(t *testing.T, l *Logger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestLineShape(t *testing.T) {
	buf := &syncBuffer{}
	m := newMetrics()
	l := New(buf, m)
	l.Write(decision(1))
	l.Write(nil) // ignored
	closeLogger(t, l)

	lines := buf.lines(t)
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1", len(lines))
	}
	line := lines[0]
	for key, want := range map[string]any{"logger": LoggerName, "msg": "decision", "level": "info"} {
		if line[key] != want {
			t.Errorf("%s = %v, want %v", key, line[key], want)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(line["ts"])); err != nil {
		t.Errorf("ts: %v", err)
	}
	d, ok := line["decision"].(map[string]any)
	if !ok {
		t.Fatalf("decision is %T, want a nested object: %v", line["decision"], line["decision"])
	}
	for _, tc := range []struct {
		field string
		want  any
	}{
		{"decision_id", "01JDECISION0001"},
		{"call_id", "call-1"},
		{"outcome", "OUTCOME_REFUSE"},
		{"reason", "REASON_NEGATED"},
		{"time", "2025-01-02T03:04:05Z"},
		{"waited_ms", "12"}, // protojson writes int64 as a string
		{"message", `Ask again: the caller said "no <wait>" & hung up`},
		{"args", `{"id":"A-1"}`},
	} {
		if d[tc.field] != tc.want {
			t.Errorf("decision.%s = %#v, want %#v", tc.field, d[tc.field], tc.want)
		}
	}
	ev, _ := d["evidence"].(map[string]any)
	ans, _ := ev["answer"].(map[string]any)
	if ans["text"] != "no, don't" || ans["first_seq"] != "7" {
		t.Errorf("decision.evidence.answer = %v", ans)
	}
	if got := counterValue(t, m.Written); got != 1 {
		t.Errorf("lines written = %v, want 1", got)
	}
	if got := counterValue(t, m.Dropped); got != 0 {
		t.Errorf("dropped = %v, want 0", got)
	}
}

func TestDropsWhenFull(t *testing.T) {
	w := newBlockingWriter()
	m := newMetrics()
	l := New(w, m, WithQueueSize(2))

	l.Write(decision(0))
	<-w.entered // the drain goroutine holds decision 0 in a blocked write
	l.Write(decision(1))
	l.Write(decision(2)) // the queue is full now
	for i := 3; i < 8; i++ {
		start := time.Now()
		l.Write(decision(i))
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Write blocked for %s", d)
		}
	}
	if got := counterValue(t, m.Dropped); got != 5 {
		t.Errorf("dropped = %v, want 5", got)
	}

	close(w.release)
	closeLogger(t, l)
	lines := w.lines(t)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3", len(lines))
	}
	for i, line := range lines {
		id := line["decision"].(map[string]any)["decision_id"]
		if want := fmt.Sprintf("01JDECISION%04d", i); id != want {
			t.Errorf("line %d: decision_id = %v, want %v", i, id, want)
		}
	}
	if got := counterValue(t, m.Written); got != 3 {
		t.Errorf("lines written = %v, want 3", got)
	}
}

func TestCloseFlushesQueue(t *testing.T) {
	w := newBlockingWriter()
	m := newMetrics()
	l := New(w, m, WithQueueSize(100))
	const n = 100
	for i := range n {
		l.Write(decision(i))
	}
	<-w.entered
	// Close must wait for all of them, writes still blocked when it starts.
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(w.release)
	}()
	closeLogger(t, l)
	if got := len(w.lines(t)); got != n {
		t.Errorf("got %d lines after Close, want %d", got, n)
	}
	if got := counterValue(t, m.Written); got != n {
		t.Errorf("lines written = %v, want %d", got, n)
	}

	// Closed: further records are dropped and counted, and Close again
	// returns the first result.
	l.Write(decision(n))
	if got := counterValue(t, m.Dropped); got != 1 {
		t.Errorf("dropped after close = %v, want 1", got)
	}
	closeLogger(t, l)
}

func TestCloseBoundedByContext(t *testing.T) {
	w := newBlockingWriter()
	m := newMetrics()
	l := New(w, m, WithQueueSize(10))
	for i := range 4 {
		l.Write(decision(i))
	}
	<-w.entered

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := l.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}

	// The stuck write finishes; the rest are dropped, not written.
	close(w.release)
	<-l.done
	if got := len(w.lines(t)); got != 1 {
		t.Errorf("got %d lines, want 1", got)
	}
	if got := counterValue(t, m.Dropped); got != 3 {
		t.Errorf("dropped = %v, want 3", got)
	}
	if err2 := l.Close(context.Background()); err2 != err {
		t.Errorf("second Close = %v, want the first result %v", err2, err)
	}
}

func TestConcurrentWriteAndClose(t *testing.T) {
	buf := &syncBuffer{}
	m := newMetrics()
	l := New(buf, m, WithQueueSize(16))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				l.Write(decision(g*1000 + i))
			}
		})
	}
	time.Sleep(time.Millisecond)
	closeLogger(t, l)
	wg.Wait()

	written := counterValue(t, m.Written)
	dropped := counterValue(t, m.Dropped)
	if written+dropped != 8*200 {
		t.Errorf("written %v + dropped %v != %d", written, dropped, 8*200)
	}
	if got := len(buf.lines(t)); float64(got) != written {
		t.Errorf("got %d lines, counter says %v", got, written)
	}
}

func TestOpen(t *testing.T) {
	for _, path := range []string{"", "-", "stdout", "stderr"} {
		t.Run("std/"+path, func(t *testing.T) {
			l, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			closeLogger(t, l)
		})
	}

	t.Run("file appends", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "decisions.log")
		for i := range 2 {
			l, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.Write(decision(i))
			closeLogger(t, l)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(parseLines(t, data)); got != 2 {
			t.Errorf("got %d lines, want 2", got)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&^0o640 != 0 {
			t.Errorf("mode = %v, want at most 0640", perm)
		}
	})

	t.Run("bad path", func(t *testing.T) {
		_, err := Open(filepath.Join(t.TempDir(), "missing", "decisions.log"), nil)
		if err == nil {
			t.Fatal("Open succeeded on a missing directory")
		}
	})
}
