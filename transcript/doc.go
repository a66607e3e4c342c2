// Package transcript ingests the live transcript of each call from NATS and
// keeps, per call, the bounded state the guard judges: final utterances of
// the caller and the agent in order, whether the caller is speaking right
// now, and the call's last known language.
//
// Rules that hold:
//   - Interim results are never stored as utterances; they only mark caller
//     speech as in flight.
//   - A malformed event (bad JSON, unknown speaker or type, call id not
//     matching its subject, oversized text) is dropped and counted, and
//     changes no state.
//   - A repeated seq on a call is dropped; events are ordered by seq where
//     the publisher gives one, else by arrival.
//   - Per-call state is bounded (utterances kept, text length) and calls idle
//     for longer than the idle TTL are evicted.
//   - Every change to a call wakes its waiters (the channel Store.Snapshot
//     returns is closed); nothing polls.
package transcript
