package decisions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func record(call string, at time.Duration, argBytes int) *yesguardv1.Decision {
	return &yesguardv1.Decision{
		DecisionId: ulid.MustNew(ulid.Timestamp(t0.Add(at)), ulid.DefaultEntropy()).String(),
		Time:       timestamppb.New(t0.Add(at)),
		CallId:     call,
		Args:       strings.Repeat("x", argBytes),
	}
}

// TestMemoryBounds: the records per call, the bytes in all and the TTL
// each bound what a Memory holds.
func TestMemoryBounds(t *testing.T) {
	ctx := context.Background()
	s := NewMemory(MemoryLimits{MaxPerCall: 3, MaxBytes: 32 * 64 << 10, TTL: time.Minute})
	for i := range 5 {
		_ = s.Add(ctx, record("c", time.Duration(i)*time.Millisecond, 10))
	}
	page, _, _ := s.List(ctx, "c", 0, "")
	if len(page) != 3 {
		t.Fatalf("%d records of c, want the last 3", len(page))
	}
	// The 64 KiB share of a shard holds one 40 KiB record: a call's
	// newest record stays, the oldest calls go first.
	for i := range 2000 {
		_ = s.Add(ctx, record(fmt.Sprint("big-", i), time.Second+time.Duration(i)*time.Millisecond, 40<<10))
	}
	if b := s.Bytes(); b > 32*64<<10 {
		t.Fatalf("holds %d bytes, bound %d", b, 32*64<<10)
	}
	if page, _, _ := s.List(ctx, "big-1999", 0, ""); len(page) != 1 {
		t.Fatalf("the newest call lost its record")
	}
	if page, _, _ := s.List(ctx, "big-0", 0, ""); len(page) != 0 {
		t.Fatalf("the oldest big call is still held")
	}
	if n := s.Sweep(t0.Add(time.Hour)); n == 0 || s.Bytes() != 0 {
		t.Fatalf("sweep forgot %d calls, %d bytes left", n, s.Bytes())
	}
}

// TestMemoryRecent: each call's newest record, newest call first, bounded
// by the limit; a call's older records never stand for it.
func TestMemoryRecent(t *testing.T) {
	ctx := context.Background()
	s := NewMemory(MemoryLimits{})
	if got, err := s.Recent(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty store: Recent = %v, %v", got, err)
	}
	// Calls c0..c9; c3 records again last, so it is the newest call.
	for i := range 10 {
		_ = s.Add(ctx, record(fmt.Sprintf("c%d", i), time.Duration(i)*time.Second, 1))
	}
	last := record("c3", 20*time.Second, 1)
	_ = s.Add(ctx, last)
	got, err := s.Recent(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range got {
		ids = append(ids, d.GetCallId())
	}
	if want := "c3 c9 c8 c7"; strings.Join(ids, " ") != want {
		t.Fatalf("Recent(4) calls = %v, want %s", ids, want)
	}
	if got[0].GetDecisionId() != last.GetDecisionId() {
		t.Fatalf("c3 stands for itself by %s, want its newest record %s", got[0].GetDecisionId(), last.GetDecisionId())
	}
	all, _ := s.Recent(ctx, 0)
	if len(all) != 10 {
		t.Fatalf("Recent(0) = %d calls, want all 10", len(all))
	}
}
