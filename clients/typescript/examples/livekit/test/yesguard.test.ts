// The example's guard logic against a real guard, with LiveKit's own
// AgentSession, events, chat messages, speech handles and RunContext, and
// no room: the session's events are emitted as LiveKit emits them.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { asLanguageCode, initializeLogger, llm, voice } from "@livekit/agents";
import { startGuard, type RunningGuard } from "@yesguard/client/testing";
import type { GuardClient, TranscriptPublisher } from "@yesguard/client";
import { z } from "zod";
import { callIdOf, guardedTool, publishTranscript } from "../src/yesguard.js";

initializeLogger({ pretty: false, level: "warn" });

const QUESTION = "Shall I submit your appeal A-17 now?";

describe("the LiveKit example's guard logic", () => {
  let g: RunningGuard;
  let guard: GuardClient;
  let publisher: TranscriptPublisher;

  before(async () => {
    g = await startGuard();
    guard = g.client();
    publisher = await g.publisher({ source: "livekit-agent", lang: "en" });
  });
  after(async () => g?.stop());

  /** A session bridged to the guard for one call, and LiveKit-shaped ways to drive it. */
  function call(name: string, speaks = false) {
    const callId = callIdOf("room.with dots", `${name}-${g.callId("job")}`);
    const session = new voice.AgentSession({});
    const stop = publishTranscript(session, publisher, callId, (err) => assert.fail(`publish failed: ${String(err)}`));
    const runs: string[] = [];
    const spoken: string[] = [];
    if (speaks) {
      // What session.say does with no room: a new speech handle whose
      // message is added to the chat (its audio is not played here).
      session.say = ((text: string) => {
        spoken.push(text);
        const handle = reply();
        agentSaid(handle, text);
        return handle;
      }) as typeof session.say;
    }
    const tool = guardedTool({
      guard,
      callId,
      name: "submit_appeal",
      description: "Submit the caller's appeal once they have confirmed it.",
      parameters: z.object({ appeal_id: z.string() }),
      session: speaks ? session : undefined,
      run: async ({ appeal_id }) => {
        runs.push(appeal_id);
        return { status: "submitted", appeal_id };
      },
    });
    /** A new agent reply (a speech handle), as LiveKit creates one. */
    const reply = () => {
      const handle = voice.SpeechHandle.create();
      session.emit(voice.AgentSessionEventTypes.SpeechCreated, voice.createSpeechCreatedEvent({ userInitiated: false, source: "generate_reply", speechHandle: handle }));
      return handle;
    };
    /** The agent said `text` as part of `handle`'s reply: AgentActivity adds it to the handle, then emits it. */
    const agentSaid = (handle: voice.SpeechHandle, text: string, interrupted = false) => {
      const msg = llm.ChatMessage.create({ role: "assistant", content: text, interrupted });
      handle._itemAdded([msg]);
      session.emit(voice.AgentSessionEventTypes.ConversationItemAdded, voice.createConversationItemAddedEvent(msg));
    };
    const callerSays = (text: string) => {
      session.emit(voice.AgentSessionEventTypes.UserStateChanged, voice.createUserStateChangedEvent("listening", "speaking"));
      session.emit(voice.AgentSessionEventTypes.UserInputTranscribed, voice.createUserInputTranscribedEvent({ transcript: text.split(" ")[0]!, isFinal: false, language: asLanguageCode("en") }));
      session.emit(voice.AgentSessionEventTypes.UserInputTranscribed, voice.createUserInputTranscribedEvent({ transcript: text, isFinal: true, language: asLanguageCode("en") }));
      session.emit(voice.AgentSessionEventTypes.UserStateChanged, voice.createUserStateChangedEvent("speaking", "listening"));
    };
    /** The model calls submit_appeal within `handle`'s reply, as LiveKit's tool executor does. */
    const callTool = (handle: voice.SpeechHandle, appealId = "A-17") =>
      tool.execute(
        { appeal_id: appealId },
        {
          ctx: new voice.RunContext(session, handle, llm.FunctionCall.create({ callId: `fc-${handle.id}`, name: "submit_appeal", args: JSON.stringify({ appeal_id: appealId }) })),
          toolCallId: `fc-${handle.id}`,
          abortSignal: new AbortController().signal,
        },
      );
    return { callId, session, stop, runs, spoken, reply, agentSaid, callerSays, callTool };
  }

  test("publishes the session's events as the contract's transcript events", async () => {
    // The pipeline's NATS user may publish transcripts, not read them
    // (issue 11): what was published is seen through the guard.
    const c = call("events");
    const seen = await g.eventsSeen();
    const rejected = await g.metric("yesguard_transcript_events_rejected_total");
    const h = c.reply();
    c.agentSaid(h, QUESTION);
    c.callerSays("Yes please");
    c.agentSaid(c.reply(), "Let me", true);
    // Six events: the question, speech started, the interim and the final
    // yes, speech stopped, the interrupted "Let me".
    await g.waitEvents(seen + 6);
    c.stop();
    assert.equal(await g.eventsSeen(), seen + 6, "exactly six events reached the guard");
    assert.equal(await g.metric("yesguard_transcript_events_rejected_total"), rejected, "the guard rejected none");
    const page = await guard.listDecisions({ callId: c.callId, includeTranscript: true });
    assert.deepEqual(
      page.transcript.map((t) => [t.speaker, t.text, t.interrupted, t.source]),
      [
        ["agent", QUESTION, false, "livekit-agent"],
        ["caller", "Yes please", false, "livekit-agent"],
        ["agent", "Let me", true, "livekit-agent"],
      ],
    );
    assert.equal(page.transcript[0]!.responseId, h.id, "the agent's words carry their speech handle's id");
    assert.equal(page.transcript[1]!.lang, "en");
    assert.equal(page.transcript[0]!.firstSeq, 1, "seq counts from 1 per call");
    assert.equal(page.transcript[2]!.lastSeq, 6, "one seq per event");
    assert.match(c.callId, /^room_with_dots-events-/, "the room name made one subject token");
  });

  test("the tool runs on the yes it waited for", async () => {
    const c = call("race");
    // The model's tool call arrives before the caller's transcript.
    const out = await g.race({
      setup: () => c.agentSaid(c.reply(), QUESTION),
      events: 1,
      call: () => c.callTool(c.reply()),
      answer: () => c.callerSays("Yes."),
    });
    assert.deepEqual(out, { status: "submitted", appeal_id: "A-17" });
    assert.deepEqual(c.runs, ["A-17"]);
    // The model calls it again: the original's result, no second submission.
    assert.deepEqual(await c.callTool(c.reply()), { status: "submitted", appeal_id: "A-17" });
    assert.deepEqual(c.runs, ["A-17"]);
    c.stop();
  });

  test("a refusal is LiveKit's ToolError carrying the guard's message", async () => {
    const c = call("refuse");
    const out = g.race({
      setup: () => c.agentSaid(c.reply(), QUESTION),
      events: 1,
      call: () => c.callTool(c.reply()),
      answer: () => c.callerSays("Yes. Wait, no."),
    });
    await assert.rejects(out, (err: unknown) => {
      assert.ok(err instanceof llm.ToolError, String(err));
      assert.match(err.message, /Do not submit the appeal/);
      return true;
    });
    assert.deepEqual(c.runs, []);
    c.stop();
  });

  test("the agent's speech in the tool call's own reply is not 'the agent spoke after'", async () => {
    // The same words, the same order; only the reply the filler belongs to differs.
    for (const sameReply of [true, false]) {
      const c = call(sameReply ? "filler-same" : "filler-other");
      const seen = await g.eventsSeen();
      c.agentSaid(c.reply(), QUESTION);
      c.callerSays("Yes.");
      const toolReply = c.reply();
      c.agentSaid(sameReply ? toolReply : c.reply(), "Sure, submitting it now.");
      await g.waitEvents(seen + 6);
      const decisions: string[] = [];
      try {
        await c.callTool(toolReply);
        decisions.push("ran");
      } catch (err) {
        assert.ok(err instanceof llm.ToolError, String(err));
        decisions.push(err.message);
      }
      const [rec] = (await guard.listDecisions({ callId: c.callId })).decisions;
      if (sameReply) {
        assert.deepEqual(decisions, ["ran"], `refused: ${decisions.join()}`);
        assert.equal(rec?.responseId, toolReply.id);
        assert.equal(rec?.outcome, "allow");
      } else {
        assert.equal(c.runs.length, 0);
        assert.equal(rec?.outcome, "refuse");
        assert.equal(rec?.reason, "agent_spoke_after");
      }
      c.stop();
    }
  });

  test("a question that will not do: session.say speaks the guard's, and the yes to it runs the tool", async () => {
    const c = call("ask", true);
    let seen = await g.eventsSeen();
    c.agentSaid(c.reply(), "Alright, I have everything I need.");
    c.callerSays("Yes.");
    await g.waitEvents(seen + 5);
    seen = await g.eventsSeen();
    const first = await c.callTool(c.reply());
    assert.equal(c.runs.length, 0, "the tool ran on a yes to no question");
    assert.equal(c.spoken.length, 1, "the guard's question was not spoken");
    assert.match(c.spoken[0]!, /submit/i);
    assert.match(String(first), /Do not ask again/);
    await g.waitEvents(seen + 1); // the spoken question, as the agent's turn
    seen = await g.eventsSeen();
    c.callerSays("Yes.");
    await g.waitEvents(seen + 4);
    assert.deepEqual(await c.callTool(c.reply()), { status: "submitted", appeal_id: "A-17" });
    assert.deepEqual(c.runs, ["A-17"]);
    const [allow] = (await guard.listDecisions({ callId: c.callId })).decisions.filter((d) => d.outcome === "allow");
    assert.ok(allow?.evidence?.guardQuestion?.startsWith("ask_"), "the ALLOW rests on the guard's question");
    c.stop();
  });
});
