package transcript

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reject reasons. They are Prometheus label values, so the set is closed:
// Decode and Store.Apply return no other reason.
const (
	ReasonBadSubject     = "bad_subject"
	ReasonBadJSON        = "bad_json"
	ReasonMissingCallID  = "missing_call_id"
	ReasonCallIDMismatch = "call_id_mismatch"
	ReasonUnknownType    = "unknown_type"
	ReasonUnknownSpeaker = "unknown_speaker"
	ReasonTextTooLong    = "text_too_long"
	ReasonBadText        = "bad_text"
	ReasonEmptyText      = "empty_text"
	ReasonBadTimes       = "bad_times"
	ReasonDuplicateSeq   = "duplicate_seq"
	ReasonBadSource      = "bad_source"
	ReasonSeqJump        = "seq_jump"
	// ReasonStreamDiscarded counts events the transcript stream discarded
	// before this replica applied them (StreamIngester).
	ReasonStreamDiscarded = "stream_discarded"
	// ReasonStaleSeq: a seq too old for the call to tell a repeat from a
	// late event (beyond its run's window, or of an old run).
	ReasonStaleSeq = "stale_seq"
	// ReasonSeqConflict: a final under a seq its run already used, with
	// other words (a publisher restarted without a new epoch).
	ReasonSeqConflict = "seq_conflict"

	// Limits (Limits): the event was well formed but too much.
	ReasonLangTooLong       = "lang_too_long"
	ReasonResponseIDTooLong = "response_id_too_long"
	ReasonSourceTooLong     = "source_too_long"
	ReasonTooManyCalls      = "too_many_calls"
	ReasonStoreFull         = "store_full"
	ReasonRateLimited       = "rate_limited"
	ReasonPublisherCalls    = "publisher_calls"
)

// The limit labels of yesguard_transcript_limit_hits_total, one a field
// of Limits, and the serve flag that sets each (for the log line that
// explains a hit).
const (
	LimitTextBytes       = "text_bytes"
	LimitLangBytes       = "lang_bytes"
	LimitResponseIDBytes = "response_id_bytes"
	LimitSourceBytes     = "source_bytes"
	LimitCalls           = "calls"
	LimitCallBytes       = "call_bytes"
	LimitTotalBytes      = "total_bytes"
	LimitEventsPerSecond = "events_per_second"
	LimitPublisherCalls  = "publisher_calls"
	// LimitEventsPerCall: a call's events reached what the transcript
	// stream holds of one call; the stream refuses its next ones.
	LimitEventsPerCall = "events_per_call"
	// LimitStreamBytes: the transcript stream is (nearly) full, and
	// refuses events to their publishers.
	LimitStreamBytes = "stream_bytes"
)

// LimitFlags names the serve flag of each limit label.
var LimitFlags = map[string]string{
	LimitTextBytes:       "--max-text-bytes",
	LimitLangBytes:       "--max-lang-bytes",
	LimitResponseIDBytes: "--max-response-id-bytes",
	LimitSourceBytes:     "--max-source-bytes",
	LimitCalls:           "--max-calls",
	LimitCallBytes:       "--max-call-bytes",
	LimitTotalBytes:      "--max-total-bytes",
	LimitEventsPerSecond: "--max-events-per-second",
	LimitPublisherCalls:  "--max-calls-per-publisher",
	LimitEventsPerCall:   "--max-events-per-call",
	LimitStreamBytes:     "--transcript-max-bytes",
}

func reject(reason, detail string) error {
	return &RejectError{Reason: reason, Detail: detail}
}

// tooLong rejects a string field above its limit, saying by how much and
// which flag raises the limit.
func tooLong(reason, limit, field string, got, max int) error {
	return &RejectError{Reason: reason, Limit: limit,
		Detail: field + ": " + strconv.Itoa(got) + " bytes > " + strconv.Itoa(max) + " (" + LimitFlags[limit] + ")"}
}

// subjectCallID returns the call id token of subject, which must be
// <prefix>.<call_id> with exactly one non-empty token after the prefix.
func subjectCallID(prefix, subject string) (string, bool) {
	id := subject
	if prefix != "" {
		if len(subject) <= len(prefix)+1 || subject[:len(prefix)] != prefix || subject[len(prefix)] != '.' {
			return "", false
		}
		id = subject[len(prefix)+1:]
	}
	if id == "" || id == "*" || id == ">" {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		// '.' would make more than one token; NATS subjects hold no
		// whitespace or control characters.
		if c := id[i]; c == '.' || c <= ' ' || c == 0x7f {
			return "", false
		}
	}
	return id, true
}

