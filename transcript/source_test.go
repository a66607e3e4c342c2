package transcript

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// sourced is a final event of one publisher run.
func sourced(call string, sp Speaker, source string, epoch, seq uint64, text string) Event {
	return Event{CallID: call, Speaker: sp, Type: TypeTranscript, Final: true, Text: text, Source: source, Epoch: epoch, Seq: seq}
}

func turnTexts(s *Store, call string) string {
	snap, _ := s.Snapshot(call)
	var out []string
	for _, t := range snap.Turns("") {
		out = append(out, string(t.Speaker)+": "+t.Text)
	}
	return strings.Join(out, " | ")
}

func apply(t *testing.T, s *Store, ev Event) {
	t.Helper()
	mustApply(t, s, ev, time.Now())
}

// Two publishers number their own events: the same seq from each is not
// a repeat, and a repeat within one run is dropped.
func TestSeqCollisionsFromTwoSources(t *testing.T) {
	s := NewStore(Limits{}, nil)
	apply(t, s, sourced("c", Agent, "tts", 1, 1, "Shall I submit the appeal?"))
	apply(t, s, sourced("c", Caller, "stt", 1, 1, "Yes."))
	apply(t, s, sourced("c", Caller, "stt", 1, 2, "Wait, no."))
	if got := turnTexts(s, "c"); got != "agent: Shall I submit the appeal? | caller: Yes. Wait, no." {
		t.Fatalf("turns %q", got)
	}
	if ok, why := s.Apply(sourced("c", Caller, "stt", 1, 2, "Wait, no."), time.Now()); ok || why != ReasonDuplicateSeq {
		t.Fatalf("repeat within a run = %v, %q", ok, why)
	}
}

// A publisher that restarts starts a new epoch at seq 1: its "No" is not
// a repeat of the earlier run's seq 1.
func TestPublisherRestart(t *testing.T) {
	s := NewStore(Limits{}, nil)
	apply(t, s, sourced("c", Agent, "tts", 1, 1, "Shall I submit the appeal?"))
	apply(t, s, sourced("c", Caller, "stt", 1, 1, "Yes."))
	apply(t, s, sourced("c", Caller, "stt", 2, 1, "No."))
	if got := turnTexts(s, "c"); got != "agent: Shall I submit the appeal? | caller: Yes. No." {
		t.Fatalf("turns %q", got)
	}
	if snap, _ := s.Snapshot("c"); snap.Gap != "" {
		t.Fatalf("gap after a restart at seq 1: %s", snap.Gap)
	}
	// An event of the old run that arrives late is applied: more caller
	// speech can only refuse more.
	apply(t, s, sourced("c", Caller, "stt", 1, 2, "Hold on."))
}

// A huge seq is rejected and leaves the call uncertain until the agent
// speaks again; it does not sort after every question.
func TestHugeSeq(t *testing.T) {
	for _, source := range []string{"", "stt"} {
		s := NewStore(Limits{}, nil)
		apply(t, s, sourced("c", Agent, source, 0, 1, "Shall I submit the appeal?"))
		if ok, why := s.Apply(sourced("c", Caller, source, 0, 1<<64-1, "Yes."), time.Now()); ok || why != ReasonSeqJump {
			t.Fatalf("source %q: seq 2^64-1 = %v, %q", source, ok, why)
		}
		snap, _ := s.Snapshot("c")
		if !strings.Contains(snap.Gap, "jumped") {
			t.Fatalf("source %q: gap %q after a rejected jump", source, snap.Gap)
		}
		apply(t, s, sourced("c", Agent, source, 0, 2, "Shall I submit it now?"))
		if snap, _ := s.Snapshot("c"); snap.Gap != "" {
			t.Fatalf("source %q: gap %q after the agent spoke again", source, snap.Gap)
		}
	}
}

// A gap within a run makes the call uncertain until it fills, or until a
// new agent turn; the change wakes waiters.
func TestGapFillsOrIsForgiven(t *testing.T) {
	s := NewStore(Limits{}, nil)
	apply(t, s, sourced("c", Agent, "tts", 1, 1, "Shall I submit the appeal?"))
	apply(t, s, sourced("c", Caller, "stt", 1, 1, "Yes."))
	_, changed := s.Snapshot("c")
	apply(t, s, sourced("c", Caller, "stt", 1, 3, "Go ahead."))
	<-changed
	snap, _ := s.Snapshot("c")
	if !strings.Contains(snap.Gap, "seq 2 has not arrived") {
		t.Fatalf("gap = %q", snap.Gap)
	}
	apply(t, s, sourced("c", Caller, "stt", 1, 2, "Wait, no."))
	if snap, _ := s.Snapshot("c"); snap.Gap != "" {
		t.Fatalf("gap %q after it filled", snap.Gap)
	}
	if got := turnTexts(s, "c"); got != "agent: Shall I submit the appeal? | caller: Yes. Wait, no. Go ahead." {
		t.Fatalf("the late event is not in its place: %q", got)
	}

	apply(t, s, sourced("c", Caller, "stt", 1, 9, "Hello?"))
	if snap, _ := s.Snapshot("c"); snap.Gap == "" {
		t.Fatal("no gap for seqs 4 to 8")
	}
	apply(t, s, sourced("c", Agent, "tts", 1, 2, "Shall I submit it?"))
	if snap, _ := s.Snapshot("c"); snap.Gap != "" {
		t.Fatalf("gap %q after a new agent turn", snap.Gap)
	}
}

