// The guard's answers as a TypeScript user reads them: camelCase fields,
// numbers instead of int64 bigints, Dates instead of Timestamps, and the
// outcome and reason as lowercase string unions.
//
// The unions are the proto enum names without their prefix, lowercased
// (OUTCOME_ALLOW is "allow", REASON_AGENT_SPOKE_AFTER is
// "agent_spoke_after"): the same strings as the guard's Prometheus labels
// (`yesguard_guard_decisions_total{outcome="refuse",reason="negated"}`).
// They are derived from the generated enums, so a regenerated proto brings
// its new values with it.

import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import * as pb from "./gen/yesguard/v1/guard_pb.js";
import { parseJsonObject } from "./json.js";

/** What the pipeline does with the tool call. */
export type Outcome = Exclude<Lowercase<keyof typeof pb.Outcome>, "unspecified">;
/**
 * Why: "confirmed", "negated", "agent_spoke_after", ... "unspecified" when
 * the guard gave none, or a reason this client's proto does not know.
 */
export type Reason = Lowercase<keyof typeof pb.Reason>;
/** Which call wrote a decision record. */
export type DecisionKind = Lowercase<keyof typeof pb.DecisionKind>;

/** Every outcome, in the proto's order. */
export const OUTCOMES: readonly Outcome[] = enumNames(pb.Outcome).filter(
  (n): n is Outcome => n !== "unspecified",
);
/** Every reason, in the proto's order. */
export const REASONS: readonly Reason[] = enumNames(pb.Reason) as Reason[];

function enumNames(e: object): string[] {
  return Object.entries(e)
    .filter(([, v]) => typeof v === "number")
    .sort(([, a], [, b]) => (a as number) - (b as number))
    .map(([k]) => k.toLowerCase());
}

/** The lowercase name of an enum number; undefined when the enum lacks it. */
function nameOf(e: object, n: number): string | undefined {
  const name = (e as Record<number, string | undefined>)[n];
  return typeof name === "string" ? name.toLowerCase() : undefined;
}

/** The outcome of a wire value, or undefined for UNSPECIFIED and unknown values. */
export function outcomeOf(n: pb.Outcome): Outcome | undefined {
  const name = nameOf(pb.Outcome, n);
  return name === undefined || name === "unspecified" ? undefined : (name as Outcome);
}

export function reasonOf(n: pb.Reason): Reason {
  return (nameOf(pb.Reason, n) ?? "unspecified") as Reason;
}

export function kindOf(n: pb.DecisionKind): DecisionKind {
  return (nameOf(pb.DecisionKind, n) ?? "unspecified") as DecisionKind;
}

/** One speaker's words as the guard assembled them. */
export interface Turn {
  speaker: string;
  text: string;
  /** Audio time, ms since the call started; 0 when the events had none. */
  startMs: number;
  endMs: number;
  firstSeq: number;
  lastSeq: number;
  lang: string;
  responseId: string;
  interrupted: boolean;
  receivedAt?: Date;
  /** The publisher of the turn's events, if named. */
  source: string;
}

/** One thing a rule found, or failed to find, in a turn. */
export interface Match {
  rule: string;
  pattern: string;
  text: string;
}

/** What a decision relied on. */
export interface Evidence {
  question?: Turn;
  questionSentence: string;
  answer?: Turn;
  matches: Match[];
  recentTurns: Turn[];
  lang: string;
  detail: string;
  /** The id of the guard's own question, when the question was one it issued. */
  guardQuestion?: string;
}

/**
 * The guard's own question, on a REFUSE a fresh question can mend: speak
 * `text` as the agent's turn (with `id` as its response id where the
 * pipeline can set one), wait for the caller's answer, and call the tool
 * again with the same arguments.
 */
export interface Ask {
  text: string;
  lang: string;
  id: string;
  expiresAt?: Date;
}

/** The guard's answer to a Check. */
export interface CheckResult {
  decisionId: string;
  outcome: Outcome;
  reason: Reason;
  /** For the model: what to do next. */
  message: string;
  /** DUPLICATE and IGNORED: the decision this one repeats. */
  originalDecisionId?: string;
  /** DUPLICATE: the result Complete reported for the original, once known. */
  originalResult?: JsonObject;
  /** DUPLICATE: the original has not completed yet; wait, do not say it is done. */
  originalRunning: boolean;
  /** How long the guard waited for the caller's turn. */
  waitedMs: number;
  /** ALLOW: the signed approval a system of record redeems. */
  approval?: string;
  approvalExpiresAt?: Date;
  /** The short evidence, always set where known. */
  questionSentence: string;
  answerText: string;
  detail: string;
  /** REFUSE: the guard's own question, when asking again can mend it. */
  ask?: Ask;
  /** The full evidence, when the request set includeEvidence (some guards always send it). */
  evidence?: Evidence;
}

