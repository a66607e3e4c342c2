// guardTool against a real guard: the tool runs only on ALLOW, its result
// is what a duplicate gets back, a throw is reported failed and rethrown,
// and a guard that cannot be asked keeps the tool from running.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { RunningGuard } from "../src/testing.js";
import { QUESTION, suiteGuard } from "./fixtures.js";
import { GuardClient, guardTool, UNAVAILABLE_MESSAGE, YesguardInputError, type CheckResult, type GuardCallContext, type TranscriptPublisher } from "../src/index.js";

type Args = { appeal_id: string };
type Result = { status: string; reference: string };

describe("guardTool", () => {
  let g: RunningGuard;
  let guard: GuardClient;
  let pub: TranscriptPublisher;
  suiteGuard("guard-tool-test", (s) => ({ g, guard, pub } = s));

  /** A submit_appeal tool that counts its runs, and its guarded form. */
  function tool(behaviour: (args: Args) => Promise<Result> | Result = (a) => ({ status: "submitted", reference: `R-${a.appeal_id}` })) {
    const runs: Args[] = [];
    const decisions: CheckResult[] = [];
    const guarded = guardTool(
      async (args: Args) => {
        runs.push(args);
        return behaviour(args);
      },
      { guard, tool: "submit_appeal", timeoutMs: 10_000, onDecision: (d) => decisions.push(d) },
    );
    return { runs, decisions, guarded };
  }

  /** The agent asks; the tool is called; the caller answers once the guard holds the Check. */
  function askAndCall<T>(call: string, answer: string, invoke: () => Promise<T>): Promise<T> {
    return g.race({ setup: () => pub.agent(call, QUESTION), events: 1, call: invoke, answer: () => pub.caller(call, answer) });
  }

  test("ALLOW runs the tool once and a duplicate gets its result back", async () => {
    const t = tool();
    const call = g.callId("allow");
    const ctx: GuardCallContext = { callId: call, responseId: "resp-1", toolCallId: "tc-1" };
    const out = await askAndCall(call, "Yes.", () => t.guarded({ appeal_id: "A-17" }, ctx));
    assert.deepEqual(out, { status: "submitted", reference: "R-A-17" });
    assert.equal(t.runs.length, 1);
    assert.equal(t.decisions[0]?.outcome, "allow");

    // The model calls again (a retry, or a second yes): not run again.
    const again = await t.guarded({ appeal_id: "A-17" }, { callId: call });
    assert.deepEqual(again, out, "the original's result, as Complete reported it");
    assert.equal(t.runs.length, 1, "the tool did not run twice");
    assert.equal(t.decisions[1]?.outcome, "duplicate");

    const [check] = (await guard.listDecisions({ callId: call })).decisions;
    assert.equal(check?.responseId, "resp-1");
    assert.equal(check?.toolCallId, "tc-1");
  });

  test("REFUSE does not run the tool and returns the guard's message", async () => {
    const t = tool();
    const call = g.callId("refuse");
    const out = await askAndCall(call, "Yes. Wait, no.", () => t.guarded({ appeal_id: "A-17" }, { callId: call }));
    assert.equal(t.runs.length, 0);
    assert.equal(t.decisions[0]?.outcome, "refuse");
    assert.equal(t.decisions[0]?.reason, "negated");
    assert.equal(out, t.decisions[0]?.message);
    assert.match(String(out), /Do not submit the appeal/);
  });

  test("a throwing tool is reported failed and rethrown; the retry is judged afresh", async () => {
    const t = tool(() => {
      throw new Error("backend down");
    });
    const call = g.callId("throw");
    await assert.rejects(askAndCall(call, "Yes.", () => t.guarded({ appeal_id: "A-17" }, { callId: call })), /backend down/);
    assert.equal(t.runs.length, 1);
    // Complete failed released the reservation: a retry is no DUPLICATE of
    // a failure, it is judged again (and may run).
    const ok = tool();
    const retry = await ok.guarded({ appeal_id: "A-17" }, { callId: call });
    assert.notEqual(ok.decisions[0]?.outcome, "duplicate");
    assert.equal(ok.decisions[0]?.outcome, "allow", `${ok.decisions[0]?.reason}`);
    assert.deepEqual(retry, { status: "submitted", reference: "R-A-17" });
  });

  test("a guard that cannot be asked keeps the tool from running", async () => {
    const down = new GuardClient({ address: "127.0.0.1:1" });
    try {
      const runs: unknown[] = [];
      const errors: unknown[] = [];
      const guarded = guardTool(
        async (a: Args) => {
          runs.push(a);
          return { status: "submitted" };
        },
        { guard: down, tool: "submit_appeal", callId: "c1", timeoutMs: 2000 },
      );
      assert.equal(await guarded({ appeal_id: "A-17" }), UNAVAILABLE_MESSAGE);
      const custom = guardTool(async (_: Args) => ({ status: "x" }), {
        guard: down,
        tool: "submit_appeal",
        callId: "c1",
        onError: (err) => {
          errors.push(err);
          return "custom";
        },
      });
      assert.equal(await custom({ appeal_id: "A-17" }), "custom");
      assert.equal(runs.length, 0);
      assert.equal(errors.length, 1);
    } finally {
      down.close();
    }
  });

  test("onRefuse can throw, for frameworks with their own tool error", async () => {
    class ToolError extends Error {}
    const guarded = guardTool(async (_: Args) => ({ status: "x" }), {
      guard,
      tool: "submit_appeal",
      onRefuse: (d) => {
        throw new ToolError(d.message);
      },
    });
    // An unknown call is refused.
    await assert.rejects(guarded({ appeal_id: "A-17" }, { callId: g.callId("unknown") }), ToolError);
  });

  test("programming errors throw instead of refusing", async () => {
    const guarded = guardTool(async (_: Args) => ({ status: "x" }), { guard, tool: "submit_appeal" });
    await assert.rejects(guarded({ appeal_id: "A-17" }), /no call id/);
    await assert.rejects(guarded({ appeal_id: undefined } as never, { callId: "c1" }), YesguardInputError);
    await assert.rejects(guarded({ appeal_id: "A" }, { call_id: "c1" } as never), /use callId/);
    assert.throws(() => guardTool(async () => ({}), { guard, tool: "" }), /options\.tool: required/);
  });
});
