"""guard_tool: a consequential tool that runs only on the guard's ALLOW,
and reports its result so that a repeat gets the same result instead of a
second action.

Rules that hold (fail closed):
- The tool runs only when Check answers ALLOW. Any other outcome, and a
  Check that fails (guard down, deadline passed, an answer this client
  cannot read), returns a message for the model instead. Once the tool
  ran, its result is returned even if Complete fails.
- A tool that raises is reported with Complete failed (the guard then
  judges a retry afresh), and the error is raised again: raise only when
  the action did not happen.
- Given the call's TranscriptPublisher, a call whose last publish failed
  is refused without asking: the guard may lack the caller's "Wait, no.".
- DUPLICATE never runs the tool: it returns the original's result, or,
  while the original runs or when its result is unknown, the guard's
  message telling the model not to report the action done.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Awaitable, Callable, Mapping, Optional, Union, cast

import grpc

from ._client import Ask, CheckResult, Guard, YesguardProtocolError
from ._json import JsonObject, YesguardInputError, to_struct
from ._publisher import TranscriptPublisher

#: What the model gets when the guard cannot be asked.
UNAVAILABLE_MESSAGE = (
    "The confirmation check could not be made, so the action was NOT taken. Do not tell the caller it is done. "
    "Ask them to confirm once more, then try again."
)

ToolFn = Callable[[JsonObject], Union[Awaitable[Mapping[str, Any]], Mapping[str, Any]]]
#: The guarded tool: (args, call_id=, response_id=, tool_call_id=,
#: responding_to_ms=) -> the tool's result, the original's, or a message.
GuardedTool = Callable[..., Awaitable[Union[JsonObject, str]]]
#: Speaks the guard's question through the pipeline's TTS (sync or async).
Speak = Callable[[str, Ask], Any]


def asked_message(tool: str, ask: Ask) -> str:
    """What the model gets once the guard's question was spoken for it."""
    return (f'The caller was just asked, in the guard\'s words: "{ask.text}" Do not ask again and do not say it is done: '
            f"wait for the caller's answer. If they say yes, call {tool} again with the same arguments; if not, do not.")


def guard_tool(
    fn: Optional[ToolFn] = None,
    *,
    guard: Guard,
    tool: Optional[str] = None,
    call_id: Union[None, str, Callable[[JsonObject], str]] = None,
    wait_ms: Optional[int] = None,
    timeout: Optional[float] = None,
    include_evidence: bool = False,
    publisher: Optional["TranscriptPublisher"] = None,
    on_refuse: Optional[Callable[[CheckResult], str]] = None,
    on_error: Optional[Callable[[BaseException], str]] = None,
    on_decision: Optional[Callable[[CheckResult, JsonObject], None]] = None,
    on_complete_error: Optional[Callable[[BaseException, CheckResult], None]] = None,
    speak: Optional[Speak] = None,
) -> Any:
    """Wraps ``fn(args) -> dict`` (sync or async): Check, then run, then
    Complete (Complete failed when it raises); or, without running it,
    return the message for the model. Use it as a call,
    ``guard_tool(fn, guard=g)``, or a decorator, ``@guard_tool(guard=g)``.

    ``tool`` defaults to fn's name. ``call_id`` is the call, or a function
    of the arguments giving it; a call's own ``call_id=`` overrides it.
    ``on_refuse`` gives what the model gets when the tool does not run
    (default: the guard's message); raise there to use the framework's
    own error path (LiveKit's ToolError). ``publisher``: the call's
    TranscriptPublisher, whose failed publishes refuse. ``on_error``: what the model gets
    when the guard cannot be asked (default UNAVAILABLE_MESSAGE).
    ``speak(text, ask)``: speaks the guard's own question, when a refusal
    carries one, through the pipeline's TTS (LiveKit: ``session.say``;
    Pipecat: queue a ``TTSSpeakFrame``); the model is then told that it was
    asked and must wait for the answer. A speak that raises leaves the
    guard's message as it is.
    """
    if not isinstance(guard, Guard):
        raise YesguardInputError("guard_tool guard: required (a yesguard.Guard)")

    def wrap(f: ToolFn) -> GuardedTool:
        name = str(tool or getattr(f, "__name__", "") or "")
        if not name:
            raise YesguardInputError("guard_tool tool: required (fn has no name)")
        refuse = on_refuse or (lambda d: d.message)
        unavailable = on_error or (lambda _e: UNAVAILABLE_MESSAGE)

        @functools.wraps(f)
        async def guarded(
            args: Mapping[str, Any],
            *,
            call_id: Optional[str] = None,
            response_id: Optional[str] = None,
            tool_call_id: Optional[str] = None,
            responding_to_ms: Optional[int] = None,
        ) -> Union[JsonObject, str]:
            plain = dict(args)
            cid = call_id or (default_call_id(plain) if callable(default_call_id) else default_call_id)
            if not cid:
                raise YesguardInputError(f"{name}: no call id: give guard_tool call_id= or the call's call_id=")
            to_struct(plain, "args")  # a bad argument raises here, not as "unavailable"
            if publisher is not None:
                lost = publisher.lost(cid)
                if lost is not None:
                    return unavailable(lost)
            try:
                d = await guard.check(
                    cid, name, plain, response_id=response_id, tool_call_id=tool_call_id,
                    responding_to_ms=responding_to_ms, wait_ms=wait_ms, timeout=timeout,
                    include_evidence=include_evidence)
            except (grpc.aio.AioRpcError, YesguardProtocolError, asyncio.TimeoutError) as err:
                return unavailable(err)
            if on_decision is not None:
                on_decision(d, plain)
            if d.outcome == "duplicate":
                if not d.original_running and d.original_result is not None:
                    return d.original_result
                return refuse(d)
            if d.outcome == "refuse" and d.ask is not None and speak is not None:
                try:
                    spoken = speak(d.ask.text, d.ask)
                    if inspect.isawaitable(spoken):
                        await spoken
                except Exception:
                    return refuse(d)
                return asked_message(name, d.ask)
            if d.outcome != "allow":
                return refuse(d)

            try:
                out = f(plain)
                result = await out if inspect.isawaitable(out) else out
            except BaseException:
                await _complete(guard, d, None, True, on_complete_error)
                raise
            payload: Optional[Mapping[str, Any]] = None
            try:
                to_struct(result, f"{name} result")
                payload = result
            except YesguardInputError as err:
                # The action ran: it is reported done (no result to
                # replay), never failed, which would let a retry run it again.
                if on_complete_error is not None:
                    on_complete_error(err, d)
            await _complete(guard, d, payload, False, on_complete_error)
            return cast(JsonObject, result)

        return guarded

    default_call_id = call_id
    if fn is not None:
        return wrap(fn)
    return wrap


async def _complete(
    guard: Guard,
    d: CheckResult,
    result: Optional[Mapping[str, Any]],
    failed: bool,
    on_error: Optional[Callable[[BaseException, CheckResult], None]],
) -> None:
    """Complete, retried on transient errors. A retry answered "already
    reported" (FAILED_PRECONDITION) means an earlier attempt landed."""
    pause = 0.1
    for attempt in range(3):
        try:
            await guard.complete(d.decision_id, result, failed=failed)
            return
        except grpc.aio.AioRpcError as err:
            code = err.code()
            if attempt > 0 and code == grpc.StatusCode.FAILED_PRECONDITION:
                return
            if attempt == 2 or code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                if on_error is not None:
                    on_error(err, d)
                return
        await asyncio.sleep(pause)
        pause *= 2
