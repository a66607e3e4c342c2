package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/yesguard/yesguard/probe"
	"github.com/yesguard/yesguard/transcript"
)

// runSay publishes one transcript event, as a voice pipeline would.
func runSay(_ context.Context, args []string, e *env) int {
	const name = "say"
	fs, c := clientFlagSet(name, "<call> <caller|agent> <text>",
		"Publishes one transcript event for the call to NATS, as a voice pipeline would: final,\n"+
			"unless --interim. Each invocation is a publisher run of its own: source \"cli\",\n"+
			"epoch the time in microseconds (so each is newer than the last), seq 1.", e, false, true)
	lang := fs.String("lang", "", "the text's `language` (BCP 47, e.g. en); empty: the policy's default_lang")
	responseID := fs.String("response-id", "", "agent speech: the model response it belongs to (`id`)")
	interim := fs.Bool("interim", false, "publish an interim (non-final) result, which the guard does not judge")
	seq := fs.Uint64("seq", 1, "the event's seq in this run")
	pos, err := c.parse(fs, args, e, 3, 3)
	if err != nil {
		return usageError(name, err, e)
	}
	call, speaker, text := pos[0], transcript.Speaker(pos[1]), pos[2]
	if err := checkCallID(call); err != nil {
		return usageError(name, err, e)
	}
	if speaker != transcript.Caller && speaker != transcript.Agent {
		return usageError(name, fmt.Errorf("speaker %q: want caller or agent", pos[1]), e)
	}
	if text == "" {
		return usageError(name, fmt.Errorf("text: empty"), e)
	}
	ev := transcript.Event{
		CallID: call, Source: "cli", Epoch: uint64(time.Now().UnixMicro()), Seq: *seq, Speaker: speaker, Type: transcript.TypeTranscript,
		Text: text, Final: !*interim, Lang: *lang, ResponseID: *responseID,
	}

	nc, err := c.connectNATS()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard say: %v\n", err)
		return exitError
	}
	defer nc.Close()
	if err := probe.Publish(nc, c.subjectPrefix, ev); err != nil {
		fmt.Fprintf(e.stderr, "yesguard say: %v\n", err)
		return exitError
	}

	subject := c.subjectPrefix + "." + call
	if c.json {
		if err := writeJSON(e.stdout, struct {
			Subject string           `json:"subject"`
			Event   transcript.Event `json:"event"`
		}{subject, ev}); err != nil {
			fmt.Fprintf(e.stderr, "yesguard say: %v\n", err)
			return exitError
		}
		return exitOK
	}
	kind := "final"
	if *interim {
		kind = "interim"
	}
	b, _ := json.Marshal(text)
	fmt.Fprintf(e.stdout, "%s: %s %s (%s, seq %s) -> %s\n", call, speaker, b, kind, strconv.FormatUint(*seq, 10), subject)
	return exitOK
}
