// TranscriptPublisher against the guard's embedded NATS server: the JSON
// on the wire is the contract's (snake_case, the proto's field names), seq
// counts per (call, source, epoch), Nats-Msg-Id is set, the guard accepts
// what it sends, and what the guard would drop is refused at the source.
//
// The publisher connects as the embedded server's pipeline user, which may
// publish transcripts but not read them (issue 11): what was sent is seen
// through the guard (its counters and ListDecisions' transcript) and through
// what publish() returns (the body and the message id it put on the wire).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { NatsConnection } from "@nats-io/transport-node";
import { startGuard, type RunningGuard } from "../src/testing.js";
import { TRANSCRIPT_JSON_FIELDS, TranscriptPublisher, YesguardInputError } from "../src/index.js";
import { TranscriptEventSchema } from "../src/gen/yesguard/v1/guard_pb.js";

describe("TranscriptPublisher", () => {
  let g: RunningGuard;
  let nc: NatsConnection;

  before(async () => {
    g = await startGuard();
    nc = await g.natsConn();
  });
  after(async () => g?.stop());

  test("publishes the contract's snake_case JSON, and the guard accepts it", async () => {
    const pub = await g.publisher({ source: "stt", lang: "en-US" });
    const call = g.callId("json");
    const accepted = await g.metric("yesguard_transcript_events_total");
    const rejected = await g.metric("yesguard_transcript_events_rejected_total");

    const sent = [
      await pub.speechStarted(call, "caller", { startMs: 0 }),
      await pub.caller(call, "yes", { final: false, startMs: 0, endMs: 300, confidence: 0.4 }),
      await pub.caller(call, "Yes, please.", { startMs: 0, endMs: 900, confidence: 0.93 }),
      await pub.speechStopped(call, "caller", { endMs: 900 }),
      await pub.agent(call, "Submitting it now.", { responseId: "resp-1", interrupted: true, startMs: 1000, endMs: 1400, lang: "en-GB" }),
    ];
    // By default every publish waited for the transcript stream's ack.
    assert.deepEqual(sent.map((p) => p.duplicate), sent.map(() => false), "each publish was acked by the stream, as new");
    await g.waitEvents(accepted + rejected + sent.length);
    assert.equal(await g.metric("yesguard_transcript_events_rejected_total"), rejected, "the guard rejected none");
    assert.equal(await g.metric("yesguard_transcript_events_total"), accepted + sent.length);

    // The guard's own reading of what arrived: the final turns, with the
    // source, times, lang and response id the events carried.
    const page = await g.client().listDecisions({ callId: call, includeTranscript: true });
    assert.deepEqual(
      page.transcript.map((t) => [t.speaker, t.text, t.startMs, t.endMs, t.lang, t.responseId, t.interrupted, t.source]),
      [
        ["caller", "Yes, please.", 0, 900, "en-US", "", false, "stt"],
        ["agent", "Submitting it now.", 1000, 1400, "en-GB", "resp-1", true, "stt"],
      ],
    );
    sent.push(await pub.callEnded(call));
    await g.waitEvents(accepted + rejected + sent.length);
    assert.equal(await g.metric("yesguard_transcript_events_rejected_total"), rejected, "the guard rejected none");

    const events = sent.map((p) => JSON.parse(p.json) as Record<string, unknown>);
    const protoNames = new Set(TranscriptEventSchema.fields.map((f) => f.name));
    for (const ev of events) {
      for (const key of Object.keys(ev)) {
        assert.ok(protoNames.has(key), `${key} is a TranscriptEvent field name`);
        assert.match(key, /^[a-z]+(_[a-z]+)*$/, `${key} is snake_case`);
      }
    }
    assert.deepEqual(events[0], { call_id: call, seq: 1, source: "stt", epoch: pub.epoch, type: "speech_started", speaker: "caller", start_ms: 0 });
    assert.deepEqual(events[1], {
      call_id: call, seq: 2, source: "stt", epoch: pub.epoch, type: "transcript", speaker: "caller",
      text: "yes", final: false, start_ms: 0, end_ms: 300, lang: "en-US", confidence: 0.4,
    });
    assert.equal(events[2]!.final, true, "caller() is final by default");
    assert.deepEqual(events[4], {
      call_id: call, seq: 5, source: "stt", epoch: pub.epoch, type: "transcript", speaker: "agent",
      text: "Submitting it now.", final: true, start_ms: 1000, end_ms: 1400, lang: "en-GB",
      response_id: "resp-1", interrupted: true,
    });
    assert.deepEqual(events[5], { call_id: call, seq: 6, source: "stt", epoch: pub.epoch, type: "call_ended" });
    assert.deepEqual(sent.map((p) => p.subject), sent.map(() => `yesguard.transcript.${call}`));
    assert.deepEqual(
      sent.map((p) => p.msgId),
      events.map((e) => `${call}.stt.${pub.epoch}.${e.seq}`),
    );
  });

  test("every TranscriptEvent field of the proto is written or owned", () => {
    assert.deepEqual([...TRANSCRIPT_JSON_FIELDS].sort(), TranscriptEventSchema.fields.map((f) => f.name).sort());
  });

  test("seq counts per call from 1; a call_ended call starts no further count", async () => {
    const pub = await g.publisher({ source: "pipeline" });
    const a = g.callId("seq-a");
    const b = g.callId("seq-b");
    const seqs = [];
    seqs.push((await pub.caller(a, "one")).seq);
    seqs.push((await pub.caller(b, "one")).seq);
    seqs.push((await pub.agent(a, "two")).seq);
    seqs.push((await pub.caller(a, "three")).seq);
    seqs.push((await pub.agent(b, "two")).seq);
    assert.deepEqual(seqs, [1, 1, 2, 3, 2]);
    // Concurrent publishes take seqs in call order, before anything is awaited.
    const many = await Promise.all([pub.caller(a, "x"), pub.caller(a, "y"), pub.caller(a, "z")]);
    assert.deepEqual(many.map((p) => [p.seq, JSON.parse(p.json).text]), [[4, "x"], [5, "y"], [6, "z"]]);
  });

  test("each publisher is a new epoch; a new epoch starts seq again", async () => {
    const p1 = await g.publisher({ source: "tts" });
    const p2 = await g.publisher({ source: "tts" });
    assert.ok(p2.epoch > p1.epoch, `${p2.epoch} > ${p1.epoch}`);
    assert.ok(p1.epoch >= 1_700_000_000_000, "the default epoch is the time in ms");
    const call = g.callId("epoch");
    assert.equal((await p1.agent(call, "Hello.")).seq, 1);
    assert.equal((await p1.agent(call, "How can I help?")).seq, 2);
    const next = await p2.agent(call, "Hello again.");
    assert.equal(next.seq, 1);
    assert.equal(JSON.parse(next.json).epoch, p2.epoch);
    const fixed = await g.publisher({ source: "tts", epoch: 7 });
    assert.equal(fixed.epoch, 7);
  });

  test("what the guard would drop is refused at the source, and nothing is sent", async () => {
    const pub = await g.publisher({ source: "pipeline" });
    const call = g.callId("bad");
    const before = await g.eventsSeen();
    const cases: Array<[() => Promise<unknown>, RegExp]> = [
      [() => pub.caller("a.b", "hi"), /publish\.callId: "a\.b" must be one NATS subject token/],
      [() => pub.caller("a b", "hi"), /must be one NATS subject token/],
      [() => pub.caller("", "hi"), /publish\.callId: required/],
      [() => pub.caller(call, "   "), /a final transcript needs words/],
      [() => pub.caller(call, "x".repeat(4097)), /4097 bytes, over the guard's limit of 4096/],
      [() => pub.publish({ callId: call, type: "transcript", text: "hi", final: true }), /publish\.speaker: want "caller" or "agent", got undefined/],
      [() => pub.publish({ callId: call, type: "shout" as never, speaker: "caller" }), /publish\.type: want one of/],
      [() => pub.publish({ callId: call, type: "transcript", speaker: "caller", text: "hi", seq: 9 } as never), /seq is set by the publisher/],
      [() => pub.publish({ callId: call, type: "transcript", speaker: "caller", text: "hi", call_id: call } as never), /unknown option "call_id"; use callId/],
      [() => pub.publish({ callId: call, type: "transcript", speaker: "caller", text: "hi", start_ms: 5 } as never), /use startMs/],
      [() => pub.caller(call, "hi", { startMs: 900, endMs: 100 }), /endMs is before startMs/],
      [() => pub.caller(call, "hi", { startMs: -1 }), /startMs: want a non-negative integer/],
      [() => pub.caller(call, "hi", { confidence: NaN }), /confidence: want a number, got NaN/],
    ];
    for (const [f, want] of cases) {
      await assert.rejects(f(), (err: unknown) => {
        assert.ok(err instanceof YesguardInputError, String(err));
        assert.match(err.message, want);
        return true;
      });
    }
    // A good event after the bad ones: the one event the guard received
    // (accepted or rejected, every event it reads is counted), with seq 1.
    const good = await pub.caller(call, "hello");
    assert.equal(good.seq, 1, "the refused events took no seq");
    await g.waitEvents(before + 1);
    // A publish of the refused ones would have been counted before the
    // good one was: the guard reads each connection's messages in order.
    const after = await g.eventsSeen();
    assert.equal(after, before + 1, "only the good event reached the guard");
    const page = await g.client().listDecisions({ callId: call, includeTranscript: true });
    assert.deepEqual(page.transcript.map((t) => [t.speaker, t.text]), [["caller", "hello"]]);
  });

  test("options are checked", async () => {
    assert.throws(() => new TranscriptPublisher({ nats: nc, source: "" }), /options\.source: required/);
    assert.throws(() => new TranscriptPublisher({ nats: nc, source: "s t t" }), /want 1-64 of/);
    assert.throws(() => new TranscriptPublisher({ nats: nc, source: "stt", subjectPrefix: "a.*" }), /not a subject without wildcards/);
    assert.throws(() => new TranscriptPublisher({ nats: nc, source: "stt", subject_prefix: "x" } as never), /use subjectPrefix/);
    assert.throws(() => new TranscriptPublisher({ nats: nc, source: "stt", epoch: 0 }), /epoch: want a positive integer/);
  });
});
