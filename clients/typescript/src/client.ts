// The gRPC client of yesguard.v1.Guard over Connect's gRPC transport for
// Node (HTTP/2), with the standard health service for warm-up.
//
// Rules that hold:
// - Every call has a deadline: the per-call timeoutMs, else the client's
//   default for that method. Nothing waits unbounded.
// - Nothing a value JSON cannot carry is sent (see json.ts), and no unknown
//   option is ignored (see options.ts): both throw YesguardInputError
//   before the request leaves.
// - A bearer token is never sent in plaintext, except over loopback.
// - An answer the client cannot act on (no outcome, or one this client
//   does not know) throws YesguardProtocolError rather than being guessed
//   at: guardTool turns any throw into a refusal.

import { create } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { isIP } from "node:net";
import { Health, HealthCheckResponse_ServingStatus } from "./gen/grpc/health/v1/health_pb.js";
import * as pb from "./gen/yesguard/v1/guard_pb.js";
import { jsonObject, YesguardInputError } from "./json.js";
import { checkKeys, requireString } from "./options.js";
import {
  decisionOf,
  evidenceOf,
  nonEmpty,
  outcomeOf,
  reasonOf,
  timestampToDate,
  turnOf,
  type CheckResult,
  type DecisionPage,
  type RedeemResult,
} from "./records.js";

/** The gRPC service name whose health tracks the guard's transcript feed. */
export const GUARD_SERVICE = "yesguard.v1.Guard";

/** The guard answered something this client cannot act on. */
export class YesguardProtocolError extends Error {
  override name = "YesguardProtocolError";
}

/** TLS for the gRPC connection. PEM strings or Buffers. */
export interface TlsOptions {
  /** CA certificates to trust instead of the system's. */
  ca?: string | Buffer;
  /** Client certificate and key, for mutual TLS. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** The name to verify the server's certificate against (default: the host). */
  serverName?: string;
}

/** Per-method default deadlines, in ms. */
export interface Timeouts {
  check: number;
  complete: number;
  redeem: number;
  listDecisions: number;
  health: number;
}

export const DEFAULT_TIMEOUTS: Readonly<Timeouts> = {
  // The guard waits up to its policy's wait (900 ms by default) for the
  // caller's turn, never past this deadline: 2 s leaves it room to answer.
  check: 2000,
  complete: 2000,
  redeem: 2000,
  listDecisions: 5000,
  health: 2000,
};

export interface GuardClientOptions {
  /** "host:port" or an http:// / https:// URL. Default "127.0.0.1:50051". */
  address?: string;
  /** true (system CAs) or TLS options; an https:// address implies true. */
  tls?: boolean | TlsOptions;
  /** Sent as `authorization: Bearer <token>` on every call. */
  token?: string;
  /** Default deadlines per method, in ms. */
  timeouts?: Partial<Timeouts>;
  /**
   * HTTP/2 connection upkeep. A connection idle for pingIntervalMs is
   * verified with one PING before the next call (and replaced if the PING
   * is not answered within pingTimeoutMs); an idle connection is closed
   * after idleConnectionTimeoutMs. Defaults 30 s, 1 s and 1 h.
   */
  keepalive?: { pingIntervalMs?: number; pingTimeoutMs?: number; idleConnectionTimeoutMs?: number };
  /** Connect interceptors, run on every call (tracing, logging). */
  interceptors?: Interceptor[];
}

/** Per-call options. */
export interface CallOptions {
  /** The deadline of this call, in ms. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface CheckInput extends CallOptions {
  /** The call: the last token of its transcript subject. */
  callId: string;
  /** The tool's name as the model called it. */
  tool: string;
  /** The model's arguments: a plain JSON object. */
  args?: JsonObject;
  /** The model response that made this call (filler speech carrying it is not "the agent spoke after"). */
  responseId?: string;
  /** Audio time (ms since the call started) at which the caller turn the model answers ended. */
  respondingToMs?: number;
  /** The model's own id for the call; logged. */
  toolCallId?: string;
  /** Return the full evidence in the answer. */
  includeEvidence?: boolean;
  /**
   * How long the guard may wait for the caller's turn, in ms, instead of
   * the tool's policy `wait`; the guard caps it at the policy's `max_wait`.
   * When set and timeoutMs is not, the deadline is at least waitMs + 1 s.
   */
  waitMs?: number;
}

