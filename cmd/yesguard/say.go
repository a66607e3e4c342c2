package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/probe"
	"github.com/yesguard/yesguard/transcript"
)

// runSay publishes one transcript event, as a voice pipeline would.
func runSay(ctx context.Context, args []string, e *env) int {
	const name = "say"
	fs, c := clientFlagSet(name, "<call> <caller|agent> <text>",
		"Publishes one transcript event for the call to NATS, as a voice pipeline would: final,\n"+
			"unless --interim. Each invocation is a publisher run of its own: source \"cli\",\n"+
			"epoch the time in microseconds (so each is newer than the last), seq 1. It waits for the\n"+
			"transcript stream's ack (JetStream), retrying, so the event cannot be lost silently\n"+
			"(--no-ack for a guard with --state memory, which keeps no stream).", e, false, true)
	lang := fs.String("lang", "", "the text's `language` (BCP 47, e.g. en); empty: the policy's default_lang")
	responseID := fs.String("response-id", "", "agent speech: the model response it belongs to (`id`)")
	interim := fs.Bool("interim", false, "publish an interim (non-final) result, which the guard does not judge")
	seq := fs.Uint64("seq", 1, "the event's seq in this run")
	noAck := fs.Bool("no-ack", false, "publish with core NATS and a flush, without JetStream's ack (which the server may drop silently under load)")
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
	if err := publish(ctx, nc, c.subjectPrefix, ev, !*noAck); err != nil {
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

// publish sends ev: acked (probe.PublishAcked) unless told not to.
func publish(ctx context.Context, nc *nats.Conn, prefix string, ev transcript.Event, acked bool) error {
	if !acked {
		return probe.Publish(nc, prefix, ev)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := probe.PublishAcked(ctx, js, prefix, ev); err != nil {
		return fmt.Errorf("%w (a guard with --state memory keeps no stream, so nothing acks there: publish with --no-ack)", err)
	}
	return nil
}
