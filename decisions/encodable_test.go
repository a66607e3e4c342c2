package decisions

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/internal/natstest"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// A record holding what protojson cannot write (a timestamp past the
// year 9999, a string that is not UTF-8, at any depth) is stored on a
// real decision stream once Encodable has replaced those fields, and
// names them; a sound record is returned as it is.
func TestEncodableRecordsAreStored(t *testing.T) {
	s := testStream(t, natstest.JetStream(t).ClientURL())
	ctx := t.Context()

	bad := record("c1", 0, 10)
	bad.ApprovalExpiresAt = &timestamppb.Timestamp{Seconds: 1 << 62}
	bad.Tool = "book\xff"
	bad.Evidence = &yesguardv1.Evidence{Detail: "quoted \xfe bytes", Answer: &yesguardv1.Turn{Text: "ja\xc3", ReceivedAt: &timestamppb.Timestamp{Seconds: -1 << 62}}, RecentTurns: []*yesguardv1.Turn{{Text: "ok"}, {Text: "\xff"}}}
	if _, err := recordJSON.Marshal(bad); err == nil {
		t.Fatal("the bad record encodes as it is: the test proves nothing")
	}
	before := proto.Clone(bad)
	fixed, fields := Encodable(bad)
	if !proto.Equal(bad, before) {
		t.Error("Encodable changed its argument")
	}
	want := []string{"approval_expires_at", "tool", "evidence.detail", "evidence.answer.text", "evidence.answer.received_at", "evidence.recent_turns[].text"}
	for _, f := range want {
		if !strings.Contains(strings.Join(fields, " "), f) || !strings.Contains(fixed.GetEvidence().GetDetail(), f) {
			t.Errorf("Encodable did not name %s: %v, detail %q", f, fields, fixed.GetEvidence().GetDetail())
		}
	}
	if err := s.Add(ctx, fixed); err != nil {
		t.Fatalf("the replaced record is not stored: %v", err)
	}
	list, _, err := s.List(ctx, "c1", 10, "")
	if err != nil || len(list) != 1 || list[0].GetDecisionId() != bad.GetDecisionId() || list[0].GetTool() != "book\uFFFD" {
		t.Fatalf("List = %v, %v", list, err)
	}

	good := record("c2", 0, 10)
	if same, fields := Encodable(good); same != good || fields != nil {
		t.Errorf("a sound record: %v, %v; want itself", same, fields)
	}
}
