// guardTool wraps a consequential tool function so that it runs only on
// the guard's ALLOW, and reports its result so that a repeat gets the same
// result instead of a second action.
//
// Rules that hold (fail closed):
// - The tool runs only when Check answers ALLOW. Any other outcome, and a
//   Check that fails (guard down, deadline passed, an answer this client
//   cannot read), returns a message for the model instead. Once the tool
//   ran, its result is returned even if Complete fails.
// - A tool that throws is reported with Complete failed (the guard then
//   judges a retry afresh), and the error is rethrown: throw only when the
//   action did not happen. When the tool's backend redeemed the approval,
//   the guard refuses that failure (FAILED_PRECONDITION, given to
//   onCompleteError): only the backend, with its Redeem's receipt, may
//   reopen an action it may have executed.
// - DUPLICATE never runs the tool: it returns the original's result, or,
//   while the original runs or when its result is unknown, the guard's
//   message telling the model not to report the action done.

import { Code, ConnectError } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import type { CheckInput, GuardClient } from "./client.js";
import { jsonObject, YesguardInputError } from "./json.js";
import { checkKeys } from "./options.js";
import type { Ask, CheckResult } from "./records.js";

/** Per-invocation facts the framework knows and the arguments do not carry. */
export interface GuardCallContext {
  /** Overrides the options' callId. */
  callId?: string;
  /** The model response that made the call. */
  responseId?: string;
  /** The model's id for the tool call. */
  toolCallId?: string;
  /** Audio time at which the caller turn the model answers ended. */
  respondingToMs?: number;
  signal?: AbortSignal;
}

export interface GuardToolOptions<A extends JsonObject> {
  guard: GuardClient;
  /** The tool's name as the model calls it (and as the policy lists it). */
  tool: string;
  /** The call the tool belongs to, or how to find it from the arguments. */
  callId?: string | ((args: A) => string);
  /** Ask the guard for this wait, in ms, instead of the policy's (capped at max_wait). */
  waitMs?: number;
  /** The Check's deadline. */
  timeoutMs?: number;
  /** Ask for the full evidence (for onDecision logging). */
  includeEvidence?: boolean;
  /**
   * What the model gets when the tool does not run (REFUSE, IGNORED, a
   * DUPLICATE whose result is not known). Default: the guard's message.
   * Throw here to use the framework's own error path (LiveKit's ToolError).
   */
  onRefuse?: (decision: CheckResult) => string;
  /**
   * What the model gets when the guard could not be asked. Default: a
   * message saying the action was not taken. Throw to rethrow.
   */
  onError?: (err: unknown) => string;
  /** Every decision, for logs and metrics. */
  onDecision?: (decision: CheckResult, args: A) => void;
  /** Complete failed after the tool ran: the result is still returned. */
  onCompleteError?: (err: unknown, decision: CheckResult) => void;
  /**
   * Speaks the guard's own question through the pipeline's TTS as the
   * agent's turn (LiveKit Node: `(text) => session.say(text)`), when a
   * REFUSE carries one. The model is then told that the question was asked
   * and that it must wait for the caller's answer. A speak that throws
   * leaves the guard's message as it is (the model asks itself).
   */
  speak?: (text: string, ask: Ask) => Promise<unknown> | unknown;
}

/** What the model gets once the guard's question was spoken for it. */
export function askedMessage(tool: string, ask: Ask): string {
  return (
    `The caller was just asked, in the guard's words: "${ask.text}" Do not ask again and do not say it is done: ` +
    `wait for the caller's answer. If they say yes, call ${tool} again with the same arguments; if not, do not.`
  );
}

/** The message given to the model when the guard cannot be asked. */
export const UNAVAILABLE_MESSAGE =
  "The confirmation check could not be made, so the action was NOT taken. Do not tell the caller it is done. " +
  "Ask them to confirm once more, then try again.";

/**
 * Wraps `fn`: Check, then run, then Complete (or Complete failed when it
 * throws); or, without running it, return the message for the model. The
 * wrapped function returns fn's result, the original's result on a
 * DUPLICATE, or a string for the model.
 *
 * fn must return a plain JSON object: it is what duplicates get back.
 */
