package transcript

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
}
