package transcript

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const testPrefix = "yesguard.transcript"

func TestDecodeRejects(t *testing.T) {
	long := strings.Repeat("a", 4097)
	cases := []struct {
		name, subject, data, reason string
	}{
		{"subject without call id", testPrefix, `{"call_id":"c1","type":"call_ended"}`, ReasonBadSubject},
		{"subject empty call id", testPrefix + ".", `{"call_id":"c1","type":"call_ended"}`, ReasonBadSubject},
		{"subject two tokens", testPrefix + ".c1.x", `{"call_id":"c1","type":"call_ended"}`, ReasonBadSubject},
		{"subject other prefix", "other.transcript.c1", `{"call_id":"c1","type":"call_ended"}`, ReasonBadSubject},
		{"subject prefix glued", testPrefix + "x.c1", `{"call_id":"c1","type":"call_ended"}`, ReasonBadSubject},
		{"subject wildcard", testPrefix + ".*", `{"call_id":"*","type":"call_ended"}`, ReasonBadSubject},
		{"not json", testPrefix + ".c1", `hello`, ReasonBadJSON},
		{"empty body", testPrefix + ".c1", ``, ReasonBadJSON},
		{"truncated", testPrefix + ".c1", `{"call_id":"c1"`, ReasonBadJSON},
		{"array", testPrefix + ".c1", `[1,2]`, ReasonBadJSON},
		{"seq negative", testPrefix + ".c1", `{"call_id":"c1","seq":-1,"speaker":"caller","type":"speech_started"}`, ReasonBadJSON},
		{"seq string not digits", testPrefix + ".c1", `{"call_id":"c1","seq":"1e3","speaker":"caller","type":"speech_started"}`, ReasonBadJSON},
		{"source too long", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"speech_started","source":"` + strings.Repeat("s", 65) + `"}`, ReasonSourceTooLong},
		{"lang too long", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"speech_started","lang":"` + strings.Repeat("l", 36) + `"}`, ReasonLangTooLong},
		{"response_id too long", testPrefix + ".c1", `{"call_id":"c1","speaker":"agent","type":"speech_started","response_id":"` + strings.Repeat("r", 257) + `"}`, ReasonResponseIDTooLong},
		{"source with a space", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"speech_started","source":"my stt"}`, ReasonBadSource},
		{"invalid utf8 outside text", testPrefix + ".c1", "{\"call_id\":\"c1\",\"lang\":\"\xff\",\"speaker\":\"caller\",\"type\":\"speech_started\"}", ReasonBadJSON},
		{"null", testPrefix + ".c1", `null`, ReasonMissingCallID},
		{"missing call id", testPrefix + ".c1", `{"speaker":"caller","type":"speech_started"}`, ReasonMissingCallID},
		{"call id mismatch", testPrefix + ".c1", `{"call_id":"c2","speaker":"caller","type":"speech_started"}`, ReasonCallIDMismatch},
		{"missing type", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller"}`, ReasonUnknownType},
		{"unknown type", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"dtmf"}`, ReasonUnknownType},
		{"missing speaker", testPrefix + ".c1", `{"call_id":"c1","type":"transcript","text":"yes","final":true}`, ReasonUnknownSpeaker},
		{"unknown speaker", testPrefix + ".c1", `{"call_id":"c1","speaker":"bot","type":"speech_started"}`, ReasonUnknownSpeaker},
		{"unknown speaker on call_ended", testPrefix + ".c1", `{"call_id":"c1","speaker":"bot","type":"call_ended"}`, ReasonUnknownSpeaker},
		{"text too long", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"transcript","final":true,"text":"` + long + `"}`, ReasonTextTooLong},
		{"text invalid utf8", testPrefix + ".c1", "{\"call_id\":\"c1\",\"speaker\":\"caller\",\"type\":\"transcript\",\"final\":true,\"text\":\"ye\xffs\"}", ReasonBadText},
		{"final empty text", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"transcript","final":true,"text":""}`, ReasonEmptyText},
		{"final blank text", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"transcript","final":true,"text":" \t\n "}`, ReasonEmptyText},
		{"final no text", testPrefix + ".c1", `{"call_id":"c1","speaker":"agent","type":"transcript","final":true}`, ReasonEmptyText},
		{"negative start", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"transcript","final":true,"text":"yes","start_ms":-1,"end_ms":5}`, ReasonBadTimes},
		{"negative end", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"transcript","final":true,"text":"yes","end_ms":-5}`, ReasonBadTimes},
		{"end before start", testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"transcript","final":true,"text":"yes","start_ms":10,"end_ms":5}`, ReasonBadTimes},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode(testPrefix, tc.subject, []byte(tc.data), Limits{})
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("Decode = %+v, %v; want a *RejectError", ev, err)
			}
			if re.Reason != tc.reason {
				t.Fatalf("reason = %q (%s), want %q", re.Reason, re.Detail, tc.reason)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Error() = %q does not name the reason", err.Error())
			}
			if ev != (Event{}) {
				t.Errorf("rejected event is not zero: %+v", ev)
			}
		})
	}
}

func TestDecodeLimits(t *testing.T) {
	data := []byte(`{"call_id":"c1","speaker":"caller","type":"transcript","final":true,"text":"` + strings.Repeat("a", 10) + `"}`)
	if _, err := Decode(testPrefix, testPrefix+".c1", data, Limits{MaxTextBytes: 10}); err != nil {
		t.Fatalf("10 bytes at limit 10: %v", err)
	}
	_, err := Decode(testPrefix, testPrefix+".c1", data, Limits{MaxTextBytes: 9})
	var re *RejectError
	if !errors.As(err, &re) || re.Reason != ReasonTextTooLong {
		t.Fatalf("10 bytes at limit 9: %v", err)
	}
}

func TestDecodeValid(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	cases := []struct {
		name, data string
		want       Event
	}{
		{"caller final with everything",
			`{"call_id":"c1","seq":7,"speaker":"caller","type":"transcript","text":" yes please ","final":true,"start_ms":100,"end_ms":900,"lang":"en-US","confidence":0.93,"extra":"ignored"}`,
			Event{CallID: "c1", Seq: 7, Speaker: Caller, Type: TypeTranscript, Text: " yes please ", Final: true,
				StartMS: i64(100), EndMS: i64(900), Lang: "en-US", Confidence: f64(0.93)}},
		{"agent final with response id",
			`{"call_id":"c1","speaker":"agent","type":"transcript","text":"Shall I book it?","final":true,"response_id":"r1","interrupted":true}`,
			Event{CallID: "c1", Speaker: Agent, Type: TypeTranscript, Text: "Shall I book it?", Final: true, ResponseID: "r1", Interrupted: true}},
		{"interim with empty text",
			`{"call_id":"c1","seq":3,"speaker":"caller","type":"transcript","text":"","final":false}`,
			Event{CallID: "c1", Seq: 3, Speaker: Caller, Type: TypeTranscript}},
		{"speech started", `{"call_id":"c1","speaker":"caller","type":"speech_started"}`,
			Event{CallID: "c1", Speaker: Caller, Type: TypeSpeechStarted}},
		{"speech stopped", `{"call_id":"c1","speaker":"agent","type":"speech_stopped"}`,
			Event{CallID: "c1", Speaker: Agent, Type: TypeSpeechStopped}},
		{"call ended without speaker", `{"call_id":"c1","type":"call_ended"}`,
			Event{CallID: "c1", Type: TypeCallEnded}},
		{"call ended with speaker", `{"call_id":"c1","speaker":"caller","type":"call_ended"}`,
			Event{CallID: "c1", Speaker: Caller, Type: TypeCallEnded}},
		{"end only", `{"call_id":"c1","speaker":"caller","type":"transcript","text":"yes","final":true,"end_ms":0}`,
			Event{CallID: "c1", Speaker: Caller, Type: TypeTranscript, Text: "yes", Final: true, EndMS: i64(0)}},
		{"equal times", `{"call_id":"c1","speaker":"caller","type":"transcript","text":"yes","final":true,"start_ms":5,"end_ms":5}`,
			Event{CallID: "c1", Speaker: Caller, Type: TypeTranscript, Text: "yes", Final: true, StartMS: i64(5), EndMS: i64(5)}},
		{"unicode text", `{"call_id":"c1","speaker":"caller","type":"transcript","text":"sí, \u00e9s cierto 👍","final":true}`,
			Event{CallID: "c1", Speaker: Caller, Type: TypeTranscript, Text: "sí, és cierto 👍", Final: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(testPrefix, testPrefix+".c1", []byte(tc.data), Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !eventsEqual(got, tc.want) {
				t.Fatalf("got  %s\nwant %s", fmtEvent(got), fmtEvent(tc.want))
			}
		})
	}
}

func eventsEqual(a, b Event) bool {
	eqI := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqF := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	if !eqI(a.StartMS, b.StartMS) || !eqI(a.EndMS, b.EndMS) || !eqF(a.Confidence, b.Confidence) {
		return false
	}
	a.StartMS, a.EndMS, a.Confidence = nil, nil, nil
	b.StartMS, b.EndMS, b.Confidence = nil, nil, nil
	return a == b
}

func fmtEvent(e Event) string {
	s := strings.Builder{}
	s.WriteString(e.CallID + " " + string(e.Type) + " " + string(e.Speaker) + " " + e.Text)
	if e.StartMS != nil {
		s.WriteString(" start set")
	}
	if e.EndMS != nil {
		s.WriteString(" end set")
	}
	return s.String()
}

var knownReasons = map[string]bool{
	ReasonBadSubject: true, ReasonBadJSON: true, ReasonMissingCallID: true, ReasonCallIDMismatch: true,
	ReasonUnknownType: true, ReasonUnknownSpeaker: true, ReasonTextTooLong: true, ReasonBadText: true,
	ReasonEmptyText: true, ReasonBadTimes: true, ReasonBadSource: true,
	ReasonLangTooLong: true, ReasonResponseIDTooLong: true, ReasonSourceTooLong: true,
}

func FuzzDecode(f *testing.F) {
	seeds := []struct{ subject, data string }{
		{testPrefix + ".c1", `{"call_id":"c1","seq":7,"speaker":"caller","type":"transcript","text":"yes","final":true,"start_ms":1,"end_ms":2,"lang":"en"}`},
		{testPrefix + ".c1", `{"call_id":"c1","seq":8,"speaker":"caller","type":"transcript","text":"ye","final":false}`},
		{testPrefix + ".c1", `{"call_id":"c1","speaker":"agent","type":"speech_started"}`},
		{testPrefix + ".c1", `{"call_id":"c1","type":"call_ended"}`},
		{testPrefix + ".c1", `{"call_id":"c1","speaker":"caller","type":"transcript","text":"\xff","final":true}`},
		{testPrefix + ".c1.x", `{}`},
		{testPrefix + ".c1", `{"call_id":"c1","start_ms":9223372036854775807,"end_ms":-9223372036854775808}`},
		{testPrefix, ``},
		{"", `null`},
		{testPrefix + ".c1", `{"call_id":"c1","source":"stt","epoch":"1796100000","seq":"3","speaker":"caller","type":"transcript","text":"no","final":true,"start_ms":"10","end_ms":"20","confidence":"NaN"}`},
		{testPrefix + ".c1", `{"call_id":"c1","source":"tts","epoch":2,"seq":18446744073709551615,"speaker":"agent","type":"transcript","text":"ok?","final":true}`},
	}
	for _, s := range seeds {
		f.Add(s.subject, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		// A store of its own per input: one shared across inputs fills its
		// per-call rate limit at the one instant every input is applied
		// at (testdata/fuzz/FuzzDecode/c2d6c60cedf32b10), which is the
		// limit working, not a decoder bug.
		store := NewStore(Limits{MaxUtterances: 4}, nil)
		ev, err := Decode(testPrefix, subject, data, Limits{MaxTextBytes: 64})
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RejectError", err)
			}
			if !knownReasons[re.Reason] {
				t.Fatalf("unbounded reason %q", re.Reason)
			}
			return
		}
		if subject != testPrefix+"."+ev.CallID || strings.Contains(ev.CallID, ".") {
			t.Fatalf("accepted call id %q on subject %q", ev.CallID, subject)
		}
		if typeIndex(ev.Type) < 0 || speakerIndex(ev.Speaker) < 0 {
			t.Fatalf("accepted type %q speaker %q", ev.Type, ev.Speaker)
		}
		if len(ev.Text) > 64 || !utf8.ValidString(ev.Text) {
			t.Fatalf("accepted text %q", ev.Text)
		}
		if ev.Type == TypeTranscript && ev.Final && strings.TrimSpace(ev.Text) == "" {
			t.Fatal("accepted empty final")
		}
		if (ev.StartMS != nil && *ev.StartMS < 0) || (ev.EndMS != nil && *ev.EndMS < 0) ||
			(ev.StartMS != nil && ev.EndMS != nil && *ev.EndMS < *ev.StartMS) {
			t.Fatal("accepted bad times")
		}
		// Whatever Decode accepts, the store takes without panicking.
		if ok, reason := store.Apply(ev, time.Unix(0, 0)); !ok && reason != ReasonDuplicateSeq && reason != ReasonSeqJump {
			t.Fatalf("store rejected a decoded event: %s", reason)
		}
		snap, _ := store.Snapshot(ev.CallID)
		_ = snap.Turns("")
	})
}