export function guardTool<A extends JsonObject, R extends JsonObject>(
  fn: (args: A, ctx: GuardCallContext) => Promise<R> | R,
  options: GuardToolOptions<A>,
): (args: A, ctx?: GuardCallContext) => Promise<R | string> {
  checkKeys(options, { guard: "any", tool: "string", callId: "any", waitMs: "integer", timeoutMs: "integer", includeEvidence: "boolean", onRefuse: "any", onError: "any", onDecision: "any", onCompleteError: "any", speak: "any" }, "guardTool options");
  if (!options.guard) throw new YesguardInputError("guardTool options.guard: required (a GuardClient)");
  if (!options.tool) throw new YesguardInputError("guardTool options.tool: required");
  const { guard, tool } = options;
  const refuse = options.onRefuse ?? ((d: CheckResult) => d.message);
  const unavailable = options.onError ?? (() => UNAVAILABLE_MESSAGE);

  return async (args: A, ctx: GuardCallContext = {}): Promise<R | string> => {
    checkKeys(ctx, { callId: "string", responseId: "string", toolCallId: "string", respondingToMs: "integer", signal: "any" }, `${tool} call context`);
    const callId = ctx.callId ?? (typeof options.callId === "function" ? options.callId(args) : options.callId);
    if (!callId) {
      throw new YesguardInputError(`${tool}: no call id: give guardTool options.callId or the call context's callId`);
    }
    const input: CheckInput = {
      callId,
      tool,
      args: jsonObject(args, "args"),
      responseId: ctx.responseId,
      toolCallId: ctx.toolCallId,
      respondingToMs: ctx.respondingToMs,
      waitMs: options.waitMs,
      timeoutMs: options.timeoutMs,
      includeEvidence: options.includeEvidence,
      signal: ctx.signal,
    };
    let d: CheckResult;
    try {
      d = await guard.check(input);
    } catch (err) {
      if (err instanceof YesguardInputError) throw err;
      return unavailable(err);
    }
    options.onDecision?.(d, args);

    switch (d.outcome) {
      case "allow":
        break;
      case "duplicate":
        if (!d.originalRunning && d.originalResult !== undefined) {
          return d.originalResult as R;
        }
        return refuse(d);
      default:
        if (d.outcome === "refuse" && d.ask && options.speak) {
          try {
            await options.speak(d.ask.text, d.ask);
          } catch {
            return refuse(d);
          }
          return askedMessage(tool, d.ask);
        }
        return refuse(d);
    }

    let result: R;
    try {
      result = await fn(args, { ...ctx, callId });
    } catch (err) {
      await completeOnce(guard, { decisionId: d.decisionId, failed: true }).catch((e: unknown) => options.onCompleteError?.(e, d));
      throw err;
    }
    let payload: JsonObject | undefined;
    try {
      payload = jsonObject(result, `${tool} result`);
    } catch (err) {
      // The action ran: it is reported done (no result to replay), never
      // failed, which would let a retry run it again.
      options.onCompleteError?.(err, d);
    }
    await completeOnce(guard, { decisionId: d.decisionId, result: payload }).catch((e: unknown) => options.onCompleteError?.(e, d));
    return result;
  };
}

/**
 * Complete, retried on transient errors. A retry answered "already
 * reported" (FailedPrecondition) means an earlier attempt landed.
 */
async function completeOnce(guard: GuardClient, input: { decisionId: string; result?: JsonObject; failed?: boolean }): Promise<void> {
  for (let attempt = 0, pause = 100; ; attempt++, pause *= 2) {
    try {
      await guard.complete(input);
      return;
    } catch (err) {
      const code = ConnectError.from(err).code;
      if (attempt > 0 && code === Code.FailedPrecondition) return;
      if (attempt >= 2 || (code !== Code.Unavailable && code !== Code.DeadlineExceeded)) throw err;
      await new Promise((r) => setTimeout(r, pause));
    }
  }
}
