// What the package's test files share.

import { after, before } from "node:test";
import { startGuard, type RunningGuard, type StartOptions } from "../src/testing.js";
import type { GuardClient, TranscriptPublisher } from "../src/index.js";

/** The agent turn most tests' callers answer: a question about submit_appeal. */
export const QUESTION = "Shall I submit your appeal now?";

export interface SuiteGuard {
  g: RunningGuard;
  guard: GuardClient;
  pub: TranscriptPublisher;
}

/**
 * A real guard for the enclosing suite: started before its tests, with a
 * client and a publisher named `source`, handed to `set`, and stopped after.
 */
export function suiteGuard(source: string, set: (s: SuiteGuard) => void, opts?: StartOptions): void {
  let running: RunningGuard | undefined;
  before(async () => {
    running = await startGuard(opts);
    set({ g: running, guard: running.client(), pub: await running.publisher({ source, lang: "en" }) });
  });
  after(async () => running?.stop());
}
