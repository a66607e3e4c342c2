package transcript

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A caller event the guard rejects after a yes leaves the call uncertain:
// it may have said "Wait, no.". Red team finding 3: each of these was
// counted and dropped, and the yes before it was allowed.
func TestRejectedEventLeavesTheCallUncertain(t *testing.T) {
	js, _ := jetStreamOn(t)
	store := NewStore(Limits{}, nil)
	m := NewMetrics(prometheus.NewRegistry())
	in := NewStreamIngester(js, "YG_TRANSCRIPT", testPrefix, store, Limits{}, nil, m, StreamOptions{})
	if err := in.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })

	bad := map[string]string{
		"too-long":    `{"call_id":"%s","source":"stt","epoch":1,"seq":2,"speaker":"caller","type":"transcript","final":true,"text":"Yes, well, actually no, wait. ` + strings.Repeat("no ", 1700) + `"}`,
		"bad-utf8":    `{"call_id":"%s","source":"stt","epoch":1,"seq":2,"speaker":"caller","type":"transcript","final":true,"text":"Wait, no` + "\xff\xfe" + `"}`,
		"bad-type":    `{"call_id":"%s","source":"stt","epoch":1,"seq":2,"speaker":"caller","type":"final_transcript","final":true,"text":"Wait, no."}`,
		"bad-speaker": `{"call_id":"%s","source":"stt","epoch":1,"seq":2,"speaker":"user","type":"transcript","final":true,"text":"Wait, no."}`,
		"bad-times":   `{"call_id":"%s","source":"stt","epoch":1,"seq":2,"speaker":"caller","type":"transcript","final":true,"text":"Wait, no.","start_ms":900,"end_ms":800}`,
		"truncated":   `{"call_id":"%s","source":"stt","epoch":1,"seq":2,"speaker":"caller","type":"transcript","final":true,"text":"Wait, n`,
		"float-seq":   `{"call_id":"%s","source":"stt","epoch":1,"seq":2.0,"speaker":"caller","type":"transcript","final":true,"text":"Wait, no."}`,
		"string-bool": `{"call_id":"%s","source":"stt","epoch":1,"seq":2,"speaker":"caller","type":"transcript","final":"true","text":"Wait, no."}`,
		"bad-source":  `{"call_id":"%s","source":"stt one","epoch":1,"seq":2,"speaker":"caller","type":"transcript","final":true,"text":"Wait, no."}`,
		"mismatch":    `{"call_id":"%s-other","source":"stt","epoch":1,"seq":2,"speaker":"caller","type":"transcript","final":true,"text":"Wait, no."}`,
	}
	for call, body := range bad {
		publishEvent(t, js, sourced(call, Agent, "tts", 1, 1, "Shall I submit your appeal now?"), "")
		publishEvent(t, js, sourced(call, Caller, "stt", 1, 1, "Yes."), "")
		if _, err := js.Publish(t.Context(), testPrefix+"."+call, []byte(strings.Replace(body, "%s", call, 1))); err != nil {
			t.Fatal(err)
		}
	}
	// Every event is handled once the ingester has applied the stream's
	// last message.
	last, err := js.Stream(t.Context(), "YG_TRANSCRIPT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := last.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the stream applied", func() bool { return in.Applied() >= info.State.LastSeq })
	var rejects float64
	for _, r := range []string{ReasonTextTooLong, ReasonBadText, ReasonBadJSON, ReasonUnknownType, ReasonUnknownSpeaker, ReasonBadTimes, ReasonBadSource, ReasonCallIDMismatch} {
		rejects += testutil.ToFloat64(m.EventsRejected.WithLabelValues(r))
	}
	if rejects != float64(len(bad)) {
		t.Fatalf("%v events rejected, want %d", rejects, len(bad))
	}
	for call := range bad {
		snap, _ := store.Snapshot(call)
		if len(snap.Utterances) != 2 {
			t.Fatalf("%s: utterances %q", call, texts(snap.Utterances))
		}
		if !strings.Contains(snap.Gap, "rejected") && !strings.Contains(snap.Gap, "limits") {
			t.Errorf("%s: the call is not uncertain after a rejected caller event: gap %q", call, snap.Gap)
		}
	}
}
