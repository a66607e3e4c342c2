package decisions

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// A record over MaxRecordBytes is trimmed to fit, in order (recent turns,
// then long texts, then arguments), saying so in its detail; one under it
// is kept whole; the record given is never changed.
func TestBound(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes, cut at a rune boundary
	turns := func(n int) []*yesguardv1.Turn {
		var ts []*yesguardv1.Turn
		for range n {
			ts = append(ts, &yesguardv1.Turn{Speaker: "caller", Text: long})
		}
		return ts
	}
	for _, tc := range []struct {
		name    string
		d       *yesguardv1.Decision
		trimmed bool
		without string // what the detail says went
		args    bool   // the arguments survive
	}{
		{name: "small", d: &yesguardv1.Decision{DecisionId: "a", Args: `{"a":1}`, Evidence: &yesguardv1.Evidence{RecentTurns: turns(2)}}, args: true},
		{name: "many recent turns", d: &yesguardv1.Decision{DecisionId: "b", Args: `{"a":1}`, Evidence: &yesguardv1.Evidence{RecentTurns: turns(20)}},
			trimmed: true, without: "recent turns", args: true},
		{name: "huge arguments", d: &yesguardv1.Decision{DecisionId: "c", Args: `{"a":"` + strings.Repeat("x", 70000) + `"}`, Message: long},
			trimmed: true, without: "arguments", args: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := proto.Clone(tc.d)
			got, trimmed := Bound(tc.d)
			if trimmed != tc.trimmed {
				t.Fatalf("trimmed %v, want %v", trimmed, tc.trimmed)
			}
			if !proto.Equal(before, tc.d) {
				t.Error("Bound changed the record it was given")
			}
			if n := proto.Size(got); n > MaxRecordBytes {
				t.Errorf("%d bytes, over %d", n, MaxRecordBytes)
			}
			if !tc.trimmed {
				return
			}
			if detail := got.GetEvidence().GetDetail(); !strings.Contains(detail, "trimmed") || !strings.Contains(detail, tc.without) {
				t.Errorf("detail %q does not say what went (%s)", detail, tc.without)
			}
			if (got.GetArgs() != "") != tc.args {
				t.Errorf("args kept %v, want %v", got.GetArgs() != "", tc.args)
			}
			if !utf8.ValidString(got.GetMessage()) {
				t.Error("the message was not cut at a rune boundary")
			}
		})
	}
}
