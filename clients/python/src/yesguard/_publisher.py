"""TranscriptPublisher: a call's transcript to the guard over gRPC
(PublishTranscript), for a pipeline that wants one dependency. The guard
writes each event into its transcript stream, as a NATS publisher's, and
answers once it is stored.

Rules that hold:
- Events of one call are sent one at a time, in the order publish() is
  called (a lock per call): the stream stores them in that order.
- Numbered by the client (the default): seq counts per (call, source,
  epoch) from 1; each publisher gets a new epoch, larger than any this
  process gave before. A publish that failed in a way that may have been
  stored (UNAVAILABLE, DEADLINE_EXCEEDED) is retried with the same seq,
  which the stream stores once; after the retries it raises, and the seq
  stays used (a gap, which the guard refuses on: fail closed).
- Numbered by the guard (guard_sequenced=True): the publisher sends no seq
  or epoch, and does not retry (a retry would be stored again under new
  numbers); the guard's numbers come back in PublishedEvent.
- An event the guard would reject (no speaker, an empty final, too much
  text, a call id that is not one subject token) raises YesguardInputError
  before it is sent.
- A call whose last publish failed is lost() until a later publish of it
  succeeds: the guard may lack the caller's latest words, so guard_tool,
  given the publisher, refuses without asking.
- Memory: one counter and lock per call, forgotten on call_ended or forget().
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Dict, Optional

import grpc

from ._client import Guard
from ._json import YesguardInputError
from .v1 import guard_pb2

TYPES = ("transcript", "speech_started", "speech_stopped", "call_ended")
SPEAKERS = ("caller", "agent")

_SOURCE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BAD_CALL_ID = re.compile(r"[\s.*>\x00-\x1f\x7f]")
_RETRY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

_last_epoch = 0


def _next_epoch() -> int:
    """The time in ms, above every epoch this process gave before."""
    global _last_epoch
    _last_epoch = max(time.time_ns() // 1_000_000, _last_epoch + 1)
    return _last_epoch


@dataclass(frozen=True)
class PublishedEvent:
    """Where the guard's stream stored an event."""

    call_id: str
    source: str
    epoch: int
    seq: int
    stream_seq: int
    #: The stream held it already (a retry of a stored event): stored once.
    duplicate: bool


