// The guard's own question through guardTool's speak option, against a
// real guard with policy.example.yaml: in all seven languages, for every
// confirmed tool, a refused call speaks the guard's question as the
// agent's turn, the caller's yes follows, and the next call runs the tool,
// resting on the guard's question. The unsafe side does not run it.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, type RunningGuard } from "../src/testing.js";
import { suiteGuard } from "./fixtures.js";
import { guardPrompt, guardTool, type CheckResult, type GuardClient, type JsonObject, type TranscriptPublisher } from "../src/index.js";

const LANGS: Array<[lang: string, yes: string, no: string]> = [
  ["en", "yes", "no"],
  ["es", "sí", "no"],
  ["de", "ja", "nein"],
  ["fr", "oui", "non"],
  ["it", "sì", "no"],
  ["nl", "ja", "nee"],
  ["pt", "sim", "não"],
];

const TOOLS: Array<[tool: string, args: JsonObject]> = [
  ["submit_appeal", { appeal_id: "A-17" }],
  ["book_appointment", { date: "2026-12-08", time: "15:00" }],
  ["cancel_appointment", { appointment_id: "42" }],
  ["pay_bill", { amount: 71.35 }],
  ["file_dispute", { amount: 40 }],
];

const policy = readFileSync(join(repoRoot() ?? join(process.cwd(), "..", ".."), "policy.example.yaml"), "utf8");

describe("the guard's question", () => {
  let g: RunningGuard;
  let guard: GuardClient;
  let pub: TranscriptPublisher;
  suiteGuard("ask-test", (s) => ({ g, guard, pub } = s), { policy });

  /** Publishes and waits until the guard took the event in. */
  async function utter(speaker: "agent" | "caller", call: string, lang: string, text: string, responseId?: string): Promise<void> {
    const seen = await g.eventsSeen();
    if (speaker === "agent") await pub.agent(call, text, { lang, responseId });
    else await pub.caller(call, text, { lang });
    await g.waitEvents(seen + 1);
  }

  function guarded(tool: string, call: string, lang: string, spoken: string[]) {
    const runs: JsonObject[] = [];
    const decisions: CheckResult[] = [];
    const fn = guardTool(
      async (args: JsonObject) => {
        runs.push(args);
        return { done: tool };
      },
      {
        guard,
        tool,
        callId: call,
        timeoutMs: 10_000,
        includeEvidence: true,
        onDecision: (d) => decisions.push(d),
        // The pipeline's TTS: the spoken text comes back as the agent's turn.
        speak: async (text, ask) => {
          spoken.push(text);
          await utter("agent", call, lang, text, spoken.length % 2 === 0 ? ask.id : undefined);
        },
      },
    );
    return { fn, runs, decisions };
  }

  test("in seven languages, every tool: refused, asked, yes, allowed", async () => {
    for (const [lang, yes] of LANGS) {
      for (const [tool, args] of TOOLS) {
        const call = g.callId(`${lang}-${tool}`);
        const spoken: string[] = [];
        const t = guarded(tool, call, lang, spoken);
        await utter("agent", call, lang, "…");
        await utter("caller", call, lang, yes);
        const first = await t.fn(args);
        assert.equal(t.runs.length, 0, `${lang} ${tool}: ran on the first call`);
        const ask = t.decisions[0]?.ask;
        assert.ok(ask, `${lang} ${tool}: no ask (${t.decisions[0]?.reason}: ${t.decisions[0]?.detail})`);
        assert.equal(ask.lang, lang);
        assert.deepEqual(spoken, [ask.text]);
        assert.match(String(first), /Do not ask again/);
        await utter("caller", call, lang, yes);
        const second = await t.fn(args);
        assert.deepEqual(second, { done: tool }, `${lang} ${tool}: ${t.decisions[1]?.reason} ${t.decisions[1]?.detail}`);
        assert.equal(t.decisions[1]?.evidence?.guardQuestion, ask.id);
      }
    }
  });

  test("the unsafe side does not run the tool", async () => {
    const cases: Array<[name: string, answer: string, args: JsonObject]> = [
      ["a no to the ask", "no", { amount: 71.35 }],
      ["a yes to an ask for other arguments", "yes", { amount: 80 }],
    ];
    for (const [name, answer, args] of cases) {
      const call = g.callId("unsafe");
      const spoken: string[] = [];
      const t = guarded("pay_bill", call, "en", spoken);
      await utter("agent", call, "en", "…");
      await utter("caller", call, "en", "yes");
      await t.fn({ amount: 71.35 });
      assert.equal(spoken.length, 1, name);
      await utter("caller", call, "en", answer);
      const out = await t.fn(args);
      assert.equal(t.runs.length, 0, `${name}: the tool ran`);
      assert.equal(typeof out, "string");
      assert.equal(t.decisions[1]?.outcome, "refuse", name);
    }
  });

  test("guardPrompt gives yesguard prompt's text", async () => {
    const text = await guardPrompt(`http://${g.http}`, { tool: "pay_bill", lang: "es" });
    assert.match(text, /\(es\) ¿Quiere que pague su factura de \{amount\} ahora\?/);
    assert.match(text, /NEGATED/);
  });
});
