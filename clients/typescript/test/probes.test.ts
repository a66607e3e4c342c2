// The buyer's seven probes (probe/probe.go), run through this package
// against a real guard: each caller answer lands after the Check it
// answers, as in a real pipeline. Instead of the Go probe's fixed lag, the
// answer is published once the guard holds the Check (its in-flight gauge),
// so the race is certain rather than likely.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { RunningGuard } from "../src/testing.js";
import { QUESTION, suiteGuard } from "./fixtures.js";
import type { CheckResult, GuardClient, TranscriptPublisher } from "../src/index.js";

const TOOL = "submit_appeal";
const ARGS = { appeal_id: "PROBE-1" };

interface Scenario {
  name: string;
  before: string[];
  answer: string;
}

const scenarios: Scenario[] = [
  { name: "okay to an announcement is refused", before: ["I will now submit the request."], answer: "Okay." },
  { name: "yes with a question is refused", before: [QUESTION], answer: "Yes, but does that cost extra?" },
  { name: "pre-emptive yes before any question is refused", before: [], answer: "Yes, go ahead." },
  {
    name: "rambling yes is refused",
    before: [QUESTION],
    answer: "Well I was thinking about it last night and talked it over with my sister and in the end I figured it is probably fine so yes",
  },
  { name: "yes then no writes nothing", before: [QUESTION], answer: "Yes. Wait, no." },
];

describe("the seven probes", () => {
  let g: RunningGuard;
  let guard: GuardClient;
  let pub: TranscriptPublisher;
  const refusedCalls: string[] = [];
  suiteGuard("probe", (s) => ({ g, guard, pub } = s));

  /** Publishes the agent lines, starts the Check, and answers once the guard holds it. */
  function raced(call: string, lines: string[], answer: string): Promise<CheckResult> {
    return g.race({
      setup: async () => {
        for (const l of lines) await pub.agent(call, l);
      },
      events: lines.length,
      call: () => guard.check({ callId: call, tool: TOOL, args: ARGS, includeEvidence: true, timeoutMs: 10_000 }),
      answer: () => pub.caller(call, answer),
    });
  }

  for (const s of scenarios) {
    test(s.name, async () => {
      const call = g.callId("probe");
      const d = await raced(call, s.before, s.answer);
      assert.equal(d.outcome, "refuse", `${d.outcome}/${d.reason}: ${d.detail}`);
      assert.notEqual(d.reason, "unspecified");
      assert.ok(d.message.length > 0, "a refusal carries a message for the model");
      assert.equal(d.evidence?.answer?.text, s.answer, "the guard judged the caller's answer, so it waited for the current turn");
      refusedCalls.push(call);
    });
  }

  test("two yeses give one action", async () => {
    const call = g.callId("probe-two-yeses");
    const seen = await g.eventsSeen();
    await pub.agent(call, QUESTION);
    await g.waitEvents(seen + 1);
    // The model calls the tool twice at once, both before the caller's yes.
    const inFlight = await g.metric("yesguard_guard_checks_in_flight");
    const a = guard.check({ callId: call, tool: TOOL, args: ARGS, timeoutMs: 10_000 });
    const b = guard.check({ callId: call, tool: TOOL, args: ARGS, timeoutMs: 10_000 });
    await g.waitChecksInFlight(inFlight + 2);
    await pub.caller(call, "Yes.");

    const outcomes: string[] = [];
    let allowId = "";
    const result = { probe: "done" };
    // Whichever is allowed reports its result at once, so that the other,
    // if it waits for the original, gets it.
    const settle = async (p: Promise<CheckResult>) => {
      const d = await p;
      outcomes.push(d.outcome);
      if (d.outcome === "allow") {
        allowId = d.decisionId;
        await guard.complete({ decisionId: d.decisionId, result });
      }
      return d;
    };
    const [da, db] = await Promise.all([settle(a), settle(b)]);
    assert.deepEqual([...outcomes].sort(), ["allow", "duplicate"], `got ${outcomes.join(", ")}`);
    const dup = da.outcome === "duplicate" ? da : db;
    assert.equal(dup.originalDecisionId, allowId);

    // A second yes, and the model calls again: still one action.
    await pub.caller(call, "Yes!");
    const c = await guard.check({ callId: call, tool: TOOL, args: ARGS, timeoutMs: 10_000 });
    assert.notEqual(c.outcome, "allow", `a third check was allowed (${c.reason})`);
  });

  test("every refusal has its log line", async () => {
    assert.equal(refusedCalls.length, scenarios.length, "every scenario above passed first");
    const logged = new Map(g.decisionRecords().map((r) => [r.decision_id as string, r]));
    for (const call of refusedCalls) {
      const page = await guard.listDecisions({ callId: call });
      const refusals = page.decisions.filter((d) => d.outcome === "refuse");
      assert.ok(refusals.length >= 1, `${call}: no refusal record`);
      for (const d of refusals) {
        assert.notEqual(d.reason, "unspecified", `${d.decisionId}: no reason`);
        assert.ok(d.message !== "" && d.decisionId !== "", `${d.decisionId}: no message or id`);
        assert.equal(d.callId, call);
      }
      // The guard writes its log asynchronously (a bounded queue): the
      // record may land just after the answer.
      const ids = refusals.map((d) => d.decisionId);
      for (let i = 0; i < 200 && !ids.every((id) => logged.has(id)); i++) {
        await new Promise((r) => setTimeout(r, 25));
        for (const r of g.decisionRecords()) logged.set(r.decision_id as string, r);
      }
      for (const id of ids) {
        const line = logged.get(id);
        assert.ok(line, `${id} is in ListDecisions but not in the decision log`);
        assert.equal(line.outcome, "OUTCOME_REFUSE");
        assert.match(String(line.reason), /^REASON_/);
      }
    }
  });
});
