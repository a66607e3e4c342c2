// TranscriptPublisher publishes a call's transcript events to NATS as the
// guard reads them: one JSON object per message on `<prefix>.<call_id>`,
// with the snake_case field names of the proto's TranscriptEvent.
//
// Rules that hold:
// - seq counts per (call, source, epoch), from 1, in the order publish()
//   is called: it is assigned before anything is awaited. One publisher is
//   one source; each publisher gets a new epoch (a new run of that source
//   starts seq again, and the guard tells the runs apart by epoch).
// - Every message carries Nats-Msg-Id `<call_id>.<source>.<epoch>.<seq>`:
//   a retried publish of the same event is the same message, so a stream's
//   duplicate window absorbs it.
// - An event the guard would drop (no speaker, empty final text, text over
//   the guard's limit, bad times, a call id that is not one subject token)
//   throws YesguardInputError instead of being sent: a dropped event is
//   silent on the publisher's side.
// - Memory: one counter per call, forgotten on call_ended or forget().

import { ScalarType } from "@bufbuild/protobuf";
import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection, type NodeConnectionOptions } from "@nats-io/transport-node";
import { TranscriptEventSchema } from "./gen/yesguard/v1/guard_pb.js";
import { YesguardInputError } from "./json.js";
import { checkKeys, requireString, type KeyType } from "./options.js";

export type Speaker = "caller" | "agent";
export type EventType = "transcript" | "speech_started" | "speech_stopped" | "call_ended";

/** The fields of an event a pipeline sets; the publisher sets call_id, seq, source and epoch. */
export interface TranscriptEventInput {
  callId: string;
  type: EventType;
  /** Who spoke; may be absent on call_ended. */
  speaker?: Speaker;
  /** The words; for interrupted agent speech, what was actually played. */
  text?: string;
  /** false for interim results. */
  final?: boolean;
  /** Audio time since the call started, in ms. */
  startMs?: number;
  endMs?: number;
  /** BCP-47 language of the turn (es-MX). */
  lang?: string;
  /** Agent speech: the model response it belongs to. */
  responseId?: string;
  /** Agent speech cut off by the caller. */
  interrupted?: boolean;
  /** The recogniser's confidence, logged. */
  confidence?: number;
}

/** What was published. */
export interface PublishedEvent {
  subject: string;
  seq: number;
  msgId: string;
  /** The JSON sent. */
  json: string;
  /** JetStream mode: whether the stream took it as a duplicate of an earlier publish. */
  duplicate?: boolean;
}

export interface TranscriptPublisherOptions {
  /** The NATS connection; the publisher does not close it. */
  nats: NatsConnection;
  /** This publisher's name ("stt", "tts", "pipeline"): seq counts per (call, source). */
  source: string;
  /**
   * This run of the source. Default: the time in ms, made larger than any
   * epoch this process gave before, so a restarted publisher (or a second
   * one in the same process) never reuses one.
   */
  epoch?: number;
  /** Transcript subject prefix. Default "yesguard.transcript". */
  subjectPrefix?: string;
  /** The language of events that give none. */
  lang?: string;
  /**
   * Publish through JetStream and wait for the stream's ack, retrying a
   * publish that got no ack with the same Nats-Msg-Id. Default true: the
   * guard's default state (jetstream) keeps a stream over the transcript
   * subjects, and an acked publish is the only one a loaded server cannot
   * drop silently (a lost "No, wait" would leave the yes before it
   * standing). false: core NATS publish, for a guard run with
   * `--state memory` (no stream: an acked publish fails with no responders).
   */
  jetstream?: boolean | { timeoutMs?: number; retries?: number };
  /**
   * Core NATS mode: wait for the server to have each event (a flush) before
   * publish() resolves. Default true.
   */
  flush?: boolean;
  /** The guard's limit on text, in bytes. Default 4096, as the guard's. */
  maxTextBytes?: number;
}

const OWNED = new Set(["call_id", "seq", "source", "epoch"]);

/**
 * The TranscriptEvent fields a pipeline sets, by proto name, read from the
 * generated descriptor so the JSON names are the contract's own.
 */
const FIELDS: ReadonlyArray<{ json: string; local: string; type: KeyType }> = TranscriptEventSchema.fields
  .filter((f) => !OWNED.has(f.name))
  .map((f) => {
    if (f.fieldKind !== "scalar") {
      throw new Error(`TranscriptEvent.${f.name}: only scalar fields are supported`);
    }
    return { json: f.name, local: f.localName, type: keyType(f.scalar) };
  });

function keyType(s: ScalarType): KeyType {
  switch (s) {
    case ScalarType.STRING:
      return "string";
    case ScalarType.BOOL:
      return "boolean";
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return "number";
    default:
      return "integer";
  }
}

