// The yesguard side of a LiveKit Agents (Node) voice agent, apart from any
// room so that it can be tested against a real guard:
//
// - publishTranscript() publishes what the session hears and says to NATS:
//     user_input_transcribed        -> caller transcript (final = isFinal)
//     user_state_changed (speaking) -> caller speech_started / speech_stopped
//     conversation_item_added       -> agent transcript, for assistant
//                                      messages: textContent (what was
//                                      played, when interrupted), interrupted,
//                                      and the speech handle's id as response_id
// - guardedTool() is an llm.tool whose execute runs only on the guard's
//   ALLOW; a refusal is raised as LiveKit's ToolError, whose message the
//   model gets as the tool's output.
//
// response_id ties the agent's speech to the tool call: LiveKit gives a
// tool its RunContext's speechHandle, and adds each assistant message to
// its speech handle (SpeechHandle.chatItems) before it emits
// conversation_item_added. Speech of the same handle as the tool call (the
// "Sure, submitting it now" spoken with it) is then not taken as the agent
// speaking after the caller's yes.

import { llm, voice } from "@livekit/agents";
import { guardTool, UNAVAILABLE_MESSAGE, type GuardClient, type JsonObject, type TranscriptPublisher } from "@yesguard/client";
import type { z } from "zod";

/** A yesguard call id (one NATS subject token) from LiveKit names: the room and the job. */
export function callIdOf(...parts: Array<string | undefined>): string {
  return parts
    .filter((p): p is string => !!p)
    .join("-")
    .replace(/[^A-Za-z0-9_-]/g, "_");
}

/** How many recent speech handles are kept to find a message's response id. */
const RECENT_SPEECH = 64;

/**
 * Publishes the session's transcript for one call. Returns a function that
 * stops listening. Publish failures go to onError: the guard then lacks
 * the turn and refuses (fails closed); the session goes on.
 */
export function publishTranscript(
  session: voice.AgentSession,
  publisher: TranscriptPublisher,
  callId: string,
  onError: (err: unknown) => void = (err) => console.error("yesguard: publish:", err),
): () => void {
  // Recent speech handles, oldest first: bounded, whatever the call's length.
  const speech: voice.SpeechHandle[] = [];
  const responseIdOf = (item: llm.ChatMessage): string | undefined =>
    speech.find((h) => h.chatItems.some((i) => i.id === item.id))?.id;

  const onSpeechCreated = (ev: voice.SpeechCreatedEvent) => {
    speech.push(ev.speechHandle);
    if (speech.length > RECENT_SPEECH) speech.shift();
  };
  const onUserInput = (ev: voice.UserInputTranscribedEvent) => {
    if (ev.transcript.trim() === "") return;
    publisher.caller(callId, ev.transcript, { final: ev.isFinal, lang: ev.language ?? undefined }).catch(onError);
  };
  const onUserState = (ev: voice.UserStateChangedEvent) => {
    if (ev.newState === "speaking") {
      publisher.speechStarted(callId, "caller").catch(onError);
    } else if (ev.oldState === "speaking") {
      publisher.speechStopped(callId, "caller").catch(onError);
    }
  };
  const onItem = (ev: voice.ConversationItemAddedEvent) => {
    const item = ev.item;
    if (item.type !== "message" || item.role !== "assistant") return;
    const text = item.textContent;
    if (!text || text.trim() === "") return;
    publisher.agent(callId, text, { responseId: responseIdOf(item), interrupted: item.interrupted }).catch(onError);
  };

  session.on(voice.AgentSessionEventTypes.SpeechCreated, onSpeechCreated);
  session.on(voice.AgentSessionEventTypes.UserInputTranscribed, onUserInput);
  session.on(voice.AgentSessionEventTypes.UserStateChanged, onUserState);
  session.on(voice.AgentSessionEventTypes.ConversationItemAdded, onItem);
  return () => {
    session.off(voice.AgentSessionEventTypes.SpeechCreated, onSpeechCreated);
    session.off(voice.AgentSessionEventTypes.UserInputTranscribed, onUserInput);
    session.off(voice.AgentSessionEventTypes.UserStateChanged, onUserState);
    session.off(voice.AgentSessionEventTypes.ConversationItemAdded, onItem);
  };
}

/**
 * An llm.tool that asks the guard before it runs `run`, and raises
 * ToolError with the guard's message when it may not. `run` returns the
 * tool's result as a plain JSON object: a duplicate call gets it back
 * instead of acting twice.
 */
export function guardedTool<S extends z.ZodObject, R extends JsonObject>(opts: {
  guard: GuardClient;
  callId: string;
  name: string;
  description: string;
  parameters: S;
  run: (args: z.infer<S>) => Promise<R>;
  /** Ask the guard for this wait (ms) for the caller's turn: see the table of waits per recogniser. */
  waitMs?: number;
  /**
   * The session that speaks the guard's own question (session.say) when a
   * refusal carries one; the model is then told to wait for the answer.
   * The say is not awaited: its speech plays after the tool call's reply.
   */
  session?: voice.AgentSession;
}) {
  const session = opts.session;
  const guarded = guardTool<z.infer<S> & JsonObject, R>(opts.run, {
    guard: opts.guard,
    tool: opts.name,
    callId: opts.callId,
    waitMs: opts.waitMs,
    onRefuse: (d) => {
      throw new llm.ToolError(d.message);
    },
    onError: () => {
      throw new llm.ToolError(UNAVAILABLE_MESSAGE);
    },
    speak: session
      ? (text) => {
          session.say(text);
        }
      : undefined,
  });
  return llm.tool({
    description: opts.description,
    parameters: opts.parameters,
    execute: async (args, { ctx, toolCallId, abortSignal }) =>
      guarded(args as z.infer<S> & JsonObject, { responseId: ctx.speechHandle.id, toolCallId, signal: abortSignal }),
  });
}
