// Package transcript ingests the live transcript of each call from NATS and
// keeps, per call, the bounded state the guard judges: final utterances of
// the caller and the agent in order, whether the caller is speaking right
// now, the call's last known language, and whether events of it may be
// missing. Events come from the JetStream transcript stream
// (StreamIngester, every replica reading every event) or from a core
// subscription (Ingester, one replica).
//
// Rules that hold:
//   - Interim results are never stored as utterances; they only mark caller
//     speech as in flight.
//   - A malformed event (bad JSON, unknown speaker or type, call id not
//     matching its subject, oversized text, a bad source) is dropped and
//     counted, and applies nothing; when its subject names a call held,
//     that call is uncertain (Snapshot.Gap) until the agent speaks again,
//     since the event may have carried the caller's latest words.
//   - seq counts per publisher run (source, epoch): a repeat within a run
//     is dropped, counted and logged; a final under a used seq with other
//     words (a publisher restarted without a new epoch) is dropped too,
//     and makes the call uncertain. A seq too old to tell a repeat from a
//     late event (beyond the run's 256-seq window and not held, or of a run
//     older than the two newest of its source) is rejected and makes the
//     call uncertain. A gap within a run, a run first seen
//     above seq 1 (in a replay of the stream too), a seq that jumps too
//     far (rejected) or events lost by a slow consumer make the call
//     uncertain (Snapshot.Gap) until the gap fills or the agent speaks
//     again. Agent speech of one response id settles it for every Check
//     but one carrying that id (which leaves the speech out as its
//     filler): for it the gap is held (Snapshot.GapFor) until agent speech
//     of another response, or of none. Events without a source keep one
//     seq per call.
//   - Order: events with a source by audio time, then their run's seq,
//     then arrival (stream order); events without one by seq where given,
//     else by arrival. Audio time is one clock only within a publisher
//     run: a final it places before an earlier-arrived utterance of the
//     other speaker from another run makes the call uncertain until the
//     agent speaks again (the clocks decided who spoke last).
//   - Per-call state is bounded (utterances kept, text length, publisher
//     runs followed) and calls idle for longer than the idle TTL are
//     evicted.
//   - Every change to a call wakes its waiters (the channel Store.Snapshot
//     returns is closed); nothing polls.
package transcript
