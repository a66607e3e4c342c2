// Package replay re-judges recorded calls under the policy in force now,
// and sets each decision beside the one recorded at the time: how a team
// sees, before it deploys a policy change, what the change would have done
// to yesterday's calls.
//
// A recorded call is its transcript events, each with the time it reached
// the guard, and its decision records. It is read from a JSONL file (the
// format below; `yesguard probe --record FILE` writes one) or from the
// transcript and decision streams on NATS JetStream (ReadStreams), where
// an event's arrival is its stream timestamp.
//
// The JSONL format: one JSON object per line, of one of two kinds; any
// other line is an error, blank lines are skipped.
//
//	{"event": {<a transcript event, as published>}, "received_at": "2026-11-29T12:10:51.201Z"}
//	{"decision": {<a decision record: protojson with the proto's field names>}}
//
// A decision line may carry other fields beside "decision", so a decision
// log (`--decision-log`) is a file of decision lines as it stands: a
// recording can be the events' lines and the log, concatenated. Events and
// records of several calls may be mixed; they are grouped by call id.
//
// Rules that hold:
//   - Each Check is re-judged on the events the guard held when it decided:
//     those that arrived by the record's time plus its waited_ms (plus the
//     millisecond waited_ms was truncated by), applied with their arrival
//     times, on the engine's clock set to that moment. The wait is not
//     re-run: what the guard waited for is in the events already.
//   - Checks are replayed in the order they ended (time plus wait), and
//     Completes at their time, so that duplicates, spent evidence and
//     repeated items see the same reservations. Two Checks of one action
//     that ended within raceTie of each other raced for one reservation:
//     the one recorded as allowed is replayed first.
//   - The feed's state is not policy: a Check recorded as refused because
//     the transcript feed was down or behind is replayed with the feed so.
//   - A Complete's record is written after the book took its result: a
//     duplicate of its action that ended within raceTie before it, and
//     was recorded as seeing the original done, is replayed after it.
//   - A replayed decision is the same when its outcome, reason and
//     original decision are; otherwise it is changed. A same decision
//     whose evidence detail differs is marked so, and is still the same.
//   - Events that do not decode are dropped as the guard drops them.
package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// Event is one transcript event and when it reached the guard.
type Event struct {
	Event      transcript.Event
	ReceivedAt time.Time
	// Raw is the event's JSON, as published.
	Raw json.RawMessage
}

// Call is one recorded call.
type Call struct {
	ID string
	// Events in arrival order.
	Events []Event
	// Records in time order: Checks, Completes and Redeems.
	Records []*yesguardv1.Decision
	// Dropped counts the events that did not decode.
	Dropped int
}

// Recording is every call of a source, by call id, in the order first seen.
type Recording struct {
	Calls []*Call
	byID  map[string]*Call
}

func (r *Recording) call(id string) *Call {
	if r.byID == nil {
		r.byID = map[string]*Call{}
	}
	c := r.byID[id]
	if c == nil {
		c = &Call{ID: id}
		r.byID[id] = c
		r.Calls = append(r.Calls, c)
	}
	return c
}

// Call returns the recorded call id, or nil.
func (r *Recording) Call(id string) *Call { return r.byID[id] }

// line is one JSONL line.
type line struct {
	Event      json.RawMessage `json:"event"`
	ReceivedAt *time.Time      `json:"received_at"`
	Decision   json.RawMessage `json:"decision"`
}

// maxLine bounds one JSONL line.
const maxLine = 4 << 20

// subjectPrefix is the prefix events are decoded under: the check that
// an event's call id is a subject token is the guard's.
const subjectPrefix = "yesguard.transcript"

// ReadJSONL reads a recording. A line that is neither kind, or a record
// that does not parse, is an error naming the line.
func ReadJSONL(r io.Reader) (*Recording, error) {
	rec := &Recording{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	limits := transcript.Limits{}
	limits.SetDefaults()
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		switch {
		case len(l.Decision) > 0 && len(l.Event) == 0:
			d := new(yesguardv1.Decision)
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(l.Decision, d); err != nil {
				return nil, fmt.Errorf("line %d: decision: %w", n, err)
			}
			if d.GetCallId() == "" || d.GetTime() == nil {
				return nil, fmt.Errorf("line %d: decision: a record needs a call_id and a time", n)
			}
			c := rec.call(d.GetCallId())
			c.Records = append(c.Records, d)
		case len(l.Event) > 0 && len(l.Decision) == 0:
			if l.ReceivedAt == nil {
				return nil, fmt.Errorf("line %d: event: received_at is required (when the event reached the guard)", n)
			}
			var head struct {
				CallID string `json:"call_id"`
			}
			if err := json.Unmarshal(l.Event, &head); err != nil || head.CallID == "" {
				return nil, fmt.Errorf("line %d: event: no call_id", n)
			}
			c := rec.call(head.CallID)
			c.add(l.Event, *l.ReceivedAt, limits)
		default:
			return nil, fmt.Errorf("line %d: want {\"event\": ..., \"received_at\": ...} or {\"decision\": ...}", n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	for _, c := range rec.Calls {
		c.sort()
	}
	if len(rec.Calls) == 0 {
		return nil, errors.New("no events and no decisions")
	}
	return rec, nil
}

// add decodes an event as the guard does; one it would drop is counted.
func (c *Call) add(raw []byte, at time.Time, limits transcript.Limits) {
	ev, err := transcript.Decode(subjectPrefix, subjectPrefix+"."+c.ID, raw, limits)
	if err != nil {
		c.Dropped++
		return
	}
	c.Events = append(c.Events, Event{Event: ev, ReceivedAt: at, Raw: append(json.RawMessage(nil), raw...)})
}

// sort puts events in arrival order and records in time order (both
// stable: a source's own order breaks ties).
func (c *Call) sort() {
	sort.SliceStable(c.Events, func(i, j int) bool { return c.Events[i].ReceivedAt.Before(c.Events[j].ReceivedAt) })
	sort.SliceStable(c.Records, func(i, j int) bool {
		return c.Records[i].GetTime().AsTime().Before(c.Records[j].GetTime().AsTime())
	})
}

// Writer writes a recording's lines.
type Writer struct {
	w   io.Writer
	err error
}

// NewWriter writes lines to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Event writes an event that reached the guard at at.
func (w *Writer) Event(ev transcript.Event, at time.Time) {
	raw, err := json.Marshal(ev)
	if err != nil {
		w.fail(err)
		return
	}
	w.line(struct {
		Event      json.RawMessage `json:"event"`
		ReceivedAt time.Time       `json:"received_at"`
	}{raw, at.UTC()})
}

// Decision writes a decision record.
func (w *Writer) Decision(d *yesguardv1.Decision) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(d)
	if err != nil {
		w.fail(err)
		return
	}
	w.line(struct {
		Decision json.RawMessage `json:"decision"`
	}{compact(raw)})
}

// compact strips the spaces protojson adds on purpose.
func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func (w *Writer) line(v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.fail(err)
		return
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		w.fail(err)
	}
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Err is the first error a write met.
func (w *Writer) Err() error { return w.err }
