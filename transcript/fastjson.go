package transcript

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeFast decodes the common shape of an event message without
// reflection: one JSON object whose keys are plain ASCII, whose known
// fields hold the JSON type their Go field takes (or null), whose strings
// hold no escape and whose bytes are valid UTF-8. It reports false for
// anything else, and decode then runs encoding/json on the message, so
// every message decodes exactly as encoding/json decodes it: when it
// reports true, json.Unmarshal would have succeeded with the same Event
// and utf8.Valid(data) holds (FuzzDecodeFast checks this).
//
// What it saves: the reflection, an allocation per string of the closed
// sets (speaker, type, common languages) and for the call id when it
// matches subjID (which it then shares), and two of the three number
// allocations.
func decodeFast(data []byte, subjID string, ev *Event) bool {
	s := fastScanner{data: data}
	s.ws()
	if !s.byte('{') {
		return false
	}
	s.ws()
	if s.byte('}') {
		return s.end()
	}
	var nums *eventNumbers
	for {
		key, ok := s.plainString()
		if !ok {
			return false
		}
		s.ws()
		if !s.byte(':') {
			return false
		}
		s.ws()
		if !s.field(key, subjID, ev, &nums) {
			return false
		}
		s.ws()
		if s.byte(',') {
			s.ws()
			continue
		}
		if s.byte('}') {
			return s.end()
		}
		return false
	}
}

// eventNumbers holds an event's numbers in one allocation; the Event's
// pointers point into it.
type eventNumbers struct {
	start, end int64
	confidence float64
}

// knownKeys are the Event's JSON names. encoding/json also matches a key
// that equals one of them but for case: such keys are left to it.
var knownKeys = [...]string{"call_id", "seq", "speaker", "type", "text", "final", "start_ms", "end_ms", "lang", "response_id", "interrupted", "confidence", "source", "epoch"}

type fastScanner struct {
	data []byte
	i    int
}

