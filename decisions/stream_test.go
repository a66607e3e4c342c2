package decisions

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yesguard/yesguard/internal/natstest"
)

// TestStreamStore: records stored by two replicas are listed by either,
// oldest first, in pages; a record stored twice is kept once.
func TestStreamStore(t *testing.T) {
	ns := natstest.JetStream(t)
	a, b := testStream(t, ns.ClientURL()), testStream(t, ns.ClientURL())
	ctx := t.Context()
	var ids []string
	for i := range 7 {
		d := record("c1", time.Duration(i)*time.Millisecond, 10)
		ids = append(ids, d.GetDecisionId())
		s := a
		if i%2 == 1 {
			s = b
		}
		if err := s.Add(ctx, d); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if err := a.Add(ctx, d); err != nil { // a retry: deduplicated
				t.Fatal(err)
			}
		}
	}
	_ = a.Add(ctx, record("other", 0, 10))
	var got []string
	token := ""
	for page := 0; page < 10; page++ {
		list, next, err := b.List(ctx, "c1", 3, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list {
			got = append(got, d.GetDecisionId())
		}
		if token = next; token == "" {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("listed %v\nwant    %v", got, ids)
	}
	// The newest record of each call, the newest call first.
	_ = b.Add(ctx, record("later", time.Second, 10))
	recent, err := a.Recent(ctx, 2)
	if err != nil || len(recent) != 2 || recent[0].GetCallId() != "later" || recent[1].GetCallId() != "c1" || recent[1].GetDecisionId() != ids[len(ids)-1] {
		t.Fatalf("Recent = %v, %v", recent, err)
	}
	if _, _, err := a.List(ctx, "c1", 3, "x"); err != ErrBadPageToken {
		t.Fatalf("bad token = %v", err)
	}
	if list, _, err := a.List(ctx, "nobody", 0, ""); err != nil || len(list) != 0 {
		t.Fatalf("unknown call = %v, %v", list, err)
	}
}

// testStream is a replica's decision stream on the JetStream server at
// url, its stream made if need be, closed at the test's end.
func testStream(t *testing.T, url string) *Stream {
	t.Helper()
	_, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, StreamConfig("YG_DECISIONS", DefaultSubjectPrefix, time.Hour, 64<<20, 1000, 1)); err != nil {
		t.Fatal(err)
	}
	s := NewStream(js, "YG_DECISIONS", DefaultSubjectPrefix)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}