func decode(prefix, subject string, data []byte, limits Limits) (Event, error) {
	limits.SetDefaults()

	subjID, ok := subjectCallID(prefix, subject)
	if !ok {
		return Event{}, reject(ReasonBadSubject, "subject is not "+prefix+".<call_id>")
	}

	// The common message takes the fast path; whatever it does not take,
	// encoding/json decodes, with the same result.
	var ev Event
	if !decodeFast(data, subjID, &ev) {
		// Its own variable, so that ev does not escape on the fast path.
		slow := new(Event)
		if err := json.Unmarshal(data, slow); err != nil {
			return Event{}, reject(ReasonBadJSON, err.Error())
		}
		ev = *slow
		// encoding/json silently replaces invalid UTF-8 with U+FFFD. JSON
		// text must be UTF-8, so such a message is rejected: as bad_text
		// when the text field is at fault, else as bad_json.
		if !utf8.Valid(data) {
			if rawTextInvalid(data) {
				return Event{}, reject(ReasonBadText, "text is not valid UTF-8")
			}
			return Event{}, reject(ReasonBadJSON, "message is not valid UTF-8")
		}
	}

	if ev.CallID == "" {
		return Event{}, reject(ReasonMissingCallID, "no call_id")
	}
	if ev.CallID != subjID {
		return Event{}, reject(ReasonCallIDMismatch, "call_id does not match the subject")
	}

	switch ev.Type {
	case TypeTranscript, TypeSpeechStarted, TypeSpeechStopped, TypeCallEnded:
	default:
		return Event{}, reject(ReasonUnknownType, "type "+boundedQuote(string(ev.Type)))
	}

	switch ev.Speaker {
	case Caller, Agent:
	case "":
		if ev.Type != TypeCallEnded {
			return Event{}, reject(ReasonUnknownSpeaker, "no speaker")
		}
	default:
		return Event{}, reject(ReasonUnknownSpeaker, "speaker "+boundedQuote(string(ev.Speaker)))
	}

	if len(ev.Text) > limits.MaxTextBytes {
		return Event{}, tooLong(ReasonTextTooLong, LimitTextBytes, "text", len(ev.Text), limits.MaxTextBytes)
	}
	if len(ev.Lang) > limits.MaxLangBytes {
		return Event{}, tooLong(ReasonLangTooLong, LimitLangBytes, "lang", len(ev.Lang), limits.MaxLangBytes)
	}
	if len(ev.ResponseID) > limits.MaxResponseIDBytes {
		return Event{}, tooLong(ReasonResponseIDTooLong, LimitResponseIDBytes, "response_id", len(ev.ResponseID), limits.MaxResponseIDBytes)
	}
	if len(ev.Source) > limits.MaxSourceBytes {
		return Event{}, tooLong(ReasonSourceTooLong, LimitSourceBytes, "source", len(ev.Source), limits.MaxSourceBytes)
	}
	if !utf8.ValidString(ev.Text) { // unreachable after the check above; kept as a guard
		return Event{}, reject(ReasonBadText, "text is not valid UTF-8")
	}
	if ev.Type == TypeTranscript && ev.Final && strings.TrimSpace(ev.Text) == "" {
		return Event{}, reject(ReasonEmptyText, "final transcript with empty text")
	}

	if strings.IndexFunc(ev.Source, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return Event{}, reject(ReasonBadSource, "source: no spaces or control characters")
	}
	if ev.StartMS != nil && *ev.StartMS < 0 {
		return Event{}, reject(ReasonBadTimes, "negative start_ms")
	}
	if ev.EndMS != nil && *ev.EndMS < 0 {
		return Event{}, reject(ReasonBadTimes, "negative end_ms")
	}
	if ev.StartMS != nil && ev.EndMS != nil && *ev.EndMS < *ev.StartMS {
		return Event{}, reject(ReasonBadTimes, "end_ms before start_ms")
	}
	return ev, nil
}

// rawTextInvalid reports whether the raw JSON of the message's text field
// holds invalid UTF-8. It is only called on the rare message that does.
func rawTextInvalid(data []byte) bool {
	var raw struct {
		Text json.RawMessage `json:"text"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return false
	}
	return !utf8.Valid(raw.Text)
}

// boundedQuote quotes a publisher-chosen value for an error detail, cut to
// a few bytes so a hostile value cannot bloat logs.
func boundedQuote(v string) string {
	const max = 32
	if len(v) > max {
		v = v[:max] + "..."
	}
	return strconv.Quote(v)
}