export interface CompleteInput extends CallOptions {
  /** The decision id of an ALLOW. */
  decisionId: string;
  /** The tool's result, replayed to duplicates: a plain JSON object. */
  result?: JsonObject;
  /** The tool failed: the reservation is released so a retry is judged afresh. */
  failed?: boolean;
  /** The ALLOW's approval, when a system of record reports the result. */
  approval?: string;
  /**
   * The receipt of the Redeem that redeemed the approval (RedeemResult.receipt).
   * Once an approval is redeemed, only a failure that carries it releases
   * the approval; without it the guard refuses the failure (FAILED_PRECONDITION).
   */
  receipt?: string;
}

export interface RedeemInput extends CallOptions {
  /** The approval of an ALLOW (CheckResult.approval). */
  approval: string;
  /** The arguments about to be executed; they must hash as the approved ones. */
  args?: JsonObject;
  /** The tool about to be executed; when set it must equal the approved one. */
  tool?: string;
  /** The call the backend acts for, when it knows it; when set it must equal the approved one. */
  callId?: string;
}

export interface ListDecisionsInput extends CallOptions {
  callId: string;
  /** At most this many records (the guard's default and maximum: 1000). */
  pageSize?: number;
  pageToken?: string;
  /** Also return the call's transcript as the guard holds it. */
  includeTranscript?: boolean;
}

/** The health of one service as the gRPC health protocol reports it. */
export type ServingStatus = "unknown" | "serving" | "not_serving" | "service_unknown";

const call = { timeoutMs: "integer", signal: "any" } as const;

export class GuardClient {
  readonly address: string;
  private readonly guard: Client<typeof pb.Guard>;
  private readonly health: Client<typeof Health>;
  private readonly session: Http2SessionManager;
  private readonly timeouts: Timeouts;

  constructor(options: GuardClientOptions = {}) {
    checkKeys(options, { address: "string", tls: "any", token: "string", timeouts: "any", keepalive: "any", interceptors: "any" }, "GuardClient options");
    const timeouts = options.timeouts ?? {};
    checkKeys(timeouts, { check: "integer", complete: "integer", redeem: "integer", listDecisions: "integer", health: "integer" }, "GuardClient options.timeouts");
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...dropUndefined(timeouts) };
    const keepalive = options.keepalive ?? {};
    checkKeys(keepalive, { pingIntervalMs: "integer", pingTimeoutMs: "integer", idleConnectionTimeoutMs: "integer" }, "GuardClient options.keepalive");

