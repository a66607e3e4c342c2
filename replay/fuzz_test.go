package replay

import (
	"bytes"
	"testing"
)

// FuzzReadJSONL: a recording is outside input; ReadJSONL never panics, and
// what it accepts groups every event and record under a call id.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"event":{"call_id":"c1","seq":1,"speaker":"agent","type":"transcript","text":"Shall I?","final":true},"received_at":"2026-12-01T12:00:00Z"}` + "\n" +
		`{"decision":{"decision_id":"01","time":"2026-12-01T12:00:01Z","call_id":"c1","tool":"t","outcome":"OUTCOME_REFUSE","waited_ms":"3"}}`))
	f.Add([]byte(`{"level":"info","decision":{"call_id":"x","time":"2026-12-01T12:00:01Z","kind":"DECISION_KIND_COMPLETE"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ReadJSONL(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, c := range rec.Calls {
			if c.ID == "" {
				t.Fatal("a call without an id")
			}
			for _, d := range c.Records {
				if d.GetCallId() != c.ID {
					t.Fatalf("record of %q under %q", d.GetCallId(), c.ID)
				}
			}
		}
	})
}
