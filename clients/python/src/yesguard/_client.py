"""The asyncio client of yesguard.v1.Guard (grpc.aio), with the standard
health service for warm-up.

Rules that hold:
- Every call has a deadline: the call's timeout, else the client's default
  for that method. Nothing waits unbounded.
- Arguments and results are plain dicts (see _json): what JSON cannot carry
  raises YesguardInputError before the request leaves.
- Outcomes and reasons are strings ("allow", "confirmed"), read from the
  generated enums: an outcome this client does not know raises
  YesguardProtocolError rather than being guessed at (guard_tool turns it
  into a refusal).
- A bearer token is never sent in plaintext, except over loopback.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import ipaddress
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format, timestamp_pb2

from ._json import JsonObject, YesguardInputError, from_struct, to_struct
from .v1 import guard_pb2, guard_pb2_grpc

#: The gRPC service whose health tracks the guard's transcript feed.
GUARD_SERVICE = "yesguard.v1.Guard"

#: Default deadlines, in seconds. The guard waits up to its policy's wait
#: (900 ms by default) for the caller's turn, never past the deadline: 2 s
#: leaves it room to answer.
DEFAULT_TIMEOUTS: Mapping[str, float] = {
    "check": 2.0,
    "complete": 2.0,
    "redeem": 2.0,
    "list_decisions": 5.0,
    "publish": 2.0,
    "health": 2.0,
}

OUTCOMES = ("allow", "refuse", "duplicate", "ignored")


class YesguardProtocolError(Exception):
    """The guard answered something this client cannot act on."""


@dataclass(frozen=True)
class TLS:
    """TLS for the gRPC connection: PEM bytes (or str)."""

    #: CA certificates to trust instead of the system's.
    ca: Optional[Union[bytes, str]] = None
    #: Client certificate and key, for mutual TLS (both or neither).
    cert: Optional[Union[bytes, str]] = None
    key: Optional[Union[bytes, str]] = None
    #: The name to verify the server's certificate against (default: the host).
    server_name: Optional[str] = None


@dataclass(frozen=True)
class Ask:
    """The guard's own question, on a REFUSE a fresh question can mend:
    speak ``text`` as the agent's turn (with ``id`` as its response id where
    the pipeline can set one), wait for the caller's answer, and call the
    tool again with the same arguments."""

    text: str
    lang: str
    id: str
    expires_at: Optional[_dt.datetime] = None


@dataclass(frozen=True)
class CheckResult:
    decision_id: str
    #: "allow", "refuse", "duplicate" or "ignored".
    outcome: str
    #: The reason's name in lowercase ("confirmed", "negated", ...).
    reason: str
    #: For the model: what to do next.
    message: str
    original_decision_id: Optional[str] = None
    #: DUPLICATE: the original's result, once Complete reported it.
    original_result: Optional[JsonObject] = None
    #: DUPLICATE of an original still running: wait, do not report it done.
    original_running: bool = False
    waited_ms: int = 0
    #: ALLOW: the signed approval the system of record verifies and redeems.
    approval: Optional[str] = None
    approval_expires_at: Optional[_dt.datetime] = None
    question_sentence: str = ""
    answer_text: str = ""
    detail: str = ""
    #: With include_evidence: the full evidence, as a dict (proto field names).
    evidence: Optional[JsonObject] = None
    #: REFUSE: the guard's own question, when asking again can mend it.
    ask: Optional[Ask] = None


@dataclass(frozen=True)
class RedeemResult:
    decision_id: str
    #: "allow": execute the action now, once; "refuse": do not.
    outcome: str
    reason: str
    message: str
    allowed_decision_id: Optional[str] = None
    call_id: Optional[str] = None
    tool: Optional[str] = None
    args_hash: Optional[str] = None
    expires_at: Optional[_dt.datetime] = None


@dataclass(frozen=True)
class DecisionPage:
    #: The records, oldest first, as dicts (proto field names; outcome,
    #: reason and kind as lowercase strings).
    decisions: List[JsonObject] = field(default_factory=list)
    next_page_token: Optional[str] = None
    #: With include_transcript: the call's turns, as dicts.
    transcript: List[JsonObject] = field(default_factory=list)


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    try:
        name = enum.Name(value)
    except ValueError:
        return f"unknown_{value}"
    return name[len(prefix):].lower() if name.startswith(prefix) else name.lower()


def outcome_name(value: int) -> str:
    return _enum_name(guard_pb2.Outcome, value, "OUTCOME_")


def reason_name(value: int) -> str:
    return _enum_name(guard_pb2.Reason, value, "REASON_")


def _time(ts: timestamp_pb2.Timestamp, present: bool) -> Optional[_dt.datetime]:
    if not present:
        return None
    return ts.ToDatetime(tzinfo=_dt.timezone.utc)


def _as_dict(msg: Any) -> JsonObject:
    d = json_format.MessageToDict(msg, preserving_proto_field_name=True, use_integers_for_enums=True)
    return _named(d)


_ENUMS = {
    "outcome": (guard_pb2.Outcome, "OUTCOME_"),
    "reason": (guard_pb2.Reason, "REASON_"),
    "kind": (guard_pb2.DecisionKind, "DECISION_KIND_"),
}


def _named(v: Any) -> Any:
    """Enum numbers as lowercase names, int64 strings as ints."""
    if isinstance(v, dict):
        out: Dict[str, Any] = {}
        for k, x in v.items():
            if k in _ENUMS and isinstance(x, int):
                enum, prefix = _ENUMS[k]
                out[k] = _enum_name(enum, x, prefix)
            elif k.endswith(("_ms", "_seq")) and isinstance(x, str) and x.lstrip("-").isdigit():
                out[k] = int(x)
            else:
                out[k] = _named(x)
        return out
    if isinstance(v, list):
        return [_named(x) for x in v]
    return v


def _is_loopback(host: str) -> bool:
    h = host.strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _pem(v: Optional[Union[bytes, str]]) -> Optional[bytes]:
    if v is None:
        return None
    return v.encode() if isinstance(v, str) else v


class Guard:
    """A client of one guard: Check, Complete, Redeem, ListDecisions and
    PublishTranscript over one HTTP/2 connection.

    ``address`` is "host:port". ``tls`` is False (plaintext), True (system
    CAs) or a TLS. ``token`` is sent as ``authorization: Bearer <token>``.
    ``timeouts`` overrides DEFAULT_TIMEOUTS per method, in seconds.
    ``options`` are more grpc channel options (keepalive, say).
    """

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        *,
        tls: Union[bool, TLS] = False,
        token: Optional[str] = None,
        timeouts: Optional[Mapping[str, float]] = None,
        options: Sequence[Tuple[str, Any]] = (),
    ) -> None:
        if not isinstance(address, str) or "://" in address or ":" not in address:
            raise YesguardInputError(f"address {address!r}: want host:port")
        self.address = address
        host = address.rsplit(":", 1)[0]
        unknown = set(timeouts or {}) - set(DEFAULT_TIMEOUTS)
        if unknown:
            raise YesguardInputError(f"timeouts: unknown method(s) {sorted(unknown)}; known: {sorted(DEFAULT_TIMEOUTS)}")
        self.timeouts: Dict[str, float] = {**DEFAULT_TIMEOUTS, **(timeouts or {})}
        self._metadata: Tuple[Tuple[str, str], ...] = ()
        if token is not None:
            if not token or any(c.isspace() for c in token):
                raise YesguardInputError("token: want a non-empty token without whitespace")
            if not tls and not _is_loopback(host):
                raise YesguardInputError(
                    f"refusing to send a bearer token in plaintext to {address}: set tls, or connect over loopback")
            self._metadata = (("authorization", f"Bearer {token}"),)
        t = tls if isinstance(tls, TLS) else TLS()
        if (t.cert is None) != (t.key is None):
            raise YesguardInputError("tls: cert and key go together (mutual TLS needs both)")
        opts = [
            # A connection idle for 30 s is checked with a PING before it is
            # trusted again, so a dead one is found before a Check waits on it.
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_timeout_ms", 5_000),
            ("grpc.http2.max_pings_without_data", 0),
            *options,
        ]
        if tls:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_pem(t.ca), private_key=_pem(t.key), certificate_chain=_pem(t.cert))
            if t.server_name:
                opts.append(("grpc.ssl_target_name_override", t.server_name))
            self._channel = grpc.aio.secure_channel(address, creds, options=opts)
        else:
            self._channel = grpc.aio.insecure_channel(address, options=opts)
        self._stub = guard_pb2_grpc.GuardStub(self._channel)
        self._health = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=_health_request,
            response_deserializer=_health_status,
        )

    @property
    def stub(self) -> guard_pb2_grpc.GuardStub:
        """The generated stub, for what this client does not wrap."""
        return self._stub

    def _deadline(self, method: str, timeout: Optional[float]) -> float:
        return self.timeouts[method] if timeout is None else timeout

    async def __aenter__(self) -> "Guard":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection; calls under way are cancelled."""
        await self._channel.close()

    async def health_status(self, service: str = GUARD_SERVICE, *, timeout: Optional[float] = None) -> str:
        """"serving", "not_serving", "unknown" or "service_unknown", by the gRPC health protocol."""
        status = await self._health(service, timeout=self._deadline("health", timeout))
        return {0: "unknown", 1: "serving", 2: "not_serving", 3: "service_unknown"}.get(status, "unknown")

    async def warmup(self, timeout: float = 5.0) -> None:
        """Opens the connection and waits until the guard's service is
        SERVING (it may still be starting, or catching up with its
        transcript feed), then returns; raises after ``timeout`` seconds
        with the last status or error."""
        deadline = time.monotonic() + timeout
        pause, last = 0.05, "no answer"
        while True:
            left = deadline - time.monotonic()
            try:
                status = await self.health_status(timeout=max(0.001, min(self.timeouts["health"], left)))
                if status == "serving":
                    return
                last = f"{GUARD_SERVICE} is {status}"
            except grpc.aio.AioRpcError as err:
                if err.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED):
                    raise
                last = f"{err.code().name}: {err.details()}"
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"yesguard at {self.address} not ready after {timeout} s: {last}")
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)

    async def check(
        self,
        call_id: str,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        response_id: Optional[str] = None,
        responding_to_ms: Optional[int] = None,
        tool_call_id: Optional[str] = None,
        include_evidence: bool = False,
        wait_ms: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> CheckResult:
        """Asks whether a tool call rests on a plain yes the caller gave.
        Returns the decision whatever it is; raises grpc.aio.AioRpcError
        when the guard cannot be asked (INVALID_ARGUMENT names the field).

        ``wait_ms`` asks for this wait for the caller's turn instead of the
        policy's (capped at its max_wait); without ``timeout`` the deadline
        is then at least wait_ms + 1 s."""
        _require(call_id, "call_id")
        _require(tool, "tool")
        for name, v in (("responding_to_ms", responding_to_ms), ("wait_ms", wait_ms)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise YesguardInputError(f"{name}: want a non-negative int (ms), got {v!r}")
        req = guard_pb2.CheckRequest(
            call_id=call_id,
            tool=tool,
            args=to_struct(args, "args"),
            response_id=response_id or "",
            responding_to_ms=responding_to_ms or 0,
            tool_call_id=tool_call_id or "",
            include_evidence=include_evidence,
            wait_ms=wait_ms or 0,
        )
        if timeout is None:
            timeout = max(self.timeouts["check"], (wait_ms or 0) / 1000 + 1.0)
        r = await self._stub.Check(req, timeout=timeout, metadata=self._metadata)
        outcome = outcome_name(r.outcome)
        if outcome not in OUTCOMES:
            raise YesguardProtocolError(
                f"the guard answered outcome {r.outcome} ({outcome}) for decision {r.decision_id or '(none)'}: not acted on")
        return CheckResult(
            decision_id=r.decision_id,
            outcome=outcome,
            reason=reason_name(r.reason),
            message=r.message,
            original_decision_id=r.original_decision_id or None,
            original_result=from_struct(r.original_result) if r.HasField("original_result") else None,
            original_running=r.original_running,
            waited_ms=int(r.waited_ms),
            approval=r.approval or None,
            approval_expires_at=_time(r.approval_expires_at, r.HasField("approval_expires_at")),
            question_sentence=r.question_sentence,
            answer_text=r.answer_text,
            detail=r.detail,
            evidence=_as_dict(r.evidence) if r.HasField("evidence") else None,
            ask=Ask(text=r.ask.text, lang=r.ask.lang, id=r.ask.id,
                    expires_at=_time(r.ask.expires_at, r.ask.HasField("expires_at")))
            if r.HasField("ask") and r.ask.text else None,
        )

    async def complete(
        self,
        decision_id: str,
        result: Optional[Mapping[str, Any]] = None,
        *,
        failed: bool = False,
        approval: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> str:
        """Reports an allowed call's result, so that a duplicate gets it
        instead of running the tool again; with ``failed``, releases the
        reservation. Returns the id of the Complete's own record."""
        _require(decision_id, "decision_id")
        req = guard_pb2.CompleteRequest(
            decision_id=decision_id, result=to_struct(result, "result"), failed=failed, approval=approval or "")
        r = await self._stub.Complete(req, timeout=self._deadline("complete", timeout), metadata=self._metadata)
        return r.decision_id

    async def redeem(
        self,
        approval: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        tool: Optional[str] = None,
        call_id: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> RedeemResult:
        """For the system of record: verifies an ALLOW's approval against
        the arguments about to be executed and claims the action once."""
        _require(approval, "approval")
        req = guard_pb2.RedeemRequest(
            approval=approval, args=to_struct(args, "args"), tool=tool or "", call_id=call_id or "")
        r = await self._stub.Redeem(req, timeout=self._deadline("redeem", timeout), metadata=self._metadata)
        outcome = outcome_name(r.outcome)
        if outcome not in ("allow", "refuse"):
            raise YesguardProtocolError(f"the guard answered Redeem with outcome {r.outcome} ({outcome}): not acted on")
        return RedeemResult(
            decision_id=r.decision_id,
            outcome=outcome,
            reason=reason_name(r.reason),
            message=r.message,
            allowed_decision_id=r.allowed_decision_id or None,
            call_id=r.call_id or None,
            tool=r.tool or None,
            args_hash=r.args_hash or None,
            expires_at=_time(r.expires_at, r.HasField("expires_at")),
        )

    async def list_decisions(
        self,
        call_id: str,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        include_transcript: bool = False,
        timeout: Optional[float] = None,
    ) -> DecisionPage:
        """One page of a call's decision records, oldest first (the auditor role)."""
        _require(call_id, "call_id")
        req = guard_pb2.ListDecisionsRequest(
            call_id=call_id, page_size=page_size or 0, page_token=page_token or "", include_transcript=include_transcript)
        r = await self._stub.ListDecisions(req, timeout=self._deadline("list_decisions", timeout), metadata=self._metadata)
        return DecisionPage(
            decisions=[_as_dict(d) for d in r.decisions],
            next_page_token=r.next_page_token or None,
            transcript=[_as_dict(t) for t in r.transcript],
        )

    async def publish_transcript(
        self,
        events: Sequence[guard_pb2.TranscriptEvent],
        *,
        guard_sequenced: bool = False,
        timeout: Optional[float] = None,
    ) -> List[guard_pb2.PublishedTranscriptEvent]:
        """PublishTranscript as it is on the wire; TranscriptPublisher is
        the way to use it."""
        req = guard_pb2.PublishTranscriptRequest(events=list(events), guard_sequenced=guard_sequenced)
        r = await self._stub.PublishTranscript(req, timeout=self._deadline("publish", timeout), metadata=self._metadata)
        return list(r.events)


def _require(v: Any, name: str) -> None:
    if not isinstance(v, str) or not v:
        raise YesguardInputError(f"{name}: required (a non-empty string)")


def _health_request(service: str) -> bytes:
    """grpc.health.v1.HealthCheckRequest{service}: field 1, a string."""
    b = service.encode()
    return b"\x0a" + _varint(len(b)) + b if b else b""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _health_status(data: bytes) -> int:
    """grpc.health.v1.HealthCheckResponse's status: field 1, a varint."""
    i = 0
    while i < len(data):
        tag = data[i]
        i += 1
        if tag == 0x08:
            n, shift = 0, 0
            while True:
                byte = data[i]
                i += 1
                n |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    return n
        raise YesguardProtocolError(f"health answer: unexpected field tag {tag}")
    return 0
