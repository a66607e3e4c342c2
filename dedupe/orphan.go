package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Orphaned claims (finding 16 of the red team).
//
// A claim whose reply is lost (NATS dies while it is in flight, or the
// client buffers it across a reconnect and delivers it later) fails the
// Allow, so its decision is refused; yet the key may exist, naming that
// refused decision, and every retry would be a DUPLICATE of an action no
// one runs, until the key's TTL (MaxRunning, EvidenceTTL). So:
//   - An Allow that fails after it began claiming abandons its decision id:
//     the book remembers it (bounded: maxAbandoned, each until every key it
//     could have claimed has expired anyway).
//   - One worker reads each key the claim could have made (reservation,
//     evidence use, item record) from the bucket, abandonProbes times once
//     NATS answers, and releases what names the abandoned decision, by
//     compare-and-set on the revision read; so does any update the mirror
//     applies later that names it (a reply lost after the store). Every
//     replica's mirror sees the release.
//   - Meanwhile this replica does not count such a reservation: a retry
//     here releases it inline and claims afresh. Other replicas answer
//     DUPLICATE until the release reaches them.
// A lost Complete (the pipeline died) is not a lost claim: its ALLOW stands,
// and its key is held at most MaxRunning from the ALLOW.

// maxAbandoned bounds the decision ids remembered as abandoned; past it, an
// orphan is held until its TTL, as before.
const maxAbandoned = 1 << 16

// reconcileQueue bounds the keys waiting for the worker.
const reconcileQueue = 4096

// reconcileRetry is the pause before a release that failed (NATS away) is
// tried again.
const reconcileRetry = time.Second

// abandonProbes is how many times, reconcileRetry apart, the keys of an
// abandoned claim are read from the bucket once NATS answers: a create the
// client buffered across a reconnect is delivered then, ahead of the reads.
const abandonProbes = 3

// orphanJob is keys to check for claims of the abandoned decision id.
type orphanJob struct {
	id     string
	keys   []string
	probes int // successful reads of every key still to do
}

// abandon remembers req's decision as refused and has the worker release
// whatever of its claims is in the bucket, or arrives there.
func (b *KV) abandon(req *Request) {
	until := time.Now().Add(max(MaxRunning, req.EvidenceTTL, req.ItemWindow) + time.Minute)
	b.mu.Lock()
	_, known := b.abandoned[req.DecisionID]
	if !known && len(b.abandoned) >= maxAbandoned {
		b.mu.Unlock()
		return
	}
	b.abandoned[req.DecisionID] = until
	b.mu.Unlock()
	if known {
		return // its job, for the same request's keys, is queued already
	}
	keys := []string{reservationKey(req.Key)}
	if req.TurnID != 0 {
		keys = append(keys, evidenceKeyOf(req.Key.CallID, req.TurnID, req.Key.Tool))
	}
	if req.Item != "" {
		keys = append(keys, itemKeyOf(req.Key.CallID, req.Key.Tool, req.Item))
	}
	b.enqueue(orphanJob{id: req.DecisionID, keys: keys, probes: abandonProbes})
}

// abandonedLocked reports whether id was abandoned. b.mu must be held.
func (b *KV) abandonedLocked(id string) bool {
	_, ok := b.abandoned[id]
	return ok && id != ""
}

// orphanOf names the abandoned decision m holds a claim of ("" for none).
// b.mu must be held.
func (b *KV) orphanOf(m *mirrored) string {
	if m == nil || m.deleted {
		return ""
	}
	if m.res != nil && !m.res.Done && b.abandonedLocked(m.res.DecisionID) {
		return m.res.DecisionID
	}
	if b.abandonedLocked(m.evidence) {
		return m.evidence
	}
	for _, u := range m.uses {
		if b.abandonedLocked(u.DecisionID) {
			return u.DecisionID
		}
	}
	return ""
}

// enqueue hands job to the worker; a full queue drops it (the keys' TTLs
// still bound them).
func (b *KV) enqueue(job orphanJob) {
	select {
	case b.reconcileQ <- job:
	default:
	}
}

// reconciler releases the abandoned claims handed to it until ctx ends.
func (b *KV) reconciler(ctx context.Context) {
	defer close(b.reconcileDone)
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-b.reconcileQ:
			if !b.js.Conn().IsConnected() {
				// Reads would wait out their timeout, one after another.
				time.AfterFunc(reconcileRetry, func() { b.enqueue(job) })
				continue
			}
			ok := true
			for _, key := range job.keys {
				rctx, cancel := context.WithTimeout(ctx, catchUpWait)
				err := b.releaseOrphan(rctx, key, job.id)
				cancel()
				ok = ok && err == nil
			}
			if ok {
				job.probes--
			}
			if job.probes > 0 && ctx.Err() == nil {
				// NATS away, a lost compare-and-set, or reads still to do.
				time.AfterFunc(reconcileRetry, func() { b.enqueue(job) })
			}
		}
	}
}

// releaseOrphan reads key from the bucket and, if it holds a claim of the
// abandoned decision id, releases that claim by compare-and-set on the
// revision read. A key that holds none is no error.
func (b *KV) releaseOrphan(ctx context.Context, key, id string) error {
	e, err := b.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept []kvUse
	latest := int64(0)
	switch key[0] {
	case 'r':
		var v kvReservationValue
		if json.Unmarshal(e.Value(), &v) != nil || v.DecisionID != id || v.Done {
			return nil
		}
	case 'e':
		var v kvEvidence
		if json.Unmarshal(e.Value(), &v) != nil || v.DecisionID != id {
			return nil
		}
	case 'i':
		var uses []kvUse
		_ = json.Unmarshal(e.Value(), &uses)
		for _, u := range uses {
			if u.DecisionID != id {
				kept = append(kept, u)
				latest = max(latest, u.Until)
			}
		}
		if len(kept) == len(uses) {
			return nil
		}
	}
	if len(kept) > 0 {
		data, _ := json.Marshal(kept)
		_, err = b.update(ctx, key, data, e.Revision(), time.Until(time.Unix(0, latest)))
	} else {
		err = b.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
	}
	if err == nil {
		b.waitRevision(ctx, key, e.Revision())
	}
	return err
}

// sweepAbandonedLocked forgets abandoned ids whose keys have all expired.
// b.mu must be held.
func (b *KV) sweepAbandonedLocked(now time.Time) int {
	n := 0
	for id, until := range b.abandoned {
		if now.After(until) {
			delete(b.abandoned, id)
			n++
		}
	}
	return n
}
