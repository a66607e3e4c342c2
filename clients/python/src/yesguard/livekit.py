"""yesguard in a LiveKit Agents (Python) session (livekit-agents; checked
against livekit/agents' livekit-agents/livekit/agents/voice/events.py,
voice/speech_handle.py, voice/events.py's RunContext and
llm/tool_context.py's ToolError).

    from livekit.agents import Agent, RunContext, function_tool
    from yesguard import Guard, TranscriptPublisher, guard_tool
    from yesguard.livekit import SessionTranscript, run_tool

    guard = Guard("127.0.0.1:50051")
    call_id = f"{ctx.room.name}-{ctx.job.id}"
    transcript = SessionTranscript(session, TranscriptPublisher(guard, "livekit", lang="en"), call_id)
    submit = guard_tool(do_submit, guard=guard, tool="submit_appeal", call_id=call_id,
                        publisher=transcript.publisher)

    class Appeals(Agent):
        @function_tool()
        async def submit_appeal(self, context: RunContext, appeal_id: str):
            \"\"\"Submit the caller's appeal once they have confirmed it.\"\"\"
            return await run_tool(submit, context, {"appeal_id": appeal_id})

Rules that hold:
- LiveKit calls event handlers synchronously (an async one is refused):
  each handler only queues its event, and one task publishes the queue in
  order, so seq follows the events' order.
- The agent's words are the assistant ChatMessages of
  "conversation_item_added" (LiveKit keeps only the played text of an
  interrupted reply), each with the id of the SpeechHandle whose
  chat_items hold it (from "speech_created") as its response_id: the same
  id run_tool sends as the Check's response_id, so filler spoken for that
  reply is not "the agent spoke after the yes".
- A publish that fails goes to on_error (default: logged); the publisher
  marks the call lost, and guard_tool given it refuses until a publish
  succeeds again.
- run_tool raises ToolError(message) when the tool did not run: LiveKit
  gives its message to the model.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Deque, List, Mapping, Optional, Tuple, Type

from collections import deque

from ._guard_tool import GuardedTool
from ._json import JsonObject
from ._publisher import TranscriptPublisher

log = logging.getLogger("yesguard.livekit")

#: How many recent speech handles are kept to find a message's response id.
MAX_HANDLES = 64


def _log_error(err: BaseException) -> None:
    log.warning("yesguard: a transcript event was not published; the call is refused until one is: %s", err)


class SessionTranscript:
    """Publishes an AgentSession's transcript to the guard; attach() (done
    by the constructor) registers its handlers on the session."""

    def __init__(
        self,
        session: Any,
        publisher: TranscriptPublisher,
        call_id: str,
        *,
        on_error: Callable[[BaseException], None] = _log_error,
        attach: bool = True,
    ) -> None:
        self.session, self.publisher, self.call_id = session, publisher, call_id
        self._on_error = on_error
        self._handles: Deque[Any] = deque(maxlen=MAX_HANDLES)
        self._queue: "asyncio.Queue[Optional[Tuple[str, Mapping[str, Any]]]]" = asyncio.Queue()
        self._worker: Optional["asyncio.Task[None]"] = None
        if attach:
            self.attach()

    def attach(self) -> None:
        on = self.session.on
        on("speech_created", self._speech_created)
        on("user_input_transcribed", self._user_input_transcribed)
        on("user_state_changed", self._user_state_changed)
        on("conversation_item_added", self._conversation_item_added)
        on("close", self._close)

    # The handlers: synchronous, as LiveKit calls them.

    def _speech_created(self, ev: Any) -> None:
        self._handles.append(ev.speech_handle)

    def _user_input_transcribed(self, ev: Any) -> None:
        if ev.transcript.strip():
            lang = str(ev.language) if ev.language else None
            self._put("caller", {"text": ev.transcript, "final": bool(ev.is_final), "lang": lang})

    def _user_state_changed(self, ev: Any) -> None:
        if ev.new_state == "speaking":
            self._put("speech_started", {})
        elif ev.old_state == "speaking":
            self._put("speech_stopped", {})

    def _conversation_item_added(self, ev: Any) -> None:
        item = ev.item
        if getattr(item, "role", None) != "assistant":
            return
        text = (item.text_content or "").strip()
        if not text:
            return
        rid = next((h.id for h in reversed(self._handles) if any(i.id == item.id for i in h.chat_items)), None)
        self._put("agent", {"text": text, "interrupted": bool(item.interrupted), "response_id": rid})

    def _close(self, ev: Any) -> None:
        self._put("call_ended", {})
        self._queue.put_nowait(None)

    def _put(self, kind: str, fields: Mapping[str, Any]) -> None:
        self._queue.put_nowait((kind, fields))
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if item is None:
                    return
                await self._publish(*item)
            except Exception as err:  # noqa: BLE001 (the session goes on; the call is lost)
                self._on_error(err)
            finally:
                self._queue.task_done()

    async def _publish(self, kind: str, f: Mapping[str, Any]) -> None:
        p, call = self.publisher, self.call_id
        if kind == "caller":
            await p.caller(call, f["text"], final=f["final"], lang=f["lang"])
        elif kind == "agent":
            await p.agent(call, f["text"], interrupted=f["interrupted"], response_id=f["response_id"])
        elif kind == "speech_started":
            await p.speech_started(call)
        elif kind == "speech_stopped":
            await p.speech_stopped(call)
        elif kind == "call_ended":
            await p.call_ended(call)

    async def flush(self) -> None:
        """Waits until every event queued so far is published (or failed)."""
        await self._queue.join()

    async def aclose(self) -> None:
        """Publishes what is queued, then stops."""
        if self._worker is not None and not self._worker.done():
            self._queue.put_nowait(None)
            await self._worker


def _tool_error() -> Type[Exception]:
    from livekit.agents import ToolError

    err: Type[Exception] = ToolError
    return err


async def run_tool(
    guarded: GuardedTool,
    context: Any,
    args: Mapping[str, Any],
    *,
    call_id: Optional[str] = None,
    tool_error: Optional[Type[Exception]] = None,
) -> JsonObject:
    """Runs a guard_tool from a @function_tool body: the Check carries the
    reply's speech handle id (``context.speech_handle.id``) as its
    response_id and ``context.function_call.call_id`` as its tool_call_id.
    Returns the tool's result (or the original's, for a duplicate); raises
    ToolError with the guard's message when the tool did not run."""
    out = await guarded(dict(args), call_id=call_id, response_id=context.speech_handle.id,
                        tool_call_id=context.function_call.call_id)
    if isinstance(out, str):
        raise (tool_error or _tool_error())(out)
    return out
