package transcript

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Speaker is who spoke: the caller or the agent.
type Speaker string

// Speakers.
const (
	Caller Speaker = "caller"
	Agent  Speaker = "agent"
)

// EventType is the kind of a transcript event.
type EventType string

// Event types.
const (
	TypeTranscript    EventType = "transcript"
	TypeSpeechStarted EventType = "speech_started"
	TypeSpeechStopped EventType = "speech_stopped"
	TypeCallEnded     EventType = "call_ended"
)

// Event is one transcript event, one JSON object per NATS message on subject
// <prefix>.<call_id>. The README documents each field.
type Event struct {
	CallID      string    `json:"call_id"`
	Seq         uint64    `json:"seq,omitempty"`
	Speaker     Speaker   `json:"speaker,omitempty"`
	Type        EventType `json:"type"`
	Text        string    `json:"text,omitempty"`
	Final       bool      `json:"final,omitempty"`
	StartMS     *int64    `json:"start_ms,omitempty"`
	EndMS       *int64    `json:"end_ms,omitempty"`
	Lang        string    `json:"lang,omitempty"`
	ResponseID  string    `json:"response_id,omitempty"`
	Interrupted bool      `json:"interrupted,omitempty"`
	Confidence  *float64  `json:"confidence,omitempty"`
	// Source names the publisher ("stt", "tts"); seq counts per (call,
	// source, epoch). Empty: seq counts per call, as before sources.
	Source string `json:"source,omitempty"`
	// Epoch is the publisher's run: a new epoch starts that source's seq
	// again.
	Epoch uint64 `json:"epoch,omitempty"`
}

// UnmarshalJSON decodes an event as the contract allows: the 64-bit
// integers (seq, epoch, start_ms, end_ms) as JSON numbers or, as protojson
// writes them, as strings of digits; confidence as a number or a string
// (protojson writes "NaN" and "Infinity" so).
func (e *Event) UnmarshalJSON(b []byte) error {
	var w struct {
		CallID      string      `json:"call_id"`
		Seq         flexUint64  `json:"seq"`
		Speaker     Speaker     `json:"speaker"`
		Type        EventType   `json:"type"`
		Text        string      `json:"text"`
		Final       bool        `json:"final"`
		StartMS     *flexInt64  `json:"start_ms"`
		EndMS       *flexInt64  `json:"end_ms"`
		Lang        string      `json:"lang"`
		ResponseID  string      `json:"response_id"`
		Interrupted bool        `json:"interrupted"`
		Confidence  *flexDouble `json:"confidence"`
		Source      string      `json:"source"`
		Epoch       flexUint64  `json:"epoch"`
	}
	// Fields absent from b keep e's values, as for a plain struct.
	w.CallID, w.Seq.v, w.Speaker, w.Type, w.Text, w.Final = e.CallID, e.Seq, e.Speaker, e.Type, e.Text, e.Final
	w.StartMS, w.EndMS, w.Confidence = flexPtr(e.StartMS), flexPtr(e.EndMS), (*flexDouble)(e.Confidence)
	w.Lang, w.ResponseID, w.Interrupted, w.Source, w.Epoch.v = e.Lang, e.ResponseID, e.Interrupted, e.Source, e.Epoch
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Event{
		CallID: w.CallID, Seq: w.Seq.v, Speaker: w.Speaker, Type: w.Type, Text: w.Text, Final: w.Final,
		StartMS: intPtr(w.StartMS), EndMS: intPtr(w.EndMS), Lang: w.Lang, ResponseID: w.ResponseID,
		Interrupted: w.Interrupted, Confidence: (*float64)(w.Confidence), Source: w.Source, Epoch: w.Epoch.v,
	}
	return nil
}

// flexInt is a 64-bit integer written as a JSON number or a string of
// digits; null leaves it as it is.
type flexInt[T int64 | uint64] struct{ v T }

func (f *flexInt[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	return json.Unmarshal(unquoteDigits(b), &f.v)
}

type (
	flexUint64 = flexInt[uint64]
	flexInt64  = flexInt[int64]
)

func flexPtr(p *int64) *flexInt64 {
	if p == nil {
		return nil
	}
	return &flexInt64{*p}
}

func intPtr(f *flexInt64) *int64 {
	if f == nil {
		return nil
	}
	return &f.v
}

// flexDouble is a float64 written as a JSON number or a string.
type flexDouble float64

func (v *flexDouble) UnmarshalJSON(b []byte) error {
	var f float64
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		p, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("confidence %q: not a number", s)
		}
		*v = flexDouble(p)
		return nil
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*v = flexDouble(f)
	return nil
}

// unquoteDigits strips the quotes of a JSON string holding an optional
// minus and digits only, leaving anything else for json.Unmarshal to
// reject.
func unquoteDigits(b []byte) []byte {
	if len(b) < 3 || b[0] != '"' || b[len(b)-1] != '"' {
		return b
	}
	in := b[1 : len(b)-1]
	for i, c := range in {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0 && len(in) > 1) {
			return b
		}
	}
	return in
}