/** The guard's answer to a Redeem. */
export interface RedeemResult {
  decisionId: string;
  /** "allow": execute the action now, once. "refuse": do not. */
  outcome: Outcome;
  reason: Reason;
  message: string;
  allowedDecisionId?: string;
  callId?: string;
  tool?: string;
  argsHash?: string;
  expiresAt?: Date;
  /**
   * "redeemed": the redeemer's secret. Only complete({ failed: true, receipt })
   * releases the approval for a retry; keep it with the action.
   */
  receipt?: string;
}

/** One decision record: a Check, a Redeem or a Complete. */
export interface Decision {
  decisionId: string;
  time?: Date;
  callId: string;
  tool: string;
  toolCallId: string;
  responseId: string;
  argsHash: string;
  /** UNSPECIFIED outcomes (Complete records) read as undefined. */
  outcome?: Outcome;
  reason: Reason;
  message: string;
  evidence?: Evidence;
  waitedMs: number;
  policyVersion: string;
  originalDecisionId?: string;
  /** The arguments as the guard recorded them (canonical JSON, parsed). */
  args?: JsonObject;
  /** The canonical JSON text itself (subject to the guard's redaction). */
  argsJson: string;
  kind: DecisionKind;
  approvalKeyId?: string;
  approvalExpiresAt?: Date;
  replica?: string;
  /** Complete: the reported result (canonical JSON, parsed). */
  result?: JsonObject;
  resultJson: string;
}

/** One page of a call's records. */
export interface DecisionPage {
  decisions: Decision[];
  /** Set when more records follow: pass it as pageToken. */
  nextPageToken?: string;
  /** With includeTranscript: the call's turns, oldest first. */
  transcript: Turn[];
}

const date = (t: Timestamp | undefined): Date | undefined => (t ? timestampDate(t) : undefined);
const opt = (s: string): string | undefined => (s === "" ? undefined : s);

export function turnOf(t: pb.Turn): Turn {
  return {
    speaker: t.speaker,
    text: t.text,
    startMs: Number(t.startMs),
    endMs: Number(t.endMs),
    firstSeq: Number(t.firstSeq),
    lastSeq: Number(t.lastSeq),
    lang: t.lang,
    responseId: t.responseId,
    interrupted: t.interrupted,
    receivedAt: date(t.receivedAt),
    source: t.source,
  };
}

export function evidenceOf(e: pb.Evidence | undefined): Evidence | undefined {
  if (!e) return undefined;
  return {
    question: e.question && turnOf(e.question),
    questionSentence: e.questionSentence,
    answer: e.answer && turnOf(e.answer),
    matches: e.matches.map((m) => ({ rule: m.rule, pattern: m.pattern, text: m.text })),
    recentTurns: e.recentTurns.map(turnOf),
    lang: e.lang,
    detail: e.detail,
    guardQuestion: e.guardQuestion || undefined,
  };
}

export function decisionOf(d: pb.Decision): Decision {
  return {
    decisionId: d.decisionId,
    time: date(d.time),
    callId: d.callId,
    tool: d.tool,
    toolCallId: d.toolCallId,
    responseId: d.responseId,
    argsHash: d.argsHash,
    outcome: outcomeOf(d.outcome),
    reason: reasonOf(d.reason),
    message: d.message,
    evidence: evidenceOf(d.evidence),
    waitedMs: Number(d.waitedMs),
    policyVersion: d.policyVersion,
    originalDecisionId: opt(d.originalDecisionId),
    args: parseJsonObject(d.args),
    argsJson: d.args,
    kind: kindOf(d.kind),
    approvalKeyId: opt(d.approvalKeyId),
    approvalExpiresAt: date(d.approvalExpiresAt),
    replica: opt(d.replica),
    result: parseJsonObject(d.result),
    resultJson: d.result,
  };
}

export { date as timestampToDate, opt as nonEmpty };
