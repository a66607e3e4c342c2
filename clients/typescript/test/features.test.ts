// The guard's features a client leans on: per-source seq, epochs and gaps
// (issue 10), a duplicate that answers original_running, the short
// evidence, the transcript in ListDecisions, wait_ms and max_wait, bearer
// tokens and TLS (issue 11), the JetStream transcript stream.
//
// Each test runs against the real guard and asserts the feature. Where the
// guard shows that it lacks the feature, the test fails saying exactly what
// it saw (these were skips while the features were being built).

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { guardBinary, startGuard, waitFor, type RunningGuard } from "../src/testing.js";
import { QUESTION, suiteGuard } from "./fixtures.js";
import { makeCerts } from "./certs.js";
import { jetstream } from "@nats-io/jetstream";
import { Code, ConnectError, GuardClient, guardTool, type CheckResult, type TranscriptPublisher } from "../src/index.js";

const TOOL = "submit_appeal";
const ARGS = { appeal_id: "A-17" };

describe("guard features", () => {
  let g: RunningGuard;
  let guard: GuardClient;
  let pub: TranscriptPublisher;
  suiteGuard("upcoming", (s) => ({ g, guard, pub } = s));

  /** The agent asks (from `agent`), the Check starts, the caller answers (from `caller`). */
  function raced(call: string, opts: { agent?: TranscriptPublisher; caller?: TranscriptPublisher } = {}): Promise<CheckResult> {
    return g.race({
      setup: () => (opts.agent ?? pub).agent(call, QUESTION),
      events: 1,
      call: () => guard.check({ callId: call, tool: TOOL, args: ARGS, includeEvidence: true, timeoutMs: 10_000 }),
      answer: () => (opts.caller ?? pub).caller(call, "Yes."),
    });
  }

  /**
   * Whether the guard counts seq per (call, source): two publishers' seq 1
   * on one call are both taken in. A guard that predates it drops the
   * second as a repeat (duplicate_seq).
   */
  async function perSourceSeq(): Promise<{ ok: boolean; why: string }> {
    const call = g.callId("source-probe");
    const a = await g.publisher({ source: "probe-a", lang: "en" });
    const b = await g.publisher({ source: "probe-b", lang: "en" });
    const seen = await g.eventsSeen();
    const dup = await g.metric("yesguard_transcript_events_rejected_total", { reason: "duplicate_seq" });
    await a.agent(call, "Hello.");
    await b.caller(call, "Hi.");
    await g.waitEvents(seen + 2);
    const dropped = (await g.metric("yesguard_transcript_events_rejected_total", { reason: "duplicate_seq" })) - dup;
    return dropped === 0
      ? { ok: true, why: "" }
      : { ok: false, why: "the guard counts seq per call, not per (call, source, epoch): it dropped another source's seq 1 as duplicate_seq (TranscriptEvent.source/epoch, issues 7 and 10)" };
  }

  test("JetStream: the transcript stream acks each event and absorbs a retry by Nats-Msg-Id", async () => {
    // The pipeline user may publish and take the acks, not ask JetStream's
    // API about the stream (issue 11): the acks name the stream.
    const nc = await g.natsConn();
    const call = g.callId("js");
    const subject = `yesguard.transcript.${call}`;
    const acked = await g.publisher({ source: "js", lang: "en", jetstream: true });
    const p1 = await acked.agent(call, QUESTION);
    assert.equal(p1.duplicate, false);
    // A retry of the same event (the ack was lost): the same message id.
    const again = await jetstream(nc).publish(subject, p1.json, { msgID: p1.msgId });
    assert.equal(again.duplicate, true, "the stream's duplicate window absorbed the retry");
    assert.equal(again.stream, "YESGUARD_TRANSCRIPT");
    // Core publishes carry the header too.
    const core = await g.publisher({ source: "core", lang: "en", jetstream: false });
    const p2 = await core.caller(call, "Yes.");
    const retry = await jetstream(nc).publish(subject, p2.json, { msgID: p2.msgId });
    assert.equal(retry.duplicate, true);
    assert.equal(retry.stream, "YESGUARD_TRANSCRIPT");
  });

  test("per-source seq: the recogniser and the speech side publish apart", async () => {
    const probe = await perSourceSeq();
    if (!probe.ok) assert.fail(probe.why);
    const stt = await g.publisher({ source: "stt", lang: "en" });
    const tts = await g.publisher({ source: "tts", lang: "en" });
    const d = await raced(g.callId("sources"), { agent: tts, caller: stt });
    assert.equal(d.outcome, "allow", `${d.reason}: ${d.detail}`);
    assert.equal(d.evidence?.answer?.source, "stt");
    assert.equal(d.evidence?.question?.source, "tts");
  });

  test("epochs: a restarted publisher's seq 1 is a new event, not a repeat", async () => {
    const probe = await perSourceSeq();
    if (!probe.ok) assert.fail(probe.why);
    const call = g.callId("epoch");
    const before = await g.publisher({ source: "tts", lang: "en" });
    await before.agent(call, "One moment.");
    const restarted = await g.publisher({ source: "tts", lang: "en" });
    const d = await raced(call, { agent: restarted });
    assert.equal(d.outcome, "allow", `${d.reason}: ${d.detail}`);
    // Both runs' agent speech is one turn; the restarted run's seq 1 is in it,
    // and it is the question the yes answered.
    assert.equal(d.evidence?.question?.text, `One moment. ${QUESTION}`, "the restarted run's question (its seq 1) was taken in");
    assert.equal(d.questionSentence.toLowerCase(), QUESTION.toLowerCase());
  });

  test("gaps: a source's missing seq refuses with transcript_gap", async () => {
    const probe = await perSourceSeq();
    if (!probe.ok) assert.fail(probe.why);
    const call = g.callId("gap");
    const nc = await g.natsConn();
    const epoch = Date.now();
    const ev = (seq: number, speaker: string, text: string) =>
      JSON.stringify({ call_id: call, seq, source: "stt", epoch, type: "transcript", speaker, text, final: true, lang: "en" });
    nc.publish(`yesguard.transcript.${call}`, ev(1, "agent", QUESTION));
    // seq 2 never arrives.
    nc.publish(`yesguard.transcript.${call}`, ev(3, "caller", "Yes."));
    await nc.flush();
    const d = await guard.check({ callId: call, tool: TOOL, args: ARGS, timeoutMs: 10_000 });
    assert.equal(d.outcome, "refuse");
    assert.equal(d.reason, "transcript_gap");
    assert.ok(d.message.length > 0);
  });

  test("a duplicate of a running original answers original_running, and guardTool says to wait", async () => {
    const call = g.callId("running");
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let runs = 0;
    const decisions: CheckResult[] = [];
    const errors: unknown[] = [];
    const tool = guardTool(
      async (_: typeof ARGS) => {
        runs++;
        await released;
        return { status: "submitted" };
      },
      {
        guard, tool: TOOL, callId: call, timeoutMs: 3000,
        onDecision: (d) => decisions.push(d),
        onError: (err) => (errors.push(err), "unavailable"),
      },
    );
    // Resolves once the tool has run, which waits for release() below.
    const first = g.race({ setup: () => pub.agent(call, QUESTION), events: 1, call: () => tool(ARGS), answer: () => pub.caller(call, "Yes.") });
    await waitFor(() => runs === 1, "the original to start running");
    // The original is still running: it waits for release().
    const second = await tool(ARGS);
    release();
    assert.deepEqual(await first, { status: "submitted" });
    assert.equal(runs, 1, "the duplicate did not run the tool");
    assert.equal(typeof second, "string", "the duplicate gets a message, not a result");
    if (errors.length > 0 && ConnectError.from(errors[0]).code === Code.DeadlineExceeded) {
      assert.fail("the guard held the running original's duplicate until the caller's deadline: it predates original_running (issue 10)");
    }
    const dup = decisions[1];
    assert.ok(dup, `the duplicate's Check answered (errors: ${errors.map(String).join("; ")})`);
    assert.equal(dup.outcome, "duplicate");
    if (!dup.originalRunning) {
      assert.fail(`the guard answered the running original's duplicate after ${dup.waitedMs} ms with original_running false ("${dup.message}"): it predates original_running (issue 10)`);
    }
    assert.equal(second, dup.message);
    // The message tells the model to wait; it never reports the action done.
    assert.match(dup.message, /still running/i);
    assert.doesNotMatch(dup.message.replace(/do not tell the caller it is done/gi, ""), /\b(it is|it's|has been) (done|complete)/i);
  });

  test("short evidence: answer_text and question_sentence are always set", async () => {
    const d = await raced(g.callId("short"));
    assert.equal(d.outcome, "allow");
    if (d.answerText === "" && d.evidence?.answer?.text === "Yes.") {
      assert.fail("the guard fills only the full evidence, not answer_text/question_sentence (issue 15)");
    }
    assert.equal(d.answerText, "Yes.");
    assert.equal(d.questionSentence.toLowerCase(), QUESTION.toLowerCase());
    const bare = await guard.check({ callId: g.callId("short-bare"), tool: TOOL, args: ARGS });
    assert.ok(bare.detail.length > 0, "detail is set on a refusal too");
  });

  test("ListDecisions returns the call's transcript on request", async () => {
    const call = g.callId("transcript");
    await raced(call);
    const page = await guard.listDecisions({ callId: call, includeTranscript: true });
    if (page.transcript.length === 0) {
      assert.fail("the guard ignores include_transcript (ListDecisions returns no turns)");
    }
    assert.deepEqual(page.transcript.map((x) => [x.speaker, x.text]), [["agent", QUESTION], ["caller", "Yes."]]);
    assert.equal(page.transcript[1]!.source, "upcoming");
  });

  test("wait_ms: a Check asks for its own wait", async () => {
    // An unknown call waits the whole wait before it is refused, so the
    // time waited tells which wait the guard used: 200 ms asked, 900 ms
    // the policy's default.
    const d = await guard.check({ callId: g.callId("wait"), tool: TOOL, args: ARGS, waitMs: 200, timeoutMs: 5000 });
    assert.equal(d.outcome, "refuse");
    if (d.waitedMs >= 850) {
      assert.fail(`the guard waited ${d.waitedMs} ms, its policy's wait, for wait_ms 200: it ignores wait_ms (guard side of issue 13)`);
    }
    assert.ok(d.waitedMs < 700, `waited ${d.waitedMs} ms for wait_ms 200`);
  });

  test("max_wait: a Check's wait_ms is capped by the policy", async () => {
    let capped: RunningGuard;
    try {
      capped = await startGuard({ policy: "defaults:\n  wait: 300ms\n  max_wait: 400ms\n" });
    } catch (err) {
      const msg = String(err);
      if (/max_wait/.test(msg)) assert.fail(`the guard does not know the policy's max_wait: ${msg.split("\n").find((l) => /max_wait/.test(l))?.slice(0, 200)}`);
      throw err;
    }
    try {
      const c = capped.client();
      const d = await c.check({ callId: capped.callId("cap"), tool: TOOL, args: ARGS, waitMs: 3000, timeoutMs: 6000 });
      assert.equal(d.outcome, "refuse");
      assert.ok(d.waitedMs < 2000, `waited ${d.waitedMs} ms for wait_ms 3000 under max_wait 400ms`);
    } finally {
      await capped.stop();
    }
  });
});

/** The serve flags whose names match, from `yesguard serve -h`. */
function serveFlags(): string[] {
  const r = spawnSync(guardBinary(), ["serve", "-h"], { encoding: "utf8" });
  const help = `${r.stdout ?? ""}${r.stderr ?? ""}`;
  return [...help.matchAll(/^\s+--?([a-z][a-z0-9-]*)/gm)].map((m) => m[1]!);
}

describe("tokens and TLS in the guard (issue 11)", () => {
  const flags = serveFlags();
  const tokenFlag = flags.find((f) => /token-file|tokens-file|tokens$/.test(f));
  const certFlag = flags.find((f) => /tls-cert/.test(f));
  const keyFlag = flags.find((f) => /tls-key/.test(f));

  test("bearer tokens: none is Unauthenticated, the wrong role PermissionDenied, the right one works", async () => {
    if (!tokenFlag) assert.fail(`the guard has no token file flag (serve flags: ${flags.join(", ")})`);
    const pipeline = randomBytes(24).toString("base64url");
    const auditor = randomBytes(24).toString("base64url");
    const sha = (s: string) => createHash("sha256").update(s).digest("hex");
    // The format of the auth brief: YAML, named tokens, SHA-256 hashes, roles.
    const dir = mkdtempSync(join(tmpdir(), "yesguard-ts-tokens-"));
    const file = join(dir, "tokens.yaml");
    writeFileSync(file, `tokens:\n  - name: pipeline-test\n    sha256: ${sha(pipeline)}\n    roles: [pipeline]\n  - name: auditor-test\n    sha256: ${sha(auditor)}\n    roles: [auditor]\n`);
    const sg = await startGuard({ args: [`--${tokenFlag}=${file}`] });
    try {
      const anon = sg.client();
      await anon.warmup(); // health stays open
      await assert.rejects(anon.check({ callId: sg.callId("t"), tool: TOOL }), (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated);
      const aud = sg.client({ token: auditor });
      await assert.rejects(aud.check({ callId: sg.callId("t"), tool: TOOL }), (e: unknown) => ConnectError.from(e).code === Code.PermissionDenied);
      assert.ok(Array.isArray((await aud.listDecisions({ callId: sg.callId("t") })).decisions));
      const pipe = sg.client({ token: pipeline });
      const d = await pipe.check({ callId: sg.callId("t"), tool: TOOL });
      assert.equal(d.outcome, "refuse", "an unknown call, judged");
      await assert.rejects(pipe.listDecisions({ callId: sg.callId("t") }), (e: unknown) => ConnectError.from(e).code === Code.PermissionDenied);
    } finally {
      await sg.stop();
    }
  });

  test("the guard's own TLS: the client trusts its CA and refuses without it", async () => {
    if (!certFlag || !keyFlag) assert.fail(`the guard has no TLS certificate flags (serve flags: ${flags.join(", ")})`);
    const certs = makeCerts();
    const sg = await startGuard({
      args: [`--${certFlag}=${join(certs.dir, "server.pem")}`, `--${keyFlag}=${join(certs.dir, "server-key.pem")}`],
      warmup: { tls: { ca: certs.ca } },
    });
    try {
      const ok = new GuardClient({ address: sg.grpc, tls: { ca: certs.ca } });
      const plain = new GuardClient({ address: sg.grpc });
      try {
        assert.equal(await ok.healthStatus(), "serving");
        await assert.rejects(plain.healthStatus({ timeoutMs: 3000 }));
      } finally {
        ok.close();
        plain.close();
      }
    } finally {
      await sg.stop();
    }
  });
});