const INPUT_SPEC: Record<string, KeyType> = Object.fromEntries([
  ["callId", "string"],
  ...FIELDS.map((f) => [f.local, f.type]),
]);

const TYPES: ReadonlySet<string> = new Set(["transcript", "speech_started", "speech_stopped", "call_ended"]);
const SPEAKERS: ReadonlySet<string> = new Set(["caller", "agent"]);

let lastEpoch = 0;

/** A new epoch: the time in ms, above every epoch this process gave before. */
function nextEpoch(): number {
  lastEpoch = Math.max(Date.now(), lastEpoch + 1);
  return lastEpoch;
}

export class TranscriptPublisher {
  readonly source: string;
  readonly epoch: number;
  readonly subjectPrefix: string;
  private readonly nc: NatsConnection;
  private readonly owned: boolean;
  private readonly js?: { client: JetStreamClient; timeoutMs: number; retries: number };
  private readonly flush: boolean;
  private readonly lang?: string;
  private readonly maxTextBytes: number;
  private readonly seqs = new Map<string, number>();

  constructor(options: TranscriptPublisherOptions, owned = false) {
    checkKeys(options, { nats: "any", source: "string", epoch: "integer", subjectPrefix: "string", lang: "string", jetstream: "any", flush: "boolean", maxTextBytes: "integer" }, "TranscriptPublisher options");
    if (!options.nats) throw new YesguardInputError("TranscriptPublisher options.nats: required (a NatsConnection)");
    this.nc = options.nats;
    this.owned = owned;
    this.source = requireString(options.source, "TranscriptPublisher options.source");
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(this.source)) {
      throw new YesguardInputError(`TranscriptPublisher options.source: ${JSON.stringify(this.source)}: want 1-64 of A-Z a-z 0-9 _ -`);
    }
    if (options.epoch !== undefined && options.epoch < 1) {
      throw new YesguardInputError("TranscriptPublisher options.epoch: want a positive integer");
    }
    this.epoch = options.epoch ?? nextEpoch();
    this.subjectPrefix = options.subjectPrefix ?? "yesguard.transcript";
    if (!/^[^\s.*>]+(\.[^\s.*>]+)*$/.test(this.subjectPrefix)) {
      throw new YesguardInputError(`TranscriptPublisher options.subjectPrefix: ${JSON.stringify(this.subjectPrefix)} is not a subject without wildcards`);
    }
    this.lang = options.lang;
    this.flush = options.flush ?? true;
    this.maxTextBytes = options.maxTextBytes ?? 4096;
    const jsOpt = options.jetstream ?? true;
    if (jsOpt) {
      const o = typeof jsOpt === "object" ? jsOpt : {};
      checkKeys(o, { timeoutMs: "integer", retries: "integer" }, "TranscriptPublisher options.jetstream");
      this.js = { client: jetstream(this.nc), timeoutMs: o.timeoutMs ?? 2000, retries: o.retries ?? 2 };
    }
  }

  /**
   * Connects to NATS and returns a publisher that owns the connection
   * (close() drains it).
   */
  static async connect(
    options: Omit<TranscriptPublisherOptions, "nats"> & { servers?: string | string[]; natsOptions?: NodeConnectionOptions },
  ): Promise<TranscriptPublisher> {
    const { servers, natsOptions, ...rest } = options;
    const nc = await connect({ ...natsOptions, servers: servers ?? natsOptions?.servers ?? "nats://127.0.0.1:4222" });
    try {
      return new TranscriptPublisher({ ...rest, nats: nc }, true);
    } catch (err) {
      await nc.close();
      throw err;
    }
  }

  /** The subject of a call's events. */
  subject(callId: string): string {
    return `${this.subjectPrefix}.${callId}`;
  }

  /** Publishes one event, with the next seq of its call. */
  async publish(event: TranscriptEventInput): Promise<PublishedEvent> {
    const { callId, json } = this.encode(event);
    const seq = (this.seqs.get(callId) ?? 0) + 1;
    this.seqs.set(callId, seq);
    if (event.type === "call_ended") {
      this.seqs.delete(callId);
    }
    const body = JSON.stringify({ call_id: callId, seq, source: this.source, epoch: this.epoch, ...json });
    const subject = this.subject(callId);
    const msgId = `${callId}.${this.source}.${this.epoch}.${seq}`;
    if (this.js) {
      const ack = await this.publishAcked(subject, body, msgId);
      return { subject, seq, msgId, json: body, duplicate: ack.duplicate };
    }
    const h = headers();
    h.set("Nats-Msg-Id", msgId);
    try {
      this.nc.publish(subject, body, { headers: h });
    } catch (err) {
      // Nothing was sent and nothing was awaited since seq was taken, so no
      // later event holds a larger one: give it back, leaving no gap.
      if (this.seqs.get(callId) === seq) this.seqs.set(callId, seq - 1);
      throw err;
    }
    if (this.flush) {
      await this.nc.flush();
    }
    return { subject, seq, msgId, json: body };
  }

  private async publishAcked(subject: string, body: string, msgId: string) {
    const js = this.js!;
    for (let attempt = 0; ; attempt++) {
      try {
        return await js.client.publish(subject, body, { msgID: msgId, timeout: js.timeoutMs });
      } catch (err) {
        // The same msgID again: if the first attempt was stored after all,
        // the stream answers this one as a duplicate.
        if (attempt >= js.retries) throw err;
      }
    }
  }

  /** The caller's words: final by default. */
  caller(callId: string, text: string, opts: Omit<TranscriptEventInput, "callId" | "type" | "speaker" | "text" | "responseId" | "interrupted"> = {}): Promise<PublishedEvent> {
    return this.publish({ final: true, ...opts, callId, type: "transcript", speaker: "caller", text });
  }

  /** The agent's words as spoken: final by default. */
  agent(callId: string, text: string, opts: Omit<TranscriptEventInput, "callId" | "type" | "speaker" | "text"> = {}): Promise<PublishedEvent> {
    return this.publish({ final: true, ...opts, callId, type: "transcript", speaker: "agent", text });
  }

  speechStarted(callId: string, speaker: Speaker = "caller", opts: { startMs?: number } = {}): Promise<PublishedEvent> {
    return this.publish({ ...opts, callId, type: "speech_started", speaker });
  }

  speechStopped(callId: string, speaker: Speaker = "caller", opts: { endMs?: number } = {}): Promise<PublishedEvent> {
    return this.publish({ ...opts, callId, type: "speech_stopped", speaker });
  }

  /** The call ended: publishes call_ended and forgets the call's seq. */
  callEnded(callId: string): Promise<PublishedEvent> {
    return this.publish({ callId, type: "call_ended" });
  }

  /** Forgets a call's seq without publishing (the call ended elsewhere). */
  forget(callId: string): void {
    this.seqs.delete(callId);
  }

  /** Drains and closes the connection if this publisher opened it. */
  async close(): Promise<void> {
    if (this.owned && !this.nc.isClosed()) {
      await this.nc.drain();
    }
  }

  /** Validates an event and builds its JSON fields (without the owned ones). */
  private encode(event: TranscriptEventInput): { callId: string; json: Record<string, unknown> } {
    if (typeof event === "object" && event !== null) {
      for (const k of ["seq", "source", "epoch"]) {
        if (k in event) {
          throw new YesguardInputError(`publish: ${k} is set by the publisher (per call, source and epoch); leave it out`);
        }
      }
    }
    checkKeys(event, INPUT_SPEC, "publish");
    const callId = requireString(event.callId, "publish.callId");
    if (/[\s.*>]/.test(callId) || /[\x00-\x1f\x7f]/.test(callId)) {
      throw new YesguardInputError(`publish.callId: ${JSON.stringify(callId)} must be one NATS subject token: no ".", "*", ">" or whitespace`);
    }
    if (!TYPES.has(event.type)) {
      throw new YesguardInputError(`publish.type: want one of ${[...TYPES].join(", ")}, got ${JSON.stringify(event.type)}`);
    }
    if (event.speaker === undefined ? event.type !== "call_ended" : !SPEAKERS.has(event.speaker)) {
      throw new YesguardInputError(`publish.speaker: want "caller" or "agent"${event.type === "call_ended" ? " or none" : ""}, got ${JSON.stringify(event.speaker)}`);
    }
    const text = event.text ?? "";
    if (Buffer.byteLength(text, "utf8") > this.maxTextBytes) {
      throw new YesguardInputError(`publish.text: ${Buffer.byteLength(text, "utf8")} bytes, over the guard's limit of ${this.maxTextBytes}`);
    }
    if (event.type === "transcript" && event.final && text.trim() === "") {
      throw new YesguardInputError("publish.text: a final transcript needs words");
    }
    if (event.startMs !== undefined && event.endMs !== undefined && event.endMs < event.startMs) {
      throw new YesguardInputError("publish: endMs is before startMs");
    }
    const json: Record<string, unknown> = {};
    const withLang = this.lang !== undefined && event.type === "transcript" && event.lang === undefined;
    const source = withLang ? { ...event, lang: this.lang } : event;
    for (const f of FIELDS) {
      const v = (source as unknown as Record<string, unknown>)[f.local];
      if (v !== undefined) json[f.json] = v;
    }
    return { callId, json };
  }
}

/** The proto field names the publisher writes, for tests and docs. */
export const TRANSCRIPT_JSON_FIELDS: readonly string[] = ["call_id", "seq", "source", "epoch", ...FIELDS.map((f) => f.json)];
