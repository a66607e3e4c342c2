// @yesguard/client/testing: a real guard for tests, yours and this
// package's. It starts the yesguard binary as .ci/run starts it (free
// loopback ports for gRPC, HTTP and the embedded NATS server) and reads the
// addresses from its "yesguard listening" log line.
//
// The binary is options.binary, else $YESGUARD_BIN, else (inside the
// yesguard repository) one built with `go build ./cmd/yesguard`.
//
// Waiting is for states, never for time: waitFor polls a condition (the
// guard's own metrics, say) with a wide bound for a loaded machine.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { GuardClient, type GuardClientOptions } from "./client.js";
import { TranscriptPublisher, type TranscriptPublisherOptions } from "./publisher.js";

/**
 * The yesguard repository this package sits in: the nearest directory
 * above this file whose go.mod is yesguard's; undefined outside it (an
 * installed package).
 */
export function repoRoot(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const mod = join(dir, "go.mod");
    if (existsSync(mod) && /^module github\.com\/yesguard\/yesguard\s*$/m.test(readFileSync(mod, "utf8"))) return dir;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

let built: string | undefined;

/** The guard binary: $YESGUARD_BIN, or one built from the repository now (once per process). */
export function guardBinary(): string {
  if (process.env.YESGUARD_BIN) return process.env.YESGUARD_BIN;
  if (!built) {
    const root = repoRoot();
    if (!root) {
      throw new Error("no yesguard binary: pass startGuard({ binary }) or set YESGUARD_BIN");
    }
    const dir = mkdtempSync(join(tmpdir(), "yesguard-ts-bin-"));
    built = join(dir, "yesguard");
    execFileSync("go", ["build", "-o", built, "./cmd/yesguard"], { cwd: root, stdio: "inherit" });
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  return built;
}

export interface StartOptions {
  /** The yesguard binary (default: see guardBinary). */
  binary?: string;
  /** Policy YAML text, written to a file and passed with --policy. */
  policy?: string;
  /** More serve flags. */
  args?: string[];
  /** The options of the client that warms the guard up (its TLS, say). */
  warmup?: GuardClientOptions;
}

export class RunningGuard {
  readonly clients: GuardClient[] = [];
  readonly conns: NatsConnection[] = [];
  readonly publishers: TranscriptPublisher[] = [];
  private calls = 0;

  constructor(
    readonly grpc: string,
    readonly nats: string,
    readonly http: string,
    readonly decisionLog: string,
    private readonly proc: ChildProcess,
    private readonly dir: string,
    readonly log: string[],
  ) {}

  /** A fresh call id, unique in this guard's life. */
  callId(name: string): string {
    return `ts-${name}-${process.pid}-${++this.calls}`;
  }

  /** A client of this guard, closed by stop(). */
  client(opts: GuardClientOptions = {}): GuardClient {
    const c = new GuardClient({ address: this.grpc, ...opts });
    this.clients.push(c);
    return c;
  }

  /** A NATS connection to the guard's embedded server, closed by stop(). */
  async natsConn(): Promise<NatsConnection> {
    const nc = await connect({ servers: this.nats });
    this.conns.push(nc);
    return nc;
  }

  /** A publisher on its own connection, closed by stop(). */
  async publisher(opts: Omit<TranscriptPublisherOptions, "nats"> = { source: "pipeline" }): Promise<TranscriptPublisher> {
    const p = await TranscriptPublisher.connect({ ...opts, servers: this.nats });
    this.publishers.push(p);
    return p;
  }

  /** The sum of a metric's series whose labels include `labels`. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const res = await fetch(`http://${this.http}/metrics`);
    const text = await res.text();
    let sum = 0;
    for (const line of text.split("\n")) {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!m || m[1] !== name) continue;
      const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
      if (Object.entries(labels).every(([k, v]) => got[k] === v)) sum += Number(m[3]);
    }
    return sum;
  }

  /** Transcript events the guard has taken in, accepted or rejected. */
  async eventsSeen(): Promise<number> {
    return (await this.metric("yesguard_transcript_events_total")) + (await this.metric("yesguard_transcript_events_rejected_total"));
  }

  /** Waits until the guard has taken in at least n events in all. */
  async waitEvents(n: number): Promise<void> {
    await waitFor(async () => (await this.eventsSeen()) >= n, `the guard to take in ${n} transcript events`);
  }

  /** Waits until at least n Checks are being judged or waiting. */
  async waitChecksInFlight(n: number): Promise<void> {
    await waitFor(async () => (await this.metric("yesguard_guard_checks_in_flight")) >= n, `${n} Check(s) in flight`);
  }

  /**
   * The race of a real pipeline, made certain: runs `setup` and waits until
   * the guard has taken in its `events` transcript events, starts `call` (a
   * Check, or a guarded tool), waits until the guard holds that Check (its
   * in-flight gauge; or until `call` settles, if it does first), then runs
   * `answer`: the caller's words land after the Check that they answer.
   */
  async race<T>(opts: { setup?: () => unknown; events?: number; call: () => Promise<T>; answer: () => unknown }): Promise<T> {
    const seen = await this.eventsSeen();
    await opts.setup?.();
    await this.waitEvents(seen + (opts.events ?? 0));
    const inFlight = await this.metric("yesguard_guard_checks_in_flight");
    const p = opts.call();
    const settled = p.then(
      () => true,
      () => true,
    );
    await Promise.race([this.waitChecksInFlight(inFlight + 1), settled]);
    await opts.answer();
    return p;
  }

  /** The decision log's records. */
  decisionRecords(): Array<Record<string, unknown>> {
    if (!existsSync(this.decisionLog)) return [];
    return readFileSync(this.decisionLog, "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => (JSON.parse(l) as { decision: Record<string, unknown> }).decision);
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.close();
    for (const p of this.publishers) await p.close();
    for (const nc of this.conns) if (!nc.isClosed()) await nc.close();
    if (this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      this.proc.kill("SIGTERM");
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts a guard and resolves once it says where it listens. */
export async function startGuard(opts: StartOptions = {}): Promise<RunningGuard> {
  const dir = mkdtempSync(join(tmpdir(), "yesguard-ts-"));
  const decisionLog = join(dir, "decisions.log");
  // Its own data directory: the JetStream store and the approval key are
  // the test's, not the user's.
  const args = ["serve", "--grpc-addr=127.0.0.1:0", "--http-addr=127.0.0.1:0", "--nats-listen=127.0.0.1:0", `--decision-log=${decisionLog}`, `--data-dir=${join(dir, "data")}`];
  if (opts.policy !== undefined) {
    const file = join(dir, "policy.yaml");
    writeFileSync(file, opts.policy);
    args.push(`--policy=${file}`);
  }
  args.push(...(opts.args ?? []));
  const proc = spawn(opts.binary ?? guardBinary(), args, { stdio: ["ignore", "ignore", "pipe"] });
  // A test process that dies without stop() leaves no guard behind.
  const reap = () => proc.kill("SIGKILL");
  process.once("exit", reap);
  proc.once("exit", () => process.off("exit", reap));
  const log: string[] = [];
  const listening = await new Promise<Record<string, string>>((resolve, reject) => {
    const lines = createInterface({ input: proc.stderr! });
    const timer = setTimeout(() => reject(new Error("the guard did not say where it listens within 30 s:\n" + log.join("\n"))), 30_000);
    lines.on("line", (line) => {
      log.push(line);
      if (line.includes('"msg":"yesguard listening"')) {
        clearTimeout(timer);
        resolve(JSON.parse(line) as Record<string, string>);
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the guard exited (${code}) at start:\n` + log.join("\n")));
    });
  });
  const g = new RunningGuard(listening.grpc!, listening.nats!, listening.http!, decisionLog, proc, dir, log);
  await g.client(opts.warmup).warmup({ timeoutMs: 20_000 });
  return g;
}

/**
 * Polls `cond` every 10 ms until it holds; throws after timeoutMs (default
 * 20 s, wide for a loaded machine) naming what was awaited.
 */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
