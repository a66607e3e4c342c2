// The client's TLS options against a real guard, through a TLS terminator
// in front of its plaintext gRPC port (ALPN h2, as a sidecar proxy or a
// load balancer would be): a trusted CA connects, an untrusted one is
// refused at the handshake, and mutual TLS sends the client certificate.
// The guard's own TLS (issue 11) is tested in features.test.ts.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { connect as netConnect } from "node:net";
import { createServer, type TLSSocket } from "node:tls";
import { startGuard, type RunningGuard } from "../src/testing.js";
import { makeCerts, type Certs } from "./certs.js";
import { Code, ConnectError, GuardClient } from "../src/index.js";

/** A TLS terminator forwarding to the guard's gRPC port; resolves with its port. */
async function terminator(g: RunningGuard, certs: Certs, mutual: boolean) {
  const [host, port] = g.grpc.split(":") as [string, string];
  const peers: Array<string | undefined> = [];
  const srv = createServer(
    { key: certs.serverKey, cert: certs.server, ALPNProtocols: ["h2"], ...(mutual ? { requestCert: true, rejectUnauthorized: true, ca: certs.ca } : {}) },
    (sock: TLSSocket) => {
      const cn = sock.getPeerCertificate()?.subject?.CN;
      peers.push(Array.isArray(cn) ? cn.join(",") : cn);
      const up = netConnect(Number(port), host);
      sock.pipe(up).pipe(sock);
      const end = () => {
        sock.destroy();
        up.destroy();
      };
      sock.on("error", end);
      up.on("error", end);
    },
  );
  srv.on("tlsClientError", () => {});
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  return { port: (srv.address() as { port: number }).port, peers, close: () => new Promise((r) => srv.close(r)) };
}

describe("TLS", () => {
  let g: RunningGuard;
  let certs: Certs;

  before(async () => {
    g = await startGuard();
    certs = makeCerts();
  });
  after(async () => g?.stop());

  test("a trusted CA connects; the system's trust store refuses a private CA", async () => {
    const t = await terminator(g, certs, false);
    const ok = new GuardClient({ address: `127.0.0.1:${t.port}`, tls: { ca: certs.ca }, token: "over-tls" });
    const untrusted = new GuardClient({ address: `https://localhost:${t.port}` });
    try {
      await ok.warmup();
      const d = await ok.check({ callId: g.callId("tls"), tool: "submit_appeal" });
      assert.equal(d.outcome, "refuse", "an unknown call, judged through TLS");
      assert.match(ok.address, /^https:/);
      await assert.rejects(untrusted.healthStatus(), (err: unknown) => {
        assert.ok(err instanceof ConnectError);
        // Connect reports a failed handshake as Internal or Unavailable.
        assert.ok(err.code === Code.Internal || err.code === Code.Unavailable, `code ${Code[err.code]}`);
        assert.match(err.message, /certificate/i);
        return true;
      });
    } finally {
      ok.close();
      untrusted.close();
      await t.close();
    }
  });

  test("mutual TLS sends the client certificate; without one the handshake fails", async () => {
    const t = await terminator(g, certs, true);
    const withCert = new GuardClient({ address: `127.0.0.1:${t.port}`, tls: { ca: certs.ca, cert: certs.client, key: certs.clientKey } });
    const without = new GuardClient({ address: `127.0.0.1:${t.port}`, tls: { ca: certs.ca } });
    try {
      assert.equal(await withCert.healthStatus(), "serving");
      assert.ok(t.peers.includes("yesguard test client"), `peers: ${t.peers.join(", ")}`);
      await assert.rejects(without.healthStatus({ timeoutMs: 5000 }), (err: unknown) => {
        assert.ok(err instanceof ConnectError);
        assert.ok(err.code === Code.Unavailable || err.code === Code.Internal || err.code === Code.Unknown, `code ${Code[err.code]}: ${err.message}`);
        return true;
      });
    } finally {
      withCert.close();
      without.close();
      await t.close();
    }
  });

  test("TLS options are checked", () => {
    assert.throws(() => new GuardClient({ tls: { cert: certs.client } }), /cert and key go together/);
    assert.throws(() => new GuardClient({ tls: { ca: certs.ca, server_name: "x" } as never }), /use serverName/);
  });
});
