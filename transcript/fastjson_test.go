package transcript

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// fastSeeds are messages of every shape the fast path takes or leaves to
// encoding/json.
var fastSeeds = []string{
	`{"call_id":"c1","seq":7,"speaker":"caller","type":"transcript","text":" yes please ","final":true,"start_ms":100,"end_ms":900,"lang":"en-US","confidence":0.93,"extra":"ignored"}`,
	`{"call_id":"c1","speaker":"agent","type":"transcript","text":"Shall I book it?","final":true,"response_id":"r1","interrupted":true}`,
	`{"call_id":"c1","seq":3,"speaker":"caller","type":"transcript","text":"","final":false}`,
	` { "call_id" : "c1" , "type" : "call_ended" } `,
	`{"call_id":"c2","speaker":"bot","type":"dtmf"}`,
	`{"call_id":"c1","text":"sí, és cierto 👍","lang":"es-MX","speaker":"caller","type":"transcript","final":true}`,
	`{"call_id":"c1","text":"he said \"yes\"","speaker":"caller","type":"transcript","final":true}`,
	`{"call_id":"c1","Seq":1,"speaker":"caller","type":"speech_started"}`,
	`{"call_id":"c1","CALL_ID":"c2","type":"call_ended"}`,
	`{"call_id":"c1","seq":-1,"speaker":"caller","type":"speech_started"}`,
	`{"call_id":"c1","seq":"1","speaker":"caller","type":"speech_started"}`,
	`{"call_id":"c1","seq":1.0,"speaker":"caller","type":"speech_started"}`,
	`{"call_id":"c1","seq":18446744073709551615,"speaker":"caller","type":"speech_started"}`,
	`{"call_id":"c1","seq":18446744073709551616,"speaker":"caller","type":"speech_started"}`,
	`{"call_id":"c1","start_ms":9223372036854775807,"end_ms":-9223372036854775808}`,
	`{"call_id":"c1","start_ms":9223372036854775808}`,
	`{"call_id":"c1","start_ms":-0,"end_ms":1e3}`,
	`{"call_id":"c1","start_ms":5,"start_ms":null,"confidence":1e400}`,
	`{"call_id":"c1","confidence":-0.5e-3,"final":null,"text":null}`,
	`{"call_id":"c1","meta":{"a":[1,2,{"b":"\u00e9\n"}],"c":null,"d":true,"e":-1.5E+2}}`,
	`{"call_id":"c1","meta":[[[[[]]]]]}`,
	`{"call_id":"c1","type":"transcript"}x`,
	`{"call_id":"c1",}`,
	`{"call_id":"c1" "type":"x"}`,
	`{"call_id":01}`,
	`{"call_id":"c1","text":"\xff"}`,
	`{"call_id":"c1","x":"\xff"}`,
	"{\"call_id\":\"c1\",\"text\":\"tab\there\"}",
	`null`,
	`[]`,
	`{}`,
	``,
	`{"call_id":"c1","interrupted":tru}`,
	`{"call_id":"c1","ſeq":1}`,
}

// FuzzDecodeFast checks the fast path against encoding/json: whatever it
// takes, encoding/json takes too, into the same Event, from valid UTF-8.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast Event
		if !decodeFast(data, "c1", &fast) {
			return
		}
		var slow Event
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("fast path took %q, encoding/json: %v", data, err)
		}
		if !utf8.Valid(data) {
			t.Fatalf("fast path took invalid UTF-8 %q", data)
		}
		if !eventsEqual(fast, slow) || (fast.Confidence != nil && *fast.Confidence != *slow.Confidence) {
			t.Fatalf("%q:\nfast %s\nslow %s", data, fmtEvent(fast), fmtEvent(slow))
		}
	})
}

// TestDecodeFastTakes checks that the fast path takes the common messages
// (else it would buy nothing) and leaves the odd ones.
func TestDecodeFastTakes(t *testing.T) {
	for i, want := range map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: false, 7: false, 8: false, 10: false, 13: false, 16: false, 17: false, 18: true, 19: true, 25: false, 28: false} {
		var ev Event
		if got := decodeFast([]byte(fastSeeds[i]), "c1", &ev); got != want {
			t.Errorf("seed %d %q: fast path took it = %v, want %v", i, fastSeeds[i], got, want)
		}
	}
}
