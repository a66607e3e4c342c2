package decisions

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yesguard/yesguard/internal/natstest"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
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

// Both stores' Recent show a call by its headline: the ALLOW, not the
// duplicate and Complete after it; a call of repeats alone by its newest.
func TestRecentShowsTheHeadline(t *testing.T) {
	ns := natstest.JetStream(t)
	ctx := t.Context()
	stream := testStream(t, ns.ClientURL())
	of := func(call string, at time.Duration, kind yesguardv1.DecisionKind, o yesguardv1.Outcome) *yesguardv1.Decision {
		d := record(call, at, 10)
		d.Kind, d.Outcome = kind, o
		return d
	}
	check, complete := yesguardv1.DecisionKind_DECISION_KIND_CHECK, yesguardv1.DecisionKind_DECISION_KIND_COMPLETE
	allow := of("h1", 0, check, yesguardv1.Outcome_OUTCOME_ALLOW)
	onlyRepeat := of("h2", 4*time.Millisecond, check, yesguardv1.Outcome_OUTCOME_DUPLICATE)
	recs := []*yesguardv1.Decision{
		of("h1", -time.Millisecond, check, yesguardv1.Outcome_OUTCOME_REFUSE),
		allow,
		of("h1", time.Millisecond, check, yesguardv1.Outcome_OUTCOME_DUPLICATE),
		of("h1", 2*time.Millisecond, complete, yesguardv1.Outcome_OUTCOME_UNSPECIFIED),
		onlyRepeat,
	}
	for name, s := range map[string]Store{"memory": NewMemory(MemoryLimits{}), "stream": stream} {
		t.Run(name, func(t *testing.T) {
			for _, d := range recs {
				if err := s.Add(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Recent(ctx, 0)
			if err != nil || len(got) != 2 {
				t.Fatalf("Recent = %v, %v", got, err)
			}
			// h2's newest record is the newest: it is listed first.
			if got[0].GetDecisionId() != onlyRepeat.GetDecisionId() || got[1].GetDecisionId() != allow.GetDecisionId() {
				t.Errorf("Recent = %s %s/%s, %s %s/%s; want h2's duplicate, then h1's ALLOW",
					got[0].GetCallId(), got[0].GetKind(), got[0].GetOutcome(), got[1].GetCallId(), got[1].GetKind(), got[1].GetOutcome())
			}
		})
	}
}
