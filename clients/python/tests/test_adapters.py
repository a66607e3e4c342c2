"""The Pipecat and LiveKit adapters against a real guard. Neither framework
can be installed here (no PyPI), so where it is missing the test puts in
small fakes of the framework objects the adapters read, with the names and
fields of the frameworks' current source (pipecat-ai/pipecat
src/pipecat/frames/frames.py, processors/frame_processor.py,
services/llm_service.py; livekit/agents livekit-agents/livekit/agents/
voice/events.py, voice/speech_handle.py, llm/chat_context.py,
llm/tool_context.py). With the framework installed, its own classes are
used."""

from __future__ import annotations

import enum
import importlib
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import pytest

from yesguard import Guard, TranscriptPublisher, guard_tool
from yesguard.testing import RunningGuard

QUESTION_PARTS = ["Shall I submit", "your appeal A-17 now?"]
QUESTION = "Shall I submit your appeal A-17 now?"


def _fake_pipecat() -> None:
    try:
        importlib.import_module("pipecat.frames.frames")
        return
    except ImportError:
        pass
    frames = types.ModuleType("pipecat.frames.frames")

    @dataclass
    class Frame:
        pass

    @dataclass
    class TextFrame(Frame):
        text: str = ""
        includes_inter_frame_spaces: bool = False

    @dataclass
    class TranscriptionFrame(TextFrame):
        user_id: str = ""
        timestamp: str = ""
        language: Any = None

    @dataclass
    class InterimTranscriptionFrame(TextFrame):
        user_id: str = ""
        timestamp: str = ""
        language: Any = None

    @dataclass
    class TTSTextFrame(TextFrame):
        pass

    for name in ("BotStartedSpeakingFrame", "BotStoppedSpeakingFrame", "UserStartedSpeakingFrame",
                 "UserStoppedSpeakingFrame", "InterruptionFrame", "EndFrame", "CancelFrame"):
        setattr(frames, name, dataclass(type(name, (Frame,), {})))
    for c in (Frame, TextFrame, TranscriptionFrame, InterimTranscriptionFrame, TTSTextFrame):
        setattr(frames, c.__name__, c)

    proc = types.ModuleType("pipecat.processors.frame_processor")

    class FrameDirection(enum.Enum):
        DOWNSTREAM = 1
        UPSTREAM = 2

    class FrameProcessor:
        def __init__(self, **kwargs: Any) -> None:
            self.pushed: List[Any] = []

        async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
            pass

        async def push_frame(self, frame: Any, direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
            self.pushed.append(frame)

    proc.FrameDirection, proc.FrameProcessor = FrameDirection, FrameProcessor  # type: ignore[attr-defined]
    for name in ("pipecat", "pipecat.frames", "pipecat.processors"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["pipecat.frames.frames"] = frames
    sys.modules["pipecat.processors.frame_processor"] = proc


@dataclass
class FakeParams:
    """FunctionCallParams' fields that the handler reads."""

    function_name: str
    tool_call_id: str
    arguments: Dict[str, Any]
    results: List[Any] = field(default_factory=list)

    async def result_callback(self, result: Any, *, properties: Any = None) -> None:
        self.results.append(result)


async def test_pipecat(guard: RunningGuard) -> None:
    _fake_pipecat()
    from pipecat.frames import frames as f
    from pipecat.processors.frame_processor import FrameDirection

    from yesguard.pipecat import AgentTranscript, CallerTranscript, function_handler

    down = FrameDirection.DOWNSTREAM
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "pipecat", lang="en")
        call = guard.call_id("pipecat")
        caller, agent = CallerTranscript(pub, call), AgentTranscript(pub, call)
        ran: List[Dict[str, Any]] = []

        def do_submit(args: Dict[str, Any]) -> Dict[str, Any]:
            ran.append(args)
            return {"status": "submitted"}

        handler = function_handler(guard_tool(do_submit, guard=g, tool="submit_appeal", call_id=call, publisher=pub))

        await agent.process_frame(f.BotStartedSpeakingFrame(), down)
        for part in QUESTION_PARTS:
            await agent.process_frame(f.TTSTextFrame(text=part), down)
        await agent.process_frame(f.BotStoppedSpeakingFrame(), down)
        await caller.process_frame(f.UserStartedSpeakingFrame(), down)
        await caller.process_frame(f.InterimTranscriptionFrame(text="Yes", user_id="u", timestamp="t"), down)
        await caller.process_frame(f.TranscriptionFrame(text="Yes, please.", user_id="u", timestamp="t"), down)
        await caller.process_frame(f.UserStoppedSpeakingFrame(), down)
        if hasattr(caller, "pushed"):
            assert len(caller.pushed) == 4, "every frame goes on"

        p = FakeParams("submit_appeal", "call_1", {"appeal_id": "A-17"})
        await handler(p)
        await handler(FakeParams("submit_appeal", "call_2", {"appeal_id": "A-17"}))
        assert p.results == [{"status": "submitted"}]
        assert len(ran) == 1, "the model called twice; the tool ran once"

        page = await g.list_decisions(call, include_transcript=True)
        assert [(t["speaker"], t["text"]) for t in page.transcript] == [("agent", QUESTION), ("caller", "Yes, please.")]
        assert [d["outcome"] for d in page.decisions if d.get("kind") == "check"] == ["allow", "duplicate"]
        assert [d["tool_call_id"] for d in page.decisions if d.get("kind") == "check"] == ["call_1", "call_2"]

        # An interruption publishes what was played, marked; the end, call_ended.
        await agent.process_frame(f.BotStartedSpeakingFrame(), down)
        await agent.process_frame(f.TTSTextFrame(text="Your appeal is"), down)
        await agent.process_frame(f.InterruptionFrame(), down)
        await agent.process_frame(f.EndFrame(), down)
        page = await g.list_decisions(call, include_transcript=True)
        assert page.transcript[-1]["text"] == "Your appeal is" and page.transcript[-1].get("interrupted") is True


def _fake_livekit() -> None:
    try:
        importlib.import_module("livekit.agents")
        return
    except ImportError:
        pass
    agents = types.ModuleType("livekit.agents")

    class ToolError(Exception):
        def __init__(self, message: str) -> None:
            super().__init__(message)
            self.message = message

    agents.ToolError = ToolError  # type: ignore[attr-defined]
    sys.modules.setdefault("livekit", types.ModuleType("livekit"))
    sys.modules["livekit.agents"] = agents


class FakeSession:
    """AgentSession's .on(event, callback) with synchronous callbacks."""

    def __init__(self) -> None:
        self.handlers: Dict[str, List[Callable[[Any], None]]] = {}

    def on(self, event: str, callback: Callable[[Any], None]) -> None:
        import inspect

        if inspect.iscoroutinefunction(callback):
            raise ValueError("Cannot register an async callback with `.on()`")
        self.handlers.setdefault(event, []).append(callback)

    def emit(self, event: str, ev: Any) -> None:
        for cb in self.handlers.get(event, []):
            cb(ev)


def _ns(**kw: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**kw)


async def test_livekit(guard: RunningGuard) -> None:
    _fake_livekit()
    from livekit.agents import ToolError

    from yesguard.livekit import SessionTranscript, run_tool

    async with Guard(guard.grpc) as g:
        call = guard.call_id("livekit")
        session = FakeSession()
        transcript = SessionTranscript(session, TranscriptPublisher(g, "livekit", lang="en"), call)
        ran: List[Dict[str, Any]] = []

        async def do_submit(args: Dict[str, Any]) -> Dict[str, Any]:
            ran.append(args)
            return {"status": "submitted"}

        submit = guard_tool(do_submit, guard=g, tool="submit_appeal", call_id=call, publisher=transcript.publisher)

        # The reply that asks, then the caller's answer.
        asking = _ns(id="speech_ask", chat_items=[])
        session.emit("speech_created", _ns(speech_handle=asking, user_initiated=False, source="generate_reply"))
        msg = _ns(id="item_1", role="assistant", text_content=QUESTION, interrupted=False)
        asking.chat_items.append(msg)
        session.emit("conversation_item_added", _ns(item=msg))
        session.emit("user_state_changed", _ns(old_state="listening", new_state="speaking"))
        session.emit("user_input_transcribed", _ns(transcript="Yes, please.", is_final=True, language="en", speaker_id=None))
        session.emit("user_state_changed", _ns(old_state="speaking", new_state="listening"))

        # The reply that calls the tool says filler first, under its own
        # speech handle: the Check carries that id, so it is not "the agent
        # spoke after the yes".
        acting = _ns(id="speech_act", chat_items=[])
        session.emit("speech_created", _ns(speech_handle=acting, user_initiated=False, source="generate_reply"))
        filler = _ns(id="item_2", role="assistant", text_content="One moment while I submit that.", interrupted=False)
        acting.chat_items.append(filler)
        session.emit("conversation_item_added", _ns(item=filler))
        await transcript.flush()

        ctx = _ns(speech_handle=acting, function_call=_ns(call_id="fc_1"))
        out = await run_tool(submit, ctx, {"appeal_id": "A-17"})
        assert out == {"status": "submitted"} and len(ran) == 1

        # Another appeal rests on no yes: ToolError with the guard's message.
        with pytest.raises(ToolError) as err:
            await run_tool(submit, _ns(speech_handle=acting, function_call=_ns(call_id="fc_2")), {"appeal_id": "B-2"})
        assert str(err.value)
        assert len(ran) == 1

        page = await g.list_decisions(call, include_transcript=True)
        turns = [(t["speaker"], t.get("response_id")) for t in page.transcript]
        assert turns == [("agent", "speech_ask"), ("caller", None), ("agent", "speech_act")], turns
        session.emit("close", _ns(reason="user_initiated", error=None))
        await transcript.aclose()


async def test_a_failed_publish_refuses_the_tool(guard: RunningGuard) -> None:
    """The caller's "Wait, no." that never reached the guard must not let
    the yes before it stand: guard_tool refuses without asking."""
    async with Guard(guard.grpc) as g:
        call = guard.call_id("lost")
        pub = TranscriptPublisher(g, "lost", lang="en")
        await pub.agent(call, QUESTION)
        await pub.caller(call, "Yes, please.")
        async with Guard("127.0.0.1:1", timeouts={"publish": 0.3}) as dead:
            lost = TranscriptPublisher(dead, "lost", lang="en", retries=0)
            with pytest.raises(Exception):
                await lost.caller(call, "Wait, no.")
        ran: List[Any] = []
        tool = guard_tool(lambda a: ran.append(a) or {"ok": True}, guard=g, tool="submit_appeal", call_id=call, publisher=lost)
        out = await tool({"appeal_id": "A-17"})
        assert isinstance(out, str) and "NOT taken" in out and ran == []
