// GuardClient against a real guard: warm-up, deadlines, plain-object args
// round-tripping into the decision record, a race, a duplicate with its
// original result, an approval verified and redeemed, and input the client
// must refuse before sending.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, createPublicKey, verify, type JsonWebKey } from "node:crypto";
import { createServer } from "node:net";
import type { Interceptor, UnaryRequest } from "@connectrpc/connect";
import type { RunningGuard } from "../src/testing.js";
import { QUESTION, suiteGuard } from "./fixtures.js";
import { Code, ConnectError, GuardClient, YesguardInputError, jsonObject, type CheckResult, type TranscriptPublisher } from "../src/index.js";
import type { CheckRequest } from "../src/gen/yesguard/v1/guard_pb.js";

const TOOL = "submit_appeal";

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** An interceptor that keeps every request it sees. */
function recorder(): { seen: UnaryRequest[]; interceptor: Interceptor } {
  const seen: UnaryRequest[] = [];
  return {
    seen,
    interceptor: (next) => (req) => {
      if (!req.stream) seen.push(req);
      return next(req);
    },
  };
}

describe("GuardClient", () => {
  let g: RunningGuard;
  let guard: GuardClient;
  let pub: TranscriptPublisher;
  suiteGuard("client-test", (s) => ({ g, guard, pub } = s));

  /** Asks the question, starts the Check, then answers once the guard holds it. */
  function raced(call: string, args: Record<string, unknown>, answer = "Yes."): Promise<CheckResult> {
    return g.race({
      setup: () => pub.agent(call, QUESTION),
      events: 1,
      call: () => guard.check({ callId: call, tool: TOOL, args: jsonObject(args, "args"), includeEvidence: true, timeoutMs: 10_000 }),
      answer: () => pub.caller(call, answer),
    });
  }

  test("warmup: the guard's service is serving", async () => {
    const c = g.client();
    await c.warmup();
    assert.equal(await c.healthStatus(), "serving");
    assert.equal(await c.healthStatus({ service: "" }), "serving", "the server as a whole");
  });

  test("warmup: an unreachable guard rejects once its time is up", async () => {
    const c = new GuardClient({ address: `127.0.0.1:${await closedPort()}` });
    try {
      await assert.rejects(c.warmup({ timeoutMs: 300 }), (err: unknown) => {
        assert.ok(err instanceof ConnectError);
        assert.equal(err.code, Code.Unavailable);
        assert.match(err.message, /not ready after 300 ms/);
        return true;
      });
    } finally {
      c.close();
    }
  });

  test("a race: the Check before the caller's transcript is allowed on the yes it waited for", async () => {
    const call = g.callId("race");
    const d = await raced(call, { appeal_id: "A-17" });
    assert.equal(d.outcome, "allow", `${d.reason}: ${d.detail}`);
    assert.equal(d.reason, "confirmed");
    assert.equal(d.evidence?.answer?.text, "Yes.");
    assert.equal(d.evidence?.answer?.speaker, "caller");
    assert.equal(d.evidence?.question?.text, QUESTION);
    assert.ok(d.waitedMs > 0, "the guard waited for the caller's turn");
    assert.match(d.decisionId, /^[0-9A-HJKMNP-TV-Z]{26}$/, "a ULID");
  });

  test("plain-object args round-trip into the decision record", async () => {
    const call = g.callId("args");
    const args = {
      appeal_id: "A-17",
      amount: 120.5,
      count: 3,
      urgent: true,
      note: null,
      tags: ["billing", "ünïcödé ✓"],
      contact: { email: "a@example.com", prefs: { sms: false } },
    };
    const d = await raced(call, args);
    assert.equal(d.outcome, "allow", `${d.reason}: ${d.detail}`);
    const [rec] = (await guard.listDecisions({ callId: call })).decisions;
    assert.ok(rec);
    assert.deepEqual(rec.args, args, "the record's args are what was sent, not {}");
    assert.equal(rec.kind === "check" || rec.kind === "unspecified", true);
    assert.match(rec.argsHash, /^[0-9a-f]{64}$/);

    // The trap of args sent as {}: a different action would come back
    // DUPLICATE of the first. With real args it is a new action.
    const other = await guard.check({ callId: call, tool: TOOL, args: { ...args, appeal_id: "B-99" } });
    assert.notEqual(other.outcome, "duplicate", "a different action is not a duplicate");
    assert.notEqual(other.outcome, "allow", "and the caller's one yes does not allow it");
  });

  test("a duplicate gets the original's result, as plain JSON", async () => {
    const call = g.callId("dup");
    const args = { appeal_id: "A-17" };
    const d = await raced(call, args);
    assert.equal(d.outcome, "allow", `${d.reason}: ${d.detail}`);
    const result = { status: "submitted", reference: "R-1", fees: [0, 12.5], detail: { queue: "fast", eta_days: 3 } };
    await guard.complete({ decisionId: d.decisionId, result });
    const dup = await guard.check({ callId: call, tool: TOOL, args });
    assert.equal(dup.outcome, "duplicate");
    assert.equal(dup.reason, "duplicate");
    assert.equal(dup.originalDecisionId, d.decisionId);
    assert.equal(dup.originalRunning, false);
    assert.deepEqual(dup.originalResult, result);
  });

  test("complete: errors name the decision", async () => {
    await assert.rejects(guard.complete({ decisionId: "01NOTAREALDECISION0000000" }), (err: unknown) => {
      assert.ok(err instanceof ConnectError);
      assert.equal(err.code, Code.NotFound);
      assert.match(err.message, /01NOTAREALDECISION0000000/);
      return true;
    });
  });

  test("Redeem: an ALLOW's approval verifies with the JWKS and redeems once, for its own action", async () => {
    const args = { appeal_id: "A-17" };
    const call = g.callId("redeem");
    const d = await raced(call, args);
    assert.equal(d.outcome, "allow", `${d.reason}: ${d.detail}`);
    assert.ok(d.approval, "an ALLOW carries its approval");
    assert.match(d.approval, /^[\w-]+\.[\w-]+\.[\w-]+$/, "a compact JWS");
    assert.ok(d.approvalExpiresAt && d.approvalExpiresAt.getTime() > Date.now(), "an expiry ahead");

    // A backend in another language checks it offline: Ed25519 over the
    // first two parts, with the key the JWKS names; the claims bind the
    // decision, the call, the tool and the canonical arguments' hash.
    const [head, payload, sig] = d.approval.split(".") as [string, string, string];
    const header = JSON.parse(Buffer.from(head, "base64url").toString()) as { alg: string; kid: string; typ: string };
    assert.deepEqual([header.alg, header.typ], ["EdDSA", "yesguard-approval+jwt"]);
    const jwks = (await (await fetch(`http://${g.http}/.well-known/jwks.json`)).json()) as { keys: JsonWebKey[] };
    const jwk = jwks.keys.find((k) => k.kid === header.kid);
    assert.ok(jwk, `the JWKS holds the key ${header.kid}`);
    const key = createPublicKey({ key: jwk, format: "jwk" });
    assert.ok(verify(null, Buffer.from(`${head}.${payload}`), key, Buffer.from(sig, "base64url")), "the signature verifies with the JWKS key");
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString()) as Record<string, unknown>;
    assert.equal(claims.jti, d.decisionId);
    assert.equal(claims.call_id, call);
    assert.equal(claims.tool, TOOL);
    assert.equal(claims.args_sha256, createHash("sha256").update(JSON.stringify(args)).digest("hex"));

    const first = await guard.redeem({ approval: d.approval, args, tool: TOOL, callId: call });
    assert.equal(first.outcome, "allow", `${first.reason}: ${first.message}`);
    assert.equal(first.reason, "redeemed");
    assert.equal(first.allowedDecisionId, d.decisionId);
    assert.equal(first.callId, call);
    assert.equal(first.tool, TOOL);
    const second = await guard.redeem({ approval: d.approval, args, tool: TOOL });
    assert.equal(second.outcome, "refuse");
    assert.equal(second.reason, "already_redeemed");
    assert.ok(second.message.length > 0);

    // The action failed: the approval alone (the pipeline holds it too)
    // does not release it; the redeemer's receipt does, and a retry
    // redeems again; once it succeeds, never again.
    assert.ok(first.receipt, "a REDEEMED answer carries its receipt");
    assert.equal(second.receipt, undefined);
    await assert.rejects(guard.complete({ decisionId: d.decisionId, approval: d.approval, failed: true }), (err: unknown) => {
      assert.ok(err instanceof ConnectError, String(err));
      assert.equal(err.code, Code.FailedPrecondition);
      assert.match(err.message, /receipt/);
      return true;
    });
    assert.equal((await guard.redeem({ approval: d.approval, args, tool: TOOL })).reason, "already_redeemed");
    await guard.complete({ decisionId: d.decisionId, approval: d.approval, receipt: first.receipt, failed: true });
    assert.equal((await guard.redeem({ approval: d.approval, args, tool: TOOL })).reason, "redeemed");
    await guard.complete({ decisionId: d.decisionId, approval: d.approval, result: { status: "submitted" } });
    assert.equal((await guard.redeem({ approval: d.approval, args, tool: TOOL })).reason, "already_redeemed");

    const other = await raced(g.callId("redeem-other"), args);
    assert.equal(other.outcome, "allow");
    const refused = async (input: Parameters<GuardClient["redeem"]>[0], reason: string) => {
      const r = await guard.redeem(input);
      assert.equal(r.outcome, "refuse", `${JSON.stringify(input.args)}: ${r.reason}`);
      assert.equal(r.reason, reason);
    };
    await refused({ approval: other.approval!, args: { appeal_id: "B-99" } }, "approval_mismatch");
    await refused({ approval: other.approval!, args, callId: call }, "approval_mismatch");
    await refused({ approval: other.approval!, args, tool: "pay_bill" }, "approval_mismatch");
    const [oh, op, os] = other.approval!.split(".") as [string, string, string];
    const flip = (part: string) => `${part.startsWith("A") ? "B" : "A"}${part.slice(1)}`;
    await refused({ approval: `${oh}.${op}.${flip(os)}`, args }, "approval_invalid");
    await refused({ approval: `${oh}.${flip(op)}.${os}`, args }, "approval_invalid");
    // None of those spent it.
    assert.equal((await guard.redeem({ approval: other.approval!, args })).reason, "redeemed");

    const page = await guard.listDecisions({ callId: call });
    const life = page.decisions.filter((r) => r.decisionId === d.decisionId || r.originalDecisionId === d.decisionId).map((r) => `${r.kind} ${r.reason}`);
    assert.deepEqual(life, ["check confirmed", "redeem redeemed", "redeem already_redeemed", "complete already_redeemed", "redeem already_redeemed", "complete failed", "redeem redeemed", "complete completed", "redeem already_redeemed"]);
  });

  test("InvalidArgument names the field", async () => {
    await assert.rejects(guard.check({ callId: "has space", tool: TOOL }), (err: unknown) => {
      assert.ok(err instanceof ConnectError, String(err));
      assert.equal(err.code, Code.InvalidArgument);
      assert.match(err.message, /call_id/);
      return true;
    });
  });

  test("deadlines: the per-call timeout and the defaults are sent as grpc-timeout", async () => {
    const rec = recorder();
    const c = g.client({ interceptors: [rec.interceptor], timeouts: { check: 2500 } });
    const call = g.callId("deadline");
    await assert.rejects(c.check({ callId: call, tool: TOOL, timeoutMs: 1 }), (err: unknown) => {
      assert.ok(err instanceof ConnectError);
      assert.equal(err.code, Code.DeadlineExceeded);
      return true;
    });
    await c.check({ callId: call, tool: TOOL });
    await c.listDecisions({ callId: call });
    assert.deepEqual(
      rec.seen.map((r) => [r.method.name, r.header.get("grpc-timeout")]),
      [
        ["Check", "1m"],
        ["Check", "2500m"],
        ["ListDecisions", "5000m"],
      ],
    );
  });

  test("wait_ms is sent, and the default deadline makes room for it", async () => {
    const rec = recorder();
    const c = g.client({ interceptors: [rec.interceptor] });
    const call = g.callId("wait-ms");
    const d = await c.check({ callId: call, tool: TOOL, waitMs: 300 });
    const req = rec.seen[0]!.message as CheckRequest;
    assert.equal(req.waitMs, 300n);
    assert.equal(rec.seen[0]!.header.get("grpc-timeout"), "2000m", "max(check default 2000, wait 300 + 1000)");
    await assert.rejects(c.check({ callId: call, tool: TOOL, waitMs: 1500, timeoutMs: 1 }));
    assert.equal(rec.seen[1]!.header.get("grpc-timeout"), "1m", "an explicit timeout wins");
    assert.equal(d.outcome, "refuse", "an unknown call");
  });

  test("the bearer token is sent on every call", async () => {
    const rec = recorder();
    const c = g.client({ token: "s3cr3t-token", interceptors: [rec.interceptor] });
    // The interceptor runs after the token's: it sees the header as sent.
    await c.check({ callId: g.callId("token"), tool: TOOL, timeoutMs: 3000 });
    assert.equal(rec.seen[0]!.header.get("authorization"), "Bearer s3cr3t-token");
  });
});

