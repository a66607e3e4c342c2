// guardPrompt: what to put in the model's instructions for the guard's
// policy, the same text as `yesguard prompt` prints, read from the guard's
// HTTP endpoint (GET /prompt on --http-addr) for the policy in force.

import { YesguardInputError } from "./json.js";

export interface GuardPromptOptions {
  /** Only this tool. */
  tool?: string;
  /** The guard's question in this language only. */
  lang?: string;
  signal?: AbortSignal;
}

/**
 * Reads the model's instructions from the guard at `httpUrl`
 * ("http://127.0.0.1:9090"): when to call each tool, how to ask (the
 * guard's question) and what to do with each refusal.
 */
export async function guardPrompt(httpUrl: string, opts: GuardPromptOptions = {}): Promise<string> {
  if (!/^https?:\/\//.test(httpUrl)) throw new YesguardInputError(`guardPrompt: ${JSON.stringify(httpUrl)} is not an http(s) URL`);
  const url = new URL("/prompt", httpUrl);
  if (opts.tool) url.searchParams.set("tool", opts.tool);
  if (opts.lang) url.searchParams.set("lang", opts.lang);
  const resp = await fetch(url, { signal: opts.signal });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`guardPrompt: the guard answered ${resp.status}: ${text.trim()}`);
  return text;
}
