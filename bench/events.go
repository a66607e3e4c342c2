package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/yesguard/yesguard/transcript"
)

// Lines a contact-centre conversation is made of. Agent lines are a
// realistic 60-140 bytes, caller lines shorter.
var (
	agentSmallTalk = []string{
		"Thank you for calling Northwind Health, my name is Sam. How can I help you today?",
		"Of course. Could you give me your date of birth so I can find your record?",
		"Thank you. I can see your file here, and your last visit was in March with Dr Patel.",
		"Let me check the calendar for you, it will only take a moment.",
		"I understand. We have a few openings next week, mostly in the afternoons.",
		"No problem at all. Is there anything else on your account you would like me to look at?",
	}
	callerSmallTalk = []string{
		"Hi, I'd like to sort out an appointment please.",
		"Sure, it's the fourth of July nineteen eighty two.",
		"Yes, that's right.",
		"Okay, thanks.",
		"Afternoons are better for me actually.",
		"Um, I think that's everything for now.",
	}
	// bookQuestions ask to confirm book_appointment.
	bookQuestions = []string{
		"I have Tuesday at 3 pm with Dr Patel. Shall I book the appointment for you?",
		"There is an opening on Thursday at 10:30 in the morning. Would you like me to book that appointment?",
		"Dr Patel is free on Monday at 2:15 pm. Do you want me to schedule the appointment?",
	}
	// yeses are plain yeses: the Check is ALLOWed.
	yeses = []string{"Yes, please.", "Yeah, go ahead.", "Yes.", "Sure, book it.", "That's right, yes please."}
	// refusals are answers the rules refuse on the fast path (NEGATED,
	// NOT_PLAIN).
	refusals = []string{"No, not yet.", "Yes, but only if it's in the morning.", "Hmm, I'm not sure, maybe later.", "No thanks, I'll call back."}
	// continuations follow an ALLOW in the streamed calls.
	agentDone = []string{
		"Great, that's booked. You'll get a text message confirming the time shortly.",
		"All done. Is there anything else I can help you with today?",
	}
)

// conv builds one call's events with increasing seqs and times.
type conv struct {
	call    string
	seq     uint64
	ms      int64
	resp    int
	prefix  string
	rng     *rand.Rand
	pending []msg
}

// msg is one encoded NATS message.
type msg struct {
	subject string
	data    []byte
}

func newConv(prefix, call string, rng *rand.Rand) *conv {
	return &conv{call: call, prefix: prefix, rng: rng}
}

func (c *conv) add(ev transcript.Event) {
	c.seq++
	ev.CallID, ev.Seq = c.call, c.seq
	c.pending = append(c.pending, msg{subject: c.prefix + "." + c.call, data: encodeEvent(ev)})
}

// encodeEvent writes ev as encoding/json would (same fields, same order,
// omitempty), without reflection: the load generator shares the machine
// with the guard, so it keeps its own cost down.
func encodeEvent(ev transcript.Event) []byte {
	b := make([]byte, 0, 96+len(ev.Text)+len(ev.CallID)+len(ev.ResponseID))
	b = append(b, `{"call_id":`...)
	b = appendString(b, ev.CallID)
	if ev.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, ev.Seq, 10)
	}
	if ev.Speaker != "" {
		b = append(b, `,"speaker":`...)
		b = appendString(b, string(ev.Speaker))
	}
	b = append(b, `,"type":`...)
	b = appendString(b, string(ev.Type))
	if ev.Text != "" {
		b = append(b, `,"text":`...)
		b = appendString(b, ev.Text)
	}
	if ev.Final {
		b = append(b, `,"final":true`...)
	}
	if ev.StartMS != nil {
		b = append(b, `,"start_ms":`...)
		b = strconv.AppendInt(b, *ev.StartMS, 10)
	}
	if ev.EndMS != nil {
		b = append(b, `,"end_ms":`...)
		b = strconv.AppendInt(b, *ev.EndMS, 10)
	}
	if ev.Lang != "" {
		b = append(b, `,"lang":`...)
		b = appendString(b, ev.Lang)
	}
	if ev.ResponseID != "" {
		b = append(b, `,"response_id":`...)
		b = appendString(b, ev.ResponseID)
	}
	if ev.Interrupted {
		b = append(b, `,"interrupted":true`...)
	}
	if ev.Confidence != nil {
		b = append(b, `,"confidence":`...)
		b = strconv.AppendFloat(b, *ev.Confidence, 'f', 3, 64)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string. The bench's texts are plain
// UTF-8; quotes, backslashes and control characters are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// final adds a final utterance of about its length in time.
func (c *conv) final(sp transcript.Speaker, text string) {
	start := c.ms + 300
	end := start + int64(len(text))*55
	c.ms = end
	ev := transcript.Event{Speaker: sp, Type: transcript.TypeTranscript, Text: text, Final: true, StartMS: &start, EndMS: &end, Lang: "en-US"}
	if sp == transcript.Agent {
		c.resp++
		ev.ResponseID = fmt.Sprintf("resp_%s_%d", c.call, c.resp)
	} else {
		conf := 0.82 + c.rng.Float64()*0.17
		ev.Confidence = &conf
	}
	c.add(ev)
}

// callerSpeaks adds a caller turn as a recogniser streams it: speech
// started, an interim, the final, speech stopped.
func (c *conv) callerSpeaks(text string) {
	c.add(transcript.Event{Speaker: transcript.Caller, Type: transcript.TypeSpeechStarted})
	if n := len(text) / 2; n > 0 {
		c.add(transcript.Event{Speaker: transcript.Caller, Type: transcript.TypeTranscript, Text: text[:n], Lang: "en-US"})
	}
	c.final(transcript.Caller, text)
	c.add(transcript.Event{Speaker: transcript.Caller, Type: transcript.TypeSpeechStopped})
}

// history adds n exchanges of small talk (an agent then a caller final).
func (c *conv) history(n int) {
	for i := 0; i < n; i++ {
		c.final(transcript.Agent, pick(c.rng, agentSmallTalk))
		c.final(transcript.Caller, pick(c.rng, callerSmallTalk))
	}
}

// take returns the messages built so far and forgets them.
func (c *conv) take() []msg {
	out := c.pending
	c.pending = nil
	return out
}

func pick(rng *rand.Rand, from []string) string { return from[rng.IntN(len(from))] }
