package decisions

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// MaxRecordBytes bounds one decision record (its protobuf size): a record
// above it is stored, logged and listed as Bound trims it.
const MaxRecordBytes = 64 << 10

// MaxPageBytes bounds the records of one List page (their protobuf
// sizes): a page ends before the record that would take it over, so that
// a ListDecisions answer, with the call's transcript (768 KiB) and, on the
// first page, its events (1 MiB), stays under gRPC's 4 MiB message limit
// however large a call's records are. A page always
// holds at least one record (each is at most MaxRecordBytes, or was
// stored before records were bounded).
const MaxPageBytes = 2 << 20

// clipText bounds each quoted text of a record Bound trims.
const clipText = 1 << 10

// Bound returns d when it fits in MaxRecordBytes, else a trimmed copy
// that does, and whether it trimmed. It gives up, in this order, until
// the record fits: the recent turns of its evidence; the length of every
// text it quotes (turns, matches, message), clipped to 1 KiB; its
// arguments and result (args_hash still names the arguments); every turn
// of its evidence. What it gave up is said at the end of the evidence's
// detail. d itself is never changed.
func Bound(d *yesguardv1.Decision) (*yesguardv1.Decision, bool) {
	size := proto.Size(d)
	if size <= MaxRecordBytes {
		return d, false
	}
	d = proto.Clone(d).(*yesguardv1.Decision)
	if d.Evidence == nil {
		d.Evidence = &yesguardv1.Evidence{}
	}
	ev := d.Evidence
	var gave []string
	steps := []struct {
		what string
		do   func()
	}{
		{"its recent turns", func() { ev.RecentTurns = nil }},
		{"all but the first 1 KiB of each text", func() {
			for _, t := range []*yesguardv1.Turn{ev.Question, ev.Answer} {
				clipTurn(t)
			}
			for _, m := range ev.Matches {
				m.Text, m.Pattern = clip(m.Text), clip(m.Pattern)
			}
			ev.QuestionSentence, d.Message = clip(ev.QuestionSentence), clip(d.Message)
		}},
		{"its arguments and result (args_hash names the arguments)", func() { d.Args, d.Result = "", "" }},
		{"its question and answer turns and matches", func() { ev.Question, ev.Answer, ev.Matches = nil, nil, nil }},
	}
	for _, st := range steps {
		if proto.Size(d) <= MaxRecordBytes-256 {
			break
		}
		st.do()
		gave = append(gave, st.what)
	}
	ev.Detail = clip(ev.Detail) + fmt.Sprintf(" [record of %d bytes trimmed to the %d-byte bound: without %s]", size, MaxRecordBytes, strings.Join(gave, "; "))
	return d, true
}

func clipTurn(t *yesguardv1.Turn) {
	if t == nil {
		return
	}
	t.Text = clip(t.Text)
}

// clip cuts s to clipText bytes, at a rune boundary, marking the cut.
func clip(s string) string {
	if len(s) <= clipText {
		return s
	}
	cut := clipText
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d bytes cut]", len(s)-cut)
}

// fits reports whether a record of n more bytes fits a page that holds
// used bytes (the first record always fits).
func fits(used, n int) bool { return used == 0 || used+n <= MaxPageBytes }