func (s *fastScanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c if it comes next.
func (s *fastScanner) byte(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *fastScanner) end() bool {
	s.ws()
	return s.i == len(s.data)
}

// literal consumes lit (true, false, null) if it comes next.
func (s *fastScanner) literal(lit string) bool {
	if len(s.data)-s.i >= len(lit) && string(s.data[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// plainString scans a string without escapes or control characters whose
// bytes are valid UTF-8, and returns its contents.
func (s *fastScanner) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	ascii := true
	for j := start; j < len(s.data); j++ {
		switch c := s.data[j]; {
		case c == '"':
			b := s.data[start:j]
			if !ascii && !utf8.Valid(b) {
				return nil, false
			}
			s.i = j + 1
			return b, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// number scans a JSON number and returns its literal; integer is true when
// it has neither fraction nor exponent.
func (s *fastScanner) number() (lit []byte, integer, ok bool) {
	d, j := s.data, s.i
	digits := func() bool {
		k := j
		for j < len(d) && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(d) && d[j] == '-' {
		j++
	}
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case j < len(d) && d[j] >= '1' && d[j] <= '9':
		digits()
	default:
		return nil, false, false
	}
	integer = true
	if j < len(d) && d[j] == '.' {
		j++
		if !digits() {
			return nil, false, false
		}
		integer = false
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		if !digits() {
			return nil, false, false
		}
		integer = false
	}
	lit = d[s.i:j]
	s.i = j
	return lit, integer, true
}

// field decodes the value of key into ev, or skips it when the key is
// unknown.
func (s *fastScanner) field(key []byte, subjID string, ev *Event, nums **eventNumbers) bool {
	str := func(set func(b []byte)) bool {
		if s.literal("null") {
			return true // leaves a string as it is, as encoding/json does
		}
		b, ok := s.plainString()
		if ok {
			set(b)
		}
		return ok
	}
	boolean := func(dst *bool) bool {
		switch {
		case s.literal("true"):
			*dst = true
		case s.literal("false"):
			*dst = false
		case s.literal("null"):
		default:
			return false
		}
		return true
	}
	numbers := func() *eventNumbers {
		if *nums == nil {
			*nums = new(eventNumbers)
		}
		return *nums
	}
	integer := func(dst **int64, slot func(*eventNumbers) *int64) bool {
		if s.literal("null") {
			*dst = nil
			return true
		}
		lit, isInt, ok := s.number()
		if !ok || !isInt {
			return false
		}
		v, ok := parseInt64(lit)
		if !ok {
			return false
		}
		p := slot(numbers())
		*p = v
		*dst = p
		return true
	}

	switch string(key) {
	case "call_id":
		return str(func(b []byte) {
			if string(b) == subjID {
				ev.CallID = subjID
			} else {
				ev.CallID = string(b)
			}
		})
	case "seq":
		return s.uint64Field(&ev.Seq)
	case "epoch":
		return s.uint64Field(&ev.Epoch)
	case "source":
		return str(func(b []byte) { ev.Source = internSource(b) })
	case "speaker":
		return str(func(b []byte) {
			switch string(b) {
			case string(Caller):
				ev.Speaker = Caller
			case string(Agent):
				ev.Speaker = Agent
			default:
				ev.Speaker = Speaker(b)
			}
		})
	case "type":
		return str(func(b []byte) {
			switch string(b) {
			case string(TypeTranscript):
				ev.Type = TypeTranscript
			case string(TypeSpeechStarted):
				ev.Type = TypeSpeechStarted
			case string(TypeSpeechStopped):
				ev.Type = TypeSpeechStopped
			case string(TypeCallEnded):
				ev.Type = TypeCallEnded
			default:
				ev.Type = EventType(b)
			}
		})
	case "text":
		return str(func(b []byte) { ev.Text = string(b) })
	case "final":
		return boolean(&ev.Final)
	case "start_ms":
		return integer(&ev.StartMS, func(n *eventNumbers) *int64 { return &n.start })
	case "end_ms":
		return integer(&ev.EndMS, func(n *eventNumbers) *int64 { return &n.end })
	case "lang":
		return str(func(b []byte) { ev.Lang = internLang(b) })
	case "response_id":
		return str(func(b []byte) { ev.ResponseID = string(b) })
	case "interrupted":
		return boolean(&ev.Interrupted)
	case "confidence":
		if s.literal("null") {
			ev.Confidence = nil
			return true
		}
		lit, _, ok := s.number()
		if !ok {
			return false
		}
		v, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			return false // out of range: encoding/json's error
		}
		n := numbers()
		n.confidence = v
		ev.Confidence = &n.confidence
		return true
	}
	// encoding/json matches keys case-insensitively, with Unicode folding
	// ("ſeq" is "seq"): such keys are left to it.
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, k := range knownKeys {
		if strings.EqualFold(k, string(key)) {
			return false
		}
	}
	return s.skipValue(0)
}

// uint64Field decodes a JSON number holding a uint64 into dst (null leaves
// it); a string of digits is left to encoding/json.
func (s *fastScanner) uint64Field(dst *uint64) bool {
	if s.literal("null") {
		return true
	}
	lit, isInt, ok := s.number()
	if !ok || !isInt || lit[0] == '-' {
		return false
	}
	v, ok := parseUint64(lit)
	*dst = v
	return ok
}

// internSource returns a shared string for the common source names.
func internSource(b []byte) string {
	switch string(b) {
	case "stt":
		return "stt"
	case "tts":
		return "tts"
	case "llm":
		return "llm"
	}
	return string(b)
}

// maxSkipDepth bounds the nesting of an unknown field's value; deeper
// values are left to encoding/json.
const maxSkipDepth = 32

// skipValue skips one valid JSON value whose bytes are valid UTF-8.
func (s *fastScanner) skipValue(depth int) bool {
	if s.i >= len(s.data) || depth > maxSkipDepth {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '-' || (c >= '0' && c <= '9'):
		_, _, ok := s.number()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '[':
		s.i++
		s.ws()
		if s.byte(']') {
			return true
		}
		for {
			if !s.skipValue(depth + 1) {
				return false
			}
			s.ws()
			if s.byte(']') {
				return true
			}
			if !s.byte(',') {
				return false
			}
			s.ws()
		}
	case c == '{':
		s.i++
		s.ws()
		if s.byte('}') {
			return true
		}
		for {
			if s.i >= len(s.data) || s.data[s.i] != '"' || !s.skipString() {
				return false
			}
			s.ws()
			if !s.byte(':') {
				return false
			}
			s.ws()
			if !s.skipValue(depth + 1) {
				return false
			}
			s.ws()
			if s.byte('}') {
				return true
			}
			if !s.byte(',') {
				return false
			}
			s.ws()
		}
	}
	return false
}

// skipString skips a string with valid escapes and valid UTF-8.
func (s *fastScanner) skipString() bool {
	if !s.byte('"') {
		return false
	}
	start := s.i
	for j := start; j < len(s.data); j++ {
		switch c := s.data[j]; {
		case c == '"':
			s.i = j + 1
			return utf8.Valid(s.data[start:j])
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(s.data) {
				return false
			}
			switch s.data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.data) {
					return false
				}
				for k := j + 1; k <= j+4; k++ {
					if !isHex(s.data[k]) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseUint64 reads digits as strconv.ParseUint(lit, 10, 64) does; false
// on overflow.
func parseUint64(lit []byte) (uint64, bool) {
	var v uint64
	for _, c := range lit {
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseInt64 reads an optional minus and digits as strconv.ParseInt(lit,
// 10, 64) does; false when out of range.
func parseInt64(lit []byte) (int64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	u, ok := parseUint64(lit)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return int64(-u), true // two's complement: -(1<<63) has no positive twin
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	}
	return 0, false
}

// internLang returns a shared string for the common language tags, so an
// utterance holding one costs nothing more; others are copied.
func internLang(b []byte) string {
	switch string(b) {
	case "en":
		return "en"
	case "en-US":
		return "en-US"
	case "en-GB":
		return "en-GB"
	case "es":
		return "es"
	case "es-ES":
		return "es-ES"
	case "es-MX":
		return "es-MX"
	case "es-US":
		return "es-US"
	case "de":
		return "de"
	case "de-DE":
		return "de-DE"
	case "fr":
		return "fr"
	case "fr-FR":
		return "fr-FR"
	case "fr-CA":
		return "fr-CA"
	case "it":
		return "it"
	case "it-IT":
		return "it-IT"
	case "pt":
		return "pt"
	case "pt-BR":
		return "pt-BR"
	case "pt-PT":
		return "pt-PT"
	case "nl":
		return "nl"
	case "nl-NL":
		return "nl-NL"
	}
	return string(b)
}