class TranscriptPublisher:
    """Publishes one source's transcript events over gRPC.

    ``source`` names this publisher ("stt", "tts", "pipeline"). ``lang`` is
    the language of events that give none. ``guard_sequenced`` lets the
    guard number the events. ``retries`` bounds the retries of a publish
    numbered by the client; ``timeout`` is each try's deadline (seconds).
    """

    def __init__(
        self,
        guard: Guard,
        source: str = "pipeline",
        *,
        lang: Optional[str] = None,
        epoch: Optional[int] = None,
        guard_sequenced: bool = False,
        retries: int = 2,
        timeout: Optional[float] = None,
        max_text_bytes: int = 4096,
    ) -> None:
        if not isinstance(guard, Guard):
            raise YesguardInputError("guard: want a yesguard.Guard")
        if not isinstance(source, str) or not _SOURCE.match(source):
            raise YesguardInputError(f"source {source!r}: want 1-64 of A-Z a-z 0-9 _ -")
        if guard_sequenced and epoch is not None:
            raise YesguardInputError("epoch: with guard_sequenced the guard keeps the epoch")
        if epoch is not None and (not isinstance(epoch, int) or epoch < 1):
            raise YesguardInputError("epoch: want a positive int")
        self.guard = guard
        self.source = source
        self.lang = lang
        self.guard_sequenced = guard_sequenced
        self.epoch = 0 if guard_sequenced else (epoch if epoch is not None else _next_epoch())
        self.retries = retries
        self.timeout = timeout
        self.max_text_bytes = max_text_bytes
        self._seqs: Dict[str, int] = {}
        self._locks: Dict[str, asyncio.Lock] = {}
        self._lost: Dict[str, BaseException] = {}

    async def publish(
        self,
        call_id: str,
        type: str,
        *,
        speaker: Optional[str] = None,
        text: Optional[str] = None,
        final: bool = False,
        start_ms: Optional[int] = None,
        end_ms: Optional[int] = None,
        lang: Optional[str] = None,
        response_id: Optional[str] = None,
        interrupted: bool = False,
        confidence: Optional[float] = None,
    ) -> PublishedEvent:
        """Publishes one event and returns once the guard's stream stored it."""
        self._validate(call_id, type, speaker, text, final, start_ms, end_ms)
        ev = guard_pb2.TranscriptEvent(
            call_id=call_id,
            type=type,
            speaker=speaker or "",
            text=text or "",
            final=final,
            start_ms=start_ms or 0,
            end_ms=end_ms or 0,
            lang=lang or self.lang or "",
            response_id=response_id or "",
            interrupted=interrupted,
            confidence=confidence or 0.0,
            source=self.source,
        )
        lock = self._locks.setdefault(call_id, asyncio.Lock())
        async with lock:
            try:
                if self.guard_sequenced:
                    (got,) = await self.guard.publish_transcript([ev], guard_sequenced=True, timeout=self.timeout)
                else:
                    seq = self._seqs.get(call_id, 0) + 1
                    self._seqs[call_id] = seq
                    ev.epoch, ev.seq = self.epoch, seq
                    got = await self._send_numbered(ev)
            except BaseException as err:
                self._lost[call_id] = err
                raise
            self._lost.pop(call_id, None)
        if type == "call_ended":
            self.forget(call_id)
        return PublishedEvent(call_id, got.source, got.epoch, got.seq, got.stream_seq, got.duplicate)

    async def _send_numbered(self, ev: guard_pb2.TranscriptEvent) -> guard_pb2.PublishedTranscriptEvent:
        for attempt in range(self.retries + 1):
            try:
                (got,) = await self.guard.publish_transcript([ev], timeout=self.timeout)
                return got
            except grpc.aio.AioRpcError as err:
                # The same seq again: if the first try was stored after
                # all, the stream answers this one as a duplicate.
                if err.code() not in _RETRY or attempt == self.retries:
                    raise
                await asyncio.sleep(0.1 * 2**attempt)
        raise AssertionError("unreachable")

    async def caller(self, call_id: str, text: str, *, final: bool = True, **kw: object) -> PublishedEvent:
        """The caller's words: final by default."""
        return await self.publish(call_id, "transcript", speaker="caller", text=text, final=final, **kw)  # type: ignore[arg-type]

    async def agent(self, call_id: str, text: str, *, final: bool = True, **kw: object) -> PublishedEvent:
        """The agent's words as spoken (for an interruption, what was played)."""
        return await self.publish(call_id, "transcript", speaker="agent", text=text, final=final, **kw)  # type: ignore[arg-type]

    async def speech_started(self, call_id: str, speaker: str = "caller", *, start_ms: Optional[int] = None) -> PublishedEvent:
        return await self.publish(call_id, "speech_started", speaker=speaker, start_ms=start_ms)

    async def speech_stopped(self, call_id: str, speaker: str = "caller", *, end_ms: Optional[int] = None) -> PublishedEvent:
        return await self.publish(call_id, "speech_stopped", speaker=speaker, end_ms=end_ms)

    async def call_ended(self, call_id: str) -> PublishedEvent:
        """Publishes call_ended and forgets the call."""
        return await self.publish(call_id, "call_ended")

    def lost(self, call_id: str) -> Optional[BaseException]:
        """Why the call's last publish failed, or None: while set, the guard
        may lack the caller's latest words."""
        return self._lost.get(call_id)

    def forget(self, call_id: str) -> None:
        """Forgets a call's seq without publishing (the call ended elsewhere)."""
        self._seqs.pop(call_id, None)
        self._lost.pop(call_id, None)
        lock = self._locks.get(call_id)
        if lock is not None and not lock.locked():
            del self._locks[call_id]

    def _validate(self, call_id, type, speaker, text, final, start_ms, end_ms) -> None:  # type: ignore[no-untyped-def]
        if not isinstance(call_id, str) or not call_id or _BAD_CALL_ID.search(call_id):
            raise YesguardInputError(f"call_id {call_id!r}: want one NATS subject token: no '.', '*', '>' or whitespace")
        if type not in TYPES:
            raise YesguardInputError(f"type {type!r}: want one of {', '.join(TYPES)}")
        if speaker is None and type != "call_ended":
            raise YesguardInputError(f"speaker: required for a {type} event ('caller' or 'agent')")
        if speaker is not None and speaker not in SPEAKERS:
            raise YesguardInputError(f"speaker {speaker!r}: want 'caller' or 'agent'")
        if type == "transcript" and final and not (text or "").strip():
            raise YesguardInputError("text: a final transcript needs words (the guard drops an empty final)")
        if text is not None and len(text.encode()) > self.max_text_bytes:
            raise YesguardInputError(f"text: {len(text.encode())} bytes, over the guard's limit of {self.max_text_bytes}")
        for name, v in (("start_ms", start_ms), ("end_ms", end_ms)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise YesguardInputError(f"{name}: want a non-negative int (ms since the call started)")
        if start_ms is not None and end_ms is not None and end_ms < start_ms:
            raise YesguardInputError("end_ms: before start_ms")
