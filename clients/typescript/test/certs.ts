// Throwaway certificates for the TLS tests, made by a small Go program
// (test/testdata/gencerts): the tests need nothing but Go and Node.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "../src/testing.js";

export interface Certs {
  dir: string;
  ca: string;
  server: string;
  serverKey: string;
  client: string;
  clientKey: string;
}

/** A CA, a server certificate for localhost/127.0.0.1 and a client certificate, as PEM. */
export function makeCerts(): Certs {
  const dir = mkdtempSync(join(tmpdir(), "yesguard-ts-certs-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  execFileSync("go", ["run", "./clients/typescript/test/testdata/gencerts/main.go", dir], { cwd: repoRoot() ?? process.cwd(), stdio: "inherit" });
  const read = (f: string) => readFileSync(join(dir, f), "utf8");
  return {
    dir,
    ca: read("ca.pem"),
    server: read("server.pem"),
    serverKey: read("server-key.pem"),
    client: read("client.pem"),
    clientKey: read("client-key.pem"),
  };
}