    const { url, tls } = resolveAddress(options.address ?? "127.0.0.1:50051", options.tls);
    this.address = url.href;
    const interceptors = [...(options.interceptors ?? [])];
    if (options.token !== undefined) {
      interceptors.unshift(bearer(options.token, url, tls !== undefined));
    }
    this.session = new Http2SessionManager(
      url,
      {
        pingIntervalMs: keepalive.pingIntervalMs ?? 30_000,
        pingTimeoutMs: keepalive.pingTimeoutMs ?? 1_000,
        idleConnectionTimeoutMs: keepalive.idleConnectionTimeoutMs ?? 3_600_000,
      },
      tls,
    );
    const transport = createGrpcTransport({ baseUrl: url.href, sessionManager: this.session, interceptors });
    this.guard = createClient(pb.Guard, transport);
    this.health = createClient(Health, transport);
  }

  /**
   * Opens the connection and checks the guard's health, so that the first
   * Check does not pay for the connection. Retries (the guard may still be
   * starting, or catching up with its transcript feed) until the guard's
   * service is SERVING or timeoutMs (default 5 s) runs out, then throws
   * with the last status or error.
   */
  async warmup(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    checkKeys(opts, call, "warmup");
    const deadline = Date.now() + (opts.timeoutMs ?? 5000);
    let last = "no answer";
    for (let pause = 50; ; pause = Math.min(pause * 2, 1000)) {
      try {
        const status = await this.healthStatus({ timeoutMs: Math.max(1, Math.min(this.timeouts.health, deadline - Date.now())), signal: opts.signal });
        if (status === "serving") return;
        last = `${GUARD_SERVICE} is ${status}`;
      } catch (err) {
        const ce = ConnectError.from(err);
        // The guard runs but has no such service, or no health service:
        // waiting will not change that.
        if (ce.code === Code.NotFound || ce.code === Code.Unimplemented || opts.signal?.aborted) throw err;
        last = ce.message;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new ConnectError(`yesguard at ${this.address} not ready after ${opts.timeoutMs ?? 5000} ms: ${last}`, Code.Unavailable);
      }
      await new Promise((r) => setTimeout(r, Math.min(pause, left)));
    }
  }

  /** The health of a service (default: the Guard service) by the gRPC health protocol. */
  async healthStatus(opts: CallOptions & { service?: string } = {}): Promise<ServingStatus> {
    checkKeys(opts, { ...call, service: "string" }, "healthStatus");
    const resp = await this.health.check(
      { service: opts.service ?? GUARD_SERVICE },
      { timeoutMs: opts.timeoutMs ?? this.timeouts.health, signal: opts.signal },
    );
    const name = HealthCheckResponse_ServingStatus[resp.status];
    return (name ?? "UNKNOWN").toLowerCase() as ServingStatus;
  }

  /**
   * Asks the guard whether a tool call rests on a plain yes the caller
   * gave. Resolves with the decision whatever it is; rejects with a
   * ConnectError when the guard cannot be asked (InvalidArgument names the
   * field), YesguardInputError for bad input.
   */
  async check(input: CheckInput): Promise<CheckResult> {
    checkKeys(input, { ...call, callId: "string", tool: "string", args: "any", responseId: "string", respondingToMs: "integer", toolCallId: "string", includeEvidence: "boolean", waitMs: "integer" }, "check");
    const req = create(pb.CheckRequestSchema, {
      callId: requireString(input.callId, "check.callId"),
      tool: requireString(input.tool, "check.tool"),
      args: input.args === undefined ? undefined : jsonObject(input.args, "args"),
      responseId: input.responseId ?? "",
      respondingToMs: BigInt(input.respondingToMs ?? 0),
      toolCallId: input.toolCallId ?? "",
      includeEvidence: input.includeEvidence ?? false,
      waitMs: BigInt(input.waitMs ?? 0),
    });
    let timeoutMs = input.timeoutMs;
    if (timeoutMs === undefined) {
      timeoutMs = Math.max(this.timeouts.check, (input.waitMs ?? 0) + 1000);
    }
    const r = await this.guard.check(req, { timeoutMs, signal: input.signal });
    const outcome = outcomeOf(r.outcome);
    if (outcome === undefined) {
      throw new YesguardProtocolError(
        `the guard answered outcome ${r.outcome} (${pb.Outcome[r.outcome] ?? "unknown to this client"}) for decision ${r.decisionId || "(none)"}: not acted on`,
      );
    }
    return {
      decisionId: r.decisionId,
      outcome,
      reason: reasonOf(r.reason),
      message: r.message,
      originalDecisionId: nonEmpty(r.originalDecisionId),
      originalResult: r.originalResult,
      originalRunning: r.originalRunning,
      waitedMs: Number(r.waitedMs),
      approval: nonEmpty(r.approval),
      approvalExpiresAt: timestampToDate(r.approvalExpiresAt),
      questionSentence: r.questionSentence,
      answerText: r.answerText,
      detail: r.detail,
      ask: r.ask && r.ask.text ? { text: r.ask.text, lang: r.ask.lang, id: r.ask.id, expiresAt: timestampToDate(r.ask.expiresAt) } : undefined,
      evidence: evidenceOf(r.evidence),
    };
  }

  /**
   * Reports the result of an allowed call, so that a duplicate gets it
   * instead of running the tool again; with failed, releases the
   * reservation. Resolves with the id of the Complete's own record (empty
   * when the guard keeps none).
   */
  async complete(input: CompleteInput): Promise<{ decisionId: string }> {
    checkKeys(input, { ...call, decisionId: "string", result: "any", failed: "boolean", approval: "string", receipt: "string" }, "complete");
    const r = await this.guard.complete(
      {
        decisionId: requireString(input.decisionId, "complete.decisionId"),
        result: input.result === undefined ? undefined : jsonObject(input.result, "result"),
        failed: input.failed ?? false,
        approval: input.approval ?? "",
        receipt: input.receipt ?? "",
      },
      { timeoutMs: input.timeoutMs ?? this.timeouts.complete, signal: input.signal },
    );
    return { decisionId: r.decisionId };
  }

  /**
   * For the system of record: verifies an ALLOW's approval against the
   * arguments about to be executed and claims the action once.
   */
  async redeem(input: RedeemInput): Promise<RedeemResult> {
    checkKeys(input, { ...call, approval: "string", args: "any", tool: "string", callId: "string" }, "redeem");
    const r = await this.guard.redeem(
      {
        approval: requireString(input.approval, "redeem.approval"),
        args: input.args === undefined ? undefined : jsonObject(input.args, "args"),
        tool: input.tool ?? "",
        callId: input.callId ?? "",
      },
      { timeoutMs: input.timeoutMs ?? this.timeouts.redeem, signal: input.signal },
    );
    const outcome = outcomeOf(r.outcome);
    if (outcome === undefined) {
      throw new YesguardProtocolError(`the guard answered Redeem with outcome ${r.outcome}: not acted on`);
    }
    return {
      decisionId: r.decisionId,
      outcome,
      reason: reasonOf(r.reason),
      message: r.message,
      allowedDecisionId: nonEmpty(r.allowedDecisionId),
      callId: nonEmpty(r.callId),
      tool: nonEmpty(r.tool),
      argsHash: nonEmpty(r.argsHash),
      expiresAt: timestampToDate(r.expiresAt),
      receipt: nonEmpty(r.receipt),
    };
  }

  /** One page of a call's decision records, oldest first. */
  async listDecisions(input: ListDecisionsInput): Promise<DecisionPage> {
    checkKeys(input, { ...call, callId: "string", pageSize: "integer", pageToken: "string", includeTranscript: "boolean" }, "listDecisions");
    const r = await this.guard.listDecisions(
      {
        callId: requireString(input.callId, "listDecisions.callId"),
        pageSize: input.pageSize ?? 0,
        pageToken: input.pageToken ?? "",
        includeTranscript: input.includeTranscript ?? false,
      },
      { timeoutMs: input.timeoutMs ?? this.timeouts.listDecisions, signal: input.signal },
    );
    return {
      decisions: r.decisions.map(decisionOf),
      nextPageToken: nonEmpty(r.nextPageToken),
      transcript: r.transcript.map(turnOf),
    };
  }

  /** Closes the connection. Calls made afterwards open a new one. */
  close(): void {
    this.session.abort();
  }
}

function dropUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The URL to dial and the TLS options of the http2 session (undefined: plaintext). */
function resolveAddress(address: string, tlsOpt: boolean | TlsOptions | undefined): { url: URL; tls?: import("node:http2").SecureClientSessionOptions } {
  let url: URL;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(address)) {
    url = new URL(address);
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new YesguardInputError(`address ${JSON.stringify(address)}: want host:port, http:// or https://`);
    }
    if (url.protocol === "http:" && tlsOpt) {
      throw new YesguardInputError(`address ${JSON.stringify(address)} is http:// but tls is set: use https:// or host:port`);
    }
  } else {
    url = new URL(`${tlsOpt ? "https" : "http"}://${address}`);
  }
  if (url.pathname !== "/" || url.search !== "" || url.username !== "" || url.password !== "") {
    throw new YesguardInputError(`address ${JSON.stringify(address)}: want only a scheme, host and port`);
  }
  if (url.protocol === "http:") {
    return { url };
  }
  const t = typeof tlsOpt === "object" ? tlsOpt : {};
  checkKeys(t, { ca: "any", cert: "any", key: "any", serverName: "string" }, "GuardClient options.tls");
  if ((t.cert === undefined) !== (t.key === undefined)) {
    throw new YesguardInputError("GuardClient options.tls: cert and key go together (mutual TLS needs both)");
  }
  return { url, tls: { ca: t.ca, cert: t.cert, key: t.key, servername: t.serverName } };
}

/** An interceptor that sends the bearer token, refusing plaintext except over loopback. */
function bearer(token: string, url: URL, tls: boolean): Interceptor {
  if (token === "" || /\s/.test(token)) {
    throw new YesguardInputError("GuardClient options.token: want a non-empty token without whitespace");
  }
  if (!tls && !isLoopback(url.hostname)) {
    throw new YesguardInputError(
      `GuardClient: refusing to send a bearer token in plaintext to ${url.host}: set tls (or an https:// address), or connect over loopback`,
    );
  }
  const value = `Bearer ${token}`;
  return (next) => (req) => {
    req.header.set("authorization", value);
    return next(req);
  };
}

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  if (h === "localhost" || h === "::1") return true;
  return isIP(h) === 4 && h.startsWith("127.");
}
