/**
 * @yesguard/client: the TypeScript client of yesguard, the sidecar that
 * stops voice agents from acting on a yes the caller never gave.
 *
 * - {@link TranscriptPublisher} publishes a call's transcript to NATS, with
 *   seq, source and epoch kept right.
 * - {@link GuardClient} calls the guard over gRPC: check, complete, redeem,
 *   listDecisions, and a health warm-up.
 * - {@link guardTool} wraps a tool function: Check, run, Complete, or the
 *   refusal message for the model.
 *
 * The API is camelCase; the wire (NATS JSON, gRPC, the decision log) is
 * snake_case. Outcomes and reasons are lowercase strings ("allow",
 * "agent_spoke_after"), the proto enum names without their prefix.
 *
 * @packageDocumentation
 */
export {
  GuardClient,
  GUARD_SERVICE,
  DEFAULT_TIMEOUTS,
  YesguardProtocolError,
  type GuardClientOptions,
  type TlsOptions,
  type Timeouts,
  type CallOptions,
  type CheckInput,
  type CompleteInput,
  type RedeemInput,
  type ListDecisionsInput,
  type ServingStatus,
} from "./client.js";
export {
  TranscriptPublisher,
  TRANSCRIPT_JSON_FIELDS,
  type TranscriptPublisherOptions,
  type TranscriptEventInput,
  type PublishedEvent,
  type Speaker,
  type EventType,
} from "./publisher.js";
export { guardTool, askedMessage, UNAVAILABLE_MESSAGE, type GuardToolOptions, type GuardCallContext } from "./guard-tool.js";
export { guardPrompt, type GuardPromptOptions } from "./prompt.js";
export { jsonObject, YesguardInputError, type JsonObject, type JsonValue } from "./json.js";
export {
  OUTCOMES,
  REASONS,
  type Outcome,
  type Reason,
  type DecisionKind,
  type CheckResult,
  type RedeemResult,
  type Decision,
  type DecisionPage,
  type Evidence,
  type Ask,
  type Turn,
  type Match,
} from "./records.js";
export { Code, ConnectError } from "@connectrpc/connect";
