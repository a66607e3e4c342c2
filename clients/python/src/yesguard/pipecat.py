"""yesguard in a Pipecat pipeline (pipecat-ai; checked against
pipecat-ai/pipecat's src/pipecat/frames/frames.py,
processors/frame_processor.py and services/llm_service.py).

    from yesguard import Guard, TranscriptPublisher, guard_tool
    from yesguard.pipecat import AgentTranscript, CallerTranscript, function_handler

    guard = Guard("127.0.0.1:50051")
    transcript = TranscriptPublisher(guard, "pipecat", lang="en")
    pipeline = Pipeline([transport.input(), stt, CallerTranscript(transcript, call_id),
                         user_aggregator, llm, tts, transport.output(),
                         AgentTranscript(transcript, call_id), assistant_aggregator])
    submit = guard_tool(do_submit, guard=guard, tool="submit_appeal", call_id=call_id, publisher=transcript)
    llm.register_function("submit_appeal", function_handler(submit))

Rules that hold:
- The caller's words are published before the frame goes on: the LLM
  (and so the tool call) sees a final only after the guard's stream holds
  it.
- The agent's words are what was played: the TTSTextFrames seen after
  transport.output() between BotStartedSpeakingFrame and
  BotStoppedSpeakingFrame, joined; an InterruptionFrame while the bot
  speaks publishes what was played so far, interrupted.
- A publish that fails is handed to on_error (default: logged) and never
  stops the pipeline; the publisher marks the call lost, and guard_tool
  given that publisher refuses until a publish succeeds again.
- Pipecat's frames carry no response id: the Check's response_id is left
  out (the caller's final reaches the guard before the LLM runs, so filler
  spoken with the call comes after the guard has judged).
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, List, Optional

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    CancelFrame,
    EndFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    TranscriptionFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from ._guard_tool import GuardedTool
from ._publisher import TranscriptPublisher

log = logging.getLogger("yesguard.pipecat")

OnError = Callable[[BaseException], None]


def _log_error(err: BaseException) -> None:
    log.warning("yesguard: a transcript event was not published; the call is refused until one is: %s", err)


def _lang(frame: Any) -> Optional[str]:
    lang = getattr(frame, "language", None)
    if lang is None:
        return None
    return str(getattr(lang, "value", lang)) or None


class CallerTranscript(FrameProcessor):
    """Put right after the STT service: publishes what the caller says."""

    def __init__(self, publisher: TranscriptPublisher, call_id: str, *, on_error: OnError = _log_error, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pub, self._call, self._on_error = publisher, call_id, on_error

    async def process_frame(self, frame: Any, direction: Any) -> None:
        await super().process_frame(frame, direction)
        try:
            # Interims first: were one ever a kind of final, it must not count as one.
            if isinstance(frame, InterimTranscriptionFrame):
                if frame.text.strip():
                    await self._pub.caller(self._call, frame.text, final=False, lang=_lang(frame))
            elif isinstance(frame, TranscriptionFrame):
                if frame.text.strip():
                    await self._pub.caller(self._call, frame.text, lang=_lang(frame))
            elif isinstance(frame, UserStartedSpeakingFrame):
                await self._pub.speech_started(self._call)
            elif isinstance(frame, UserStoppedSpeakingFrame):
                await self._pub.speech_stopped(self._call)
        except Exception as err:  # noqa: BLE001 (the pipeline goes on; the call is lost)
            self._on_error(err)
        await self.push_frame(frame, direction)


class AgentTranscript(FrameProcessor):
    """Put right after transport.output(): publishes what the bot said as
    it was played, and call_ended at the pipeline's end."""

    def __init__(self, publisher: TranscriptPublisher, call_id: str, *, on_error: OnError = _log_error, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pub, self._call, self._on_error = publisher, call_id, on_error
        self._parts: List[str] = []
        self._speaking = False
        self._ended = False

    async def _flush(self, interrupted: bool) -> None:
        text = "".join(self._parts).strip()
        self._parts = []
        if text:
            await self._pub.agent(self._call, text, interrupted=interrupted)

    async def process_frame(self, frame: Any, direction: Any) -> None:
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            try:
                if isinstance(frame, BotStartedSpeakingFrame):
                    self._speaking = True
                elif isinstance(frame, TTSTextFrame):
                    spaced = getattr(frame, "includes_inter_frame_spaces", False)
                    self._parts.append(frame.text if spaced else f" {frame.text}")
                elif isinstance(frame, BotStoppedSpeakingFrame):
                    self._speaking = False
                    await self._flush(interrupted=False)
                elif isinstance(frame, InterruptionFrame) and self._speaking:
                    await self._flush(interrupted=True)
                elif isinstance(frame, (EndFrame, CancelFrame)) and not self._ended:
                    self._ended = True
                    await self._flush(interrupted=self._speaking)
                    await self._pub.call_ended(self._call)
            except Exception as err:  # noqa: BLE001
                self._on_error(err)
        await self.push_frame(frame, direction)


def function_handler(guarded: GuardedTool, *, call_id: Optional[str] = None) -> Callable[[Any], Awaitable[None]]:
    """A handler for ``llm.register_function(name, handler)``: it gets
    FunctionCallParams, runs the guarded tool with ``params.arguments``
    (the tool only on ALLOW), and gives the model its result, the
    original's on DUPLICATE, or the guard's message."""

    async def handler(params: Any) -> None:
        out = await guarded(dict(params.arguments), call_id=call_id, tool_call_id=params.tool_call_id)
        await params.result_callback(out)

    return handler