describe("GuardClient input, refused before anything is sent", () => {
  // Nothing listens here: a request that left would fail Unavailable, so a
  // YesguardInputError proves the client refused it first.
  let c: GuardClient;
  before(async () => {
    c = new GuardClient({ address: `127.0.0.1:${await closedPort()}` });
  });
  after(() => c.close());

  class Appeal {
    id = "A-17";
  }
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const bad: Array<[string, unknown, RegExp]> = [
    ["undefined", { appeal_id: undefined }, /args\.appeal_id: undefined is not JSON/],
    ["a function", { cb: () => 1 }, /args\.cb: a function is not JSON/],
    ["a Date", { when: new Date(0) }, /args\.when: a Date is not JSON; pass an ISO string/],
    ["a bigint", { n: 10n }, /args\.n: a bigint is not JSON/],
    ["NaN", { n: NaN }, /args\.n: NaN is not a JSON number/],
    ["Infinity", { n: Infinity }, /args\.n: Infinity is not a JSON number/],
    ["a Map", { m: new Map() }, /args\.m: a Map is not JSON/],
    ["a class instance", { a: new Appeal() }, /args\.a: a Appeal is not JSON; pass a plain object/],
    ["a Buffer", { b: Buffer.from("x") }, /args\.b: a Buffer is not JSON; pass a base64 string/],
    ["a hole", { list: [1, , 3] }, /args\.list\[1\]: undefined is not JSON/],
    ["undefined deep down", { a: { b: [{ c: undefined }] } }, /args\.a\.b\[0\]\.c: undefined/],
    ["a cycle", cyclic, /args\.self: a cycle is not JSON/],
    ["an array", [1, 2], /args: want a plain JSON object, got an array/],
    ["a string", "A-17", /args: want a plain JSON object, got a string/],
  ];
  for (const [name, args, want] of bad) {
    test(`args with ${name}`, async () => {
      await assert.rejects(c.check({ callId: "c1", tool: TOOL, args: args as never }), (err: unknown) => {
        assert.ok(err instanceof YesguardInputError, `got ${String(err)}`);
        assert.match(err.message, want);
        return true;
      });
    });
  }

  test("a result JSON cannot carry", async () => {
    await assert.rejects(c.complete({ decisionId: "d1", result: { at: new Date() } as never }), /result\.at: a Date is not JSON/);
  });

  test("snake_case options get a camelCase hint", async () => {
    await assert.rejects(
      c.check({ call_id: "c1", tool: TOOL } as never),
      /check: unknown option "call_id"; use callId \(the TypeScript API is camelCase, the wire is snake_case\)/,
    );
    await assert.rejects(c.check({ callId: "c1", tool: TOOL, wait_ms: 100 } as never), /use waitMs/);
  });

  test("required fields and option types", async () => {
    await assert.rejects(c.check({ callId: "", tool: TOOL }), /check\.callId: required/);
    await assert.rejects(c.check({ callId: "c1", tool: TOOL, waitMs: -5 }), /check\.waitMs: want a non-negative integer, got -5/);
    await assert.rejects(c.check({ callId: "c1", tool: TOOL, includeEvidence: "yes" as never }), /includeEvidence: want a boolean/);
  });

  test("a token is never sent in plaintext except over loopback", () => {
    assert.throws(() => new GuardClient({ address: "guard.internal:50051", token: "t" }), /refusing to send a bearer token in plaintext to guard.internal:50051/);
    assert.doesNotThrow(() => new GuardClient({ address: "guard.internal:50051", token: "t", tls: true }).close());
    assert.doesNotThrow(() => new GuardClient({ address: "https://guard.internal:50051", token: "t" }).close());
    assert.doesNotThrow(() => new GuardClient({ address: "localhost:50051", token: "t" }).close());
    assert.doesNotThrow(() => new GuardClient({ address: "[::1]:50051", token: "t" }).close());
    assert.throws(() => new GuardClient({ address: "127.0.0.1:1", token: "two words" }), /without whitespace/);
    assert.throws(() => new GuardClient({ address: "http://g:1", tls: true }), /is http:\/\/ but tls is set/);
  });
});
