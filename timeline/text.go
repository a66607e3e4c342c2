package timeline

import (
	"strings"
	"unicode/utf8"

	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// highlight splits text so that the sentence the rules took as the
// question is marked. The record holds that sentence folded (lower case,
// no accents), so it is looked for in the folded text and mapped back to
// the words as spoken. ok is false when it is not found (the text is then
// one plain segment, and the page shows the sentence apart).
func highlight(text, sentence string) (segs []segment, ok bool) {
	sentence = strings.TrimSpace(sentence)
	if sentence == "" {
		return []segment{{Text: text}}, false
	}
	// folded[i] came from text[from[i]:to[i]].
	var folded strings.Builder
	var from, to []int
	for i, r := range text {
		f := patterns.Fold(string(r))
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			size = 1
		}
		for range len(f) {
			from = append(from, i)
			to = append(to, i+size)
		}
		folded.WriteString(f)
	}
	at := strings.Index(folded.String(), patterns.Fold(sentence))
	if at < 0 {
		return []segment{{Text: text}}, false
	}
	end := at + len(patterns.Fold(sentence)) - 1
	lo, hi := from[at], to[end]
	return split(text, lo, hi, "q"), true
}

// highlightAnswer marks the words a check took as the answer: the turn's
// text as the check saw it, which is where the turn began.
func highlightAnswer(text, answer string) []segment {
	if answer == "" || !strings.HasPrefix(text, answer) {
		return []segment{{Text: text}}
	}
	return split(text, 0, len(answer), "a")
}

// split marks text[lo:hi] with class.
func split(text string, lo, hi int, class string) []segment {
	var out []segment
	if lo > 0 {
		out = append(out, segment{Text: text[:lo]})
	}
	out = append(out, segment{Text: text[lo:hi], Mark: true, Class: class})
	if hi < len(text) {
		out = append(out, segment{Text: text[hi:]})
	}
	return out
}

// reasons are the reasons in words, for people; the proto's comments say
// the same.
var reasons = map[yesguardv1.Reason]string{
	yesguardv1.Reason_REASON_CONFIRMED:              "a plain yes to a question about this action",
	yesguardv1.Reason_REASON_EXPLICIT_INSTRUCTION:   "the caller's own latest words asked for this action by name",
	yesguardv1.Reason_REASON_NOT_REQUIRED:           "the policy says this tool needs no confirmation",
	yesguardv1.Reason_REASON_NO_ANSWER:              "the caller said nothing after the agent's question",
	yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER:      "the agent spoke after the caller's latest words",
	yesguardv1.Reason_REASON_NOT_PLAIN:              "the answer is not a plain yes",
	yesguardv1.Reason_REASON_NEGATED:                "the caller said no or changed their mind",
	yesguardv1.Reason_REASON_NO_QUESTION:            "the agent asked nothing before the answer",
	yesguardv1.Reason_REASON_ACTION_MISMATCH:        "the question was about another action",
	yesguardv1.Reason_REASON_ARGUMENT_MISMATCH:      "the turn did not state the call's values",
	yesguardv1.Reason_REASON_STALE:                  "the answer is too old to rely on",
	yesguardv1.Reason_REASON_EVIDENCE_USED:          "that yes already allowed this tool once",
	yesguardv1.Reason_REASON_DUPLICATE:              "the same action was allowed moments ago",
	yesguardv1.Reason_REASON_QUANTITY_REPEAT:        "the same item was recorded moments ago",
	yesguardv1.Reason_REASON_UNKNOWN_CALL:           "the guard had no transcript of this call",
	yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE: "the transcript feed was down",
	yesguardv1.Reason_REASON_CALLER_SPEAKING:        "the caller was still speaking when the wait ran out",
	yesguardv1.Reason_REASON_INTERNAL:               "the guard failed inside; nothing was judged",
	yesguardv1.Reason_REASON_UNSUPPORTED_LANGUAGE:   "no locale covers the caller's language",
	yesguardv1.Reason_REASON_TRANSCRIPT_GAP:         "the guard could not be sure it held every event of the call",
	yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN:     "the question asked more than whether to do this action",
	yesguardv1.Reason_REASON_COMPLETED:              "the allowed action completed",
	yesguardv1.Reason_REASON_FAILED:                 "the allowed action failed; its reservation was released",
	yesguardv1.Reason_REASON_REDEEMED:               "the approval was redeemed",
	yesguardv1.Reason_REASON_ALREADY_REDEEMED:       "the approval was already redeemed",
	yesguardv1.Reason_REASON_APPROVAL_EXPIRED:       "the approval had expired",
	yesguardv1.Reason_REASON_APPROVAL_MISMATCH:      "the arguments differ from the approved ones",
	yesguardv1.Reason_REASON_APPROVAL_INVALID:       "the approval is malformed or forged",
}

// why is a decision's one line: its reason in words, then the rule's
// detail.
func why(r yesguardv1.Reason, detail string) string {
	words, ok := reasons[r]
	if !ok {
		words = strings.ToLower(strings.TrimPrefix(r.String(), "REASON_"))
	}
	words = strings.ToUpper(words[:1]) + words[1:]
	if detail = strings.TrimSuffix(strings.TrimSpace(detail), "."); detail != "" {
		return words + ": " + detail + "."
	}
	return words + "."
}
