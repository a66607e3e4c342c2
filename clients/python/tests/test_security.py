"""Tokens, TLS and mutual TLS against a real guard run with them."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Dict

import grpc
import pytest

from yesguard import TLS, Guard, TranscriptPublisher, YesguardInputError
from yesguard.testing import start_guard

PIPELINE = "yg_pipeline-token-for-the-python-tests"
AUDITOR = "yg_auditor-token-for-the-python-tests"
TENANT = "yg_tenant-a-token-for-the-python-tests"


def _token_file() -> str:
    entries = [("py-pipeline", PIPELINE, "[pipeline]", None), ("py-auditor", AUDITOR, "[auditor]", None),
               ("py-tenant-a", TENANT, "[pipeline]", '["tenant-a-"]')]
    lines = ["tokens:"]
    for name, token, roles, calls in entries:
        lines += [f"  - name: {name}", f"    sha256: {hashlib.sha256(token.encode()).hexdigest()}", f"    roles: {roles}"]
        if calls:
            lines.append(f"    calls: {calls}")
    path = os.path.join(tempfile.mkdtemp(prefix="yesguard-py-tokens-"), "tokens.yaml")
    Path(path).write_text("\n".join(lines) + "\n")
    return path


async def test_tokens_and_roles() -> None:
    g = await start_guard(args=[f"--grpc-tokens={_token_file()}"])
    try:
        call = "tenant-a-" + g.call_id("tokens")
        async with Guard(g.grpc, token=PIPELINE) as pipeline, Guard(g.grpc, token=AUDITOR) as auditor, \
                Guard(g.grpc) as anonymous, Guard(g.grpc, token=TENANT) as tenant:
            pub = TranscriptPublisher(pipeline, "pipeline", lang="en")
            await pub.agent(call, "Shall I submit your appeal A-17 now?")
            await pub.caller(call, "Yes, please.")
            d = await pipeline.check(call, "submit_appeal", {"appeal_id": "A-17"})
            assert d.outcome == "allow", (d.reason, d.detail)

            # The auditor reads the call, and may not speak for the caller.
            page = await auditor.list_decisions(call, include_transcript=True)
            assert [t["text"] for t in page.transcript] == ["Shall I submit your appeal A-17 now?", "Yes, please."]
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await TranscriptPublisher(auditor, "forger", lang="en").caller(call, "Yes.")
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await anonymous.check(call, "submit_appeal", {"appeal_id": "A-17"})
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED

            # A token bound to its tenant's calls publishes for them only.
            await TranscriptPublisher(tenant, "tenant", lang="en").caller(call, "Thanks.")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await TranscriptPublisher(tenant, "tenant", lang="en").caller("tenant-b-1", "Yes.")
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert g.metric("yesguard_grpc_auth_refused_total") >= 2
    finally:
        await g.stop()


def test_a_token_is_never_sent_in_plaintext_beyond_loopback() -> None:
    with pytest.raises(YesguardInputError, match="plaintext"):
        Guard("guard.internal:50051", token="t")
    with pytest.raises(YesguardInputError, match="without whitespace"):
        Guard("127.0.0.1:1", token="two words")
    with pytest.raises(YesguardInputError, match="cert and key"):
        Guard("127.0.0.1:1", tls=TLS(cert=b"x"))


async def test_tls_and_mutual_tls(certs: Dict[str, str]) -> None:
    read = lambda name: Path(certs[name]).read_bytes()  # noqa: E731
    tls = TLS(ca=read("ca"))
    mtls = TLS(ca=read("ca"), cert=read("client"), key=read("client-key"))
    g = await start_guard(
        args=[f"--grpc-tls-cert={certs['server']}", f"--grpc-tls-key={certs['server-key']}", f"--grpc-client-ca={certs['ca']}"],
        warmup={"tls": mtls})
    try:
        port = g.grpc.rsplit(":", 1)[1]
        async with Guard(f"localhost:{port}", tls=mtls, token=None) as c:
            pub = TranscriptPublisher(c, "pipeline", lang="en")
            call = g.call_id("mtls")
            await pub.agent(call, "Shall I submit your appeal A-17 now?")
            await pub.caller(call, "Yes, please.")
            d = await c.check(call, "submit_appeal", {"appeal_id": "A-17"})
            assert d.outcome == "allow", (d.reason, d.detail)
        # Without a client certificate the handshake is refused.
        async with Guard(f"localhost:{port}", tls=tls, timeouts={"check": 3.0}) as no_cert:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await no_cert.check("c1", "submit_appeal")
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        # Without the CA the server is not trusted.
        async with Guard(f"localhost:{port}", tls=TLS(cert=read("client"), key=read("client-key")), timeouts={"check": 3.0}) as untrusted:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await untrusted.check("c1", "submit_appeal")
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await g.stop()


async def test_tls_server_only(certs: Dict[str, str]) -> None:
    tls = TLS(ca=Path(certs["ca"]).read_bytes(), server_name="localhost")
    g = await start_guard(args=[f"--grpc-tls-cert={certs['server']}", f"--grpc-tls-key={certs['server-key']}"],
                          warmup={"tls": tls})
    try:
        async with Guard(g.grpc, tls=tls, token=PIPELINE) as c:
            # A token may go over TLS to any host; here the guard has no token file.
            assert await c.health_status() == "serving"
            d = await c.check(g.call_id("tls"), "submit_appeal", {"appeal_id": "A-17"})
            assert (d.outcome, d.reason) == ("refuse", "unknown_call")
    finally:
        await g.stop()
