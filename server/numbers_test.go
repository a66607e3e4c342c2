package server

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Numbers with no one meaning are refused at Check, before anything is
// judged or held: NaN and the infinities (a protobuf binary client can
// send them; its hash would equal the string "NaN"'s), and magnitudes
// past 2^53 − 1, where 2^53 and 2^53 + 1 arrive as one double and would
// share one hash and one approval. Each is InvalidArgument naming the
// argument, counted; the largest exact integer is allowed.
func TestCheckRefusesNumbersWithoutOneMeaning(t *testing.T) {
	r := startReplicaCfg(t, testConfig(t))
	pub := newPublisher(t, r.srv.NATSURL())
	const call = "numbers"
	pub.conversation(call)
	eventuallyFor(t, "the yes applied", func() bool { snap, _ := r.srv.store.Snapshot(call); return len(snap.Utterances) == 2 })
	invalidBefore := labelled(t, r.reg, "yesguard_guard_check_errors_total", "code", codes.InvalidArgument.String())
	records := len(r.sink.all())

	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"NaN", map[string]any{"appeal_id": "A-17", "amount": math.NaN()}, []string{"amount", "not a JSON number"}},
		{"+Inf", map[string]any{"appeal_id": "A-17", "amount": math.Inf(1)}, []string{"amount", "not a JSON number"}},
		{"-Inf in a list", map[string]any{"appeal_id": "A-17", "amounts": []any{1.0, math.Inf(-1)}}, []string{"amounts[1]", "not a JSON number"}},
		{"2^53 + 1", map[string]any{"appeal_id": "A-17", "account": float64(9007199254740993)}, []string{"account", "send it as a string"}},
		{"2^53", map[string]any{"appeal_id": "A-17", "account": float64(1 << 53)}, []string{"account", "send it as a string"}},
		{"a large negative nested", map[string]any{"appeal_id": "A-17", "ref": map[string]any{"id": -1e21}}, []string{"ref.id", "send it as a string"}},
	} {
		resp, err := r.check(t.Context(), call, appealTool, tc.args)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: Check = %s/%s, %v; want InvalidArgument", tc.name, resp.GetOutcome(), resp.GetReason(), err)
		}
		for _, w := range tc.want {
			if !strings.Contains(status.Convert(err).Message(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, status.Convert(err).Message(), w)
			}
		}
	}
	if got := labelled(t, r.reg, "yesguard_guard_check_errors_total", "code", codes.InvalidArgument.String()); got != invalidBefore+6 {
		t.Errorf("check_errors_total{code=InvalidArgument} went from %v to %v, want +6", invalidBefore, got)
	}
	if n := len(r.sink.all()); n != records {
		t.Errorf("refused arguments wrote %d decision records", n-records)
	}
	// Nothing was judged: the yes is still there for exact arguments.
	resp, err := r.check(t.Context(), call, appealTool, map[string]any{"appeal_id": "A-17", "account": float64(1<<53 - 1)})
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("the largest exact integer: %s/%s, %v; want ALLOW", resp.GetOutcome(), resp.GetReason(), err)
	}
}