// A run first seen above seq 1 is missing its head, also when the event
// came from replaying the stream after a start (red team finding 7: a
// restart allowed what was refused before it), where the gap says the
// head may also be older than the replay.
func TestFirstSeqAboveOne(t *testing.T) {
	s := NewStore(Limits{}, nil)
	apply(t, s, sourced("live", Caller, "stt", 1, 5, "Yes."))
	if snap, _ := s.Snapshot("live"); !strings.Contains(snap.Gap, "before seq 5") {
		t.Fatalf("gap = %q", snap.Gap)
	}
	if ok, why := s.ApplyMeta(sourced("replayed", Caller, "stt", 1, 5, "Yes."), Meta{At: time.Now(), StreamSeq: 40, Replay: true}); !ok {
		t.Fatal(why)
	}
	snap, _ := s.Snapshot("replayed")
	if !strings.Contains(snap.Gap, "before seq 5 have not arrived, or are older than what the guard replayed") {
		t.Fatalf("gap %q in a replay", snap.Gap)
	}
	if snap.Utterances[0].ID != 40 {
		t.Fatalf("utterance id %d, want the stream sequence 40", snap.Utterances[0].ID)
	}
}

// With sources, order comes from audio time first, then stream order.
func TestSourcesOrderByAudioTime(t *testing.T) {
	s := NewStore(Limits{}, nil)
	at := func(ev Event, start, end int64) Event { ev.StartMS, ev.EndMS = &start, &end; return ev }
	apply(t, s, at(sourced("c", Agent, "tts", 1, 1, "Shall I submit the appeal?"), 0, 1500))
	// The caller's no (stt seq 1, a small counter) arrives after the
	// agent's later question but was spoken before it.
	apply(t, s, at(sourced("c", Agent, "tts", 1, 2, "Are you sure?"), 3000, 4000))
	apply(t, s, at(sourced("c", Caller, "stt", 1, 1, "No."), 1600, 2000))
	if got := turnTexts(s, "c"); got != "agent: Shall I submit the appeal? | caller: No. | agent: Are you sure?" {
		t.Fatalf("turns %q", got)
	}
}

// MarkLost (a slow consumer's dropped messages) leaves every call held
// uncertain until its agent speaks; a call made later is not.
func TestMarkLost(t *testing.T) {
	s := NewStore(Limits{}, nil)
	apply(t, s, sourced("a", Agent, "tts", 1, 1, "Shall I submit the appeal?"))
	apply(t, s, sourced("a", Caller, "stt", 1, 1, "Yes."))
	_, changed := s.Snapshot("a")
	if n := s.MarkLost("events were dropped"); n != 1 {
		t.Fatalf("marked %d calls", n)
	}
	<-changed
	if snap, _ := s.Snapshot("a"); snap.Gap != "events were dropped" {
		t.Fatalf("gap %q", snap.Gap)
	}
	apply(t, s, sourced("b", Caller, "stt", 1, 1, "Hello."))
	if snap, _ := s.Snapshot("b"); snap.Gap != "" {
		t.Fatalf("a later call is uncertain: %q", snap.Gap)
	}
	apply(t, s, sourced("a", Agent, "tts", 1, 2, "Shall I submit it now?"))
	if snap, _ := s.Snapshot("a"); snap.Gap != "" {
		t.Fatalf("gap %q after the agent spoke", snap.Gap)
	}
}

// An old event re-sent by an at-least-once publisher, beyond what the call
// remembers of its run (or of an old run), is rejected and leaves the call
// uncertain: it cannot be told from a late event, and taken as new, a
// re-sent "Yes." lands after a later question. Red team finding 6.
func TestResentOldEventIsNotNew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(s *Store)
		resend Event
	}{
		{"beyond the window", func(s *Store) {
			apply(t, s, sourced("c", Caller, "stt", 1, 1, "Yes."))
			for seq := uint64(2); seq <= 351; seq++ {
				ev := sourced("c", Caller, "stt", 1, seq, "and so on")
				if seq%5 != 0 {
					ev.Final = false // interims and markers between the finals
				}
				apply(t, s, ev)
				if ev.Final {
					apply(t, s, sourced("c", Agent, "tts", 1, seq, "I see."))
				}
			}
			apply(t, s, sourced("c", Agent, "tts", 1, 400, "Shall I cancel your subscription?"))
		}, sourced("c", Caller, "stt", 1, 1, "Yes.")},
		{"an old run", func(s *Store) {
			apply(t, s, sourced("c", Caller, "stt", 2, 1, "Hello?"))
			apply(t, s, sourced("c", Caller, "stt", 3, 1, "Hello?"))
			apply(t, s, sourced("c", Agent, "tts", 1, 1, "Shall I cancel your subscription?"))
		}, sourced("c", Caller, "stt", 1, 1, "Yes.")},
		{"without a source", func(s *Store) {
			apply(t, s, final("c", 1, Caller, "Yes."))
			for seq := uint64(2); seq <= 300; seq++ {
				if seq%4 == 0 {
					apply(t, s, final("c", seq, Agent, "I see."))
				} else {
					apply(t, s, interim("c", seq, Caller, "um"))
				}
			}
			apply(t, s, final("c", 301, Agent, "Shall I cancel your subscription?"))
		}, final("c", 1, Caller, "Yes.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(Limits{MaxEventsPerSecond: 1 << 20}, nil)
			tc.setup(s)
			ok, reason := s.Apply(tc.resend, time.Now())
			if ok || reason != ReasonStaleSeq {
				t.Fatalf("the re-sent event: applied %v, reason %q; want rejected as %q", ok, reason, ReasonStaleSeq)
			}
			snap, _ := s.Snapshot("c")
			if last := snap.Utterances[len(snap.Utterances)-1]; last.Speaker != Agent {
				t.Fatalf("the re-sent yes was placed after the question: %q", texts(snap.Utterances))
			}
			if !strings.Contains(snap.Gap, "repeat cannot be told") {
				t.Fatalf("gap %q", snap.Gap)
			}
		})
	}
}

// A publisher that restarts without a new epoch counts from 1 again: a
// final under a seq already used, with other words, is not a repeat. It is
// dropped (it cannot be placed) and the call is uncertain. Red team
// finding 9: the "Wait, no." was dropped as a repeat and the yes allowed.
func TestSeqReusedWithOtherWordsIsNoRepeat(t *testing.T) {
	for _, tc := range []struct {
		name         string
		source       string
		epoch        uint64
		yesSeq, wait uint64
	}{
		{"same epoch", "stt", 7, 2, 2},
		{"no epoch", "stt", 0, 2, 2},
		{"no source", "", 0, 2, 2},
		{"back to seq 1", "stt", 7, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(Limits{}, nil)
			tts := Event{CallID: "c", Speaker: Agent, Type: TypeTranscript, Final: true, Text: "Shall I submit your appeal now?", Source: "tts", Epoch: 1, Seq: 1}
			if tc.source == "" {
				tts.Source, tts.Epoch, tts.Seq = "", 0, 0
			}
			apply(t, s, tts)
			yes := Event{CallID: "c", Speaker: Caller, Type: TypeTranscript, Final: true, Text: "Yes.", Source: tc.source, Epoch: tc.epoch, Seq: tc.yesSeq}
			if tc.yesSeq > 1 {
				marker := Event{CallID: "c", Speaker: Caller, Type: TypeSpeechStarted, Source: tc.source, Epoch: tc.epoch, Seq: 1}
				apply(t, s, marker)
			}
			apply(t, s, yes)
			if ok, reason := s.Apply(yes, time.Now()); ok || reason != ReasonDuplicateSeq {
				t.Fatalf("the yes again: %v %q, want a repeat", ok, reason)
			}
			if snap, _ := s.Snapshot("c"); snap.Gap != "" {
				t.Fatalf("a true repeat made the call uncertain: %q", snap.Gap)
			}
			// The restart: the same run's seq again, other words.
			no := yes
			no.Text = "Wait, no."
			if ok, reason := s.Apply(no, time.Now()); ok || reason != ReasonSeqConflict {
				t.Fatalf("the restarted publisher's no: %v %q, want %q", ok, reason, ReasonSeqConflict)
			}
			if snap, _ := s.Snapshot("c"); !strings.Contains(snap.Gap, "without a new epoch") {
				t.Fatalf("gap %q", snap.Gap)
			}
		})
	}
}

// More publisher runs than the call follows do not make it forget the run
// with the gap. Red team finding 10: 8 more sources (or 8 restarts of
// one) evicted it, and the yes before the missing seq was allowed.
func TestManyRunsKeepTheGap(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(i int) Event
	}{
		{"other sources", func(i int) Event {
			ev := typed("c", 1, Caller, TypeSpeechStopped)
			ev.Source, ev.Epoch = fmt.Sprint("src", i), 1
			return ev
		}},
		{"tts restarting", func(i int) Event {
			ev := typed("c", 1, Agent, TypeSpeechStopped)
			ev.Source, ev.Epoch = "tts", uint64(10+i)
			return ev
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(Limits{}, nil)
			apply(t, s, sourced("c", Agent, "tts", 1, 1, "Shall I submit your appeal now?"))
			apply(t, s, sourced("c", Caller, "stt", 1, 1, "Yes."))
			apply(t, s, sourced("c", Caller, "stt", 1, 3, "Okay.")) // seq 2 missing
			if snap, _ := s.Snapshot("c"); !strings.Contains(snap.Gap, "seq 2") {
				t.Fatalf("gap %q", snap.Gap)
			}
			for i := range 2 * maxTrackers {
				apply(t, s, tc.run(i))
			}
			if snap, _ := s.Snapshot("c"); !strings.Contains(snap.Gap, "seq 2") {
				t.Fatalf("after %d more runs the gap is forgotten: %q", 2*maxTrackers, snap.Gap)
			}
		})
	}
}
