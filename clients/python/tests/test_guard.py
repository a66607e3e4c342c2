"""Guard, TranscriptPublisher and guard_tool against a real guard: the
seven buyer probes, the race, duplicates, Redeem with the JWKS, the wait."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from yesguard import UNAVAILABLE_MESSAGE, Ask, Guard, TranscriptPublisher, YesguardInputError, guard_tool
from yesguard.approval import Mismatch, Verifier
from yesguard.testing import RunningGuard

TOOL = "submit_appeal"
ARGS = {"appeal_id": "A-17"}
QUESTION = "Shall I submit your appeal A-17 now?"

# The probes of probe/probe.go: lines before the Check, and the caller's
# answer landing after it.
REFUSED = [
    ("okay to an announcement is refused", ["I will now submit the request."], "Okay."),
    ("yes with a question is refused", ["Shall I submit your appeal now?"], "Yes, but does that cost extra?"),
    ("pre-emptive yes before any question is refused", [], "Yes, go ahead."),
    ("rambling yes is refused", ["Shall I submit your appeal now?"],
     "Well I was thinking about it last night and talked it over with my sister and in the end I figured it is probably fine so yes"),
    ("yes then no writes nothing", ["Shall I submit your appeal now?"], "Yes. Wait, no."),
]


async def test_seven_probes(guard: RunningGuard) -> None:
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "stt", lang="en")
        refused_calls = []
        # Probes 1-5: each refused, the answer landing after the Check.
        for name, before, answer in REFUSED:
            call = guard.call_id("probe")
            for line in before:
                await pub.agent(call, line)
            d = await guard.race(call=lambda: g.check(call, TOOL, {"appeal_id": "PROBE-1"}),
                                 answer=lambda: pub.caller(call, answer))
            assert d.outcome == "refuse", f"{name}: {d.outcome} {d.reason} ({d.detail})"
            assert d.message, name
            refused_calls.append(call)

        # Probe 6: two yeses and two simultaneous calls: one action.
        call = guard.call_id("two-yeses")
        await pub.agent(call, "Shall I submit your appeal now?")
        first = asyncio.ensure_future(guard.race(call=lambda: g.check(call, TOOL, {"appeal_id": "PROBE-1"}),
                                                 answer=lambda: pub.caller(call, "Yes.")))
        second = asyncio.ensure_future(g.check(call, TOOL, {"appeal_id": "PROBE-1"}))
        outs = await asyncio.gather(first, second)
        assert sorted(d.outcome for d in outs) == ["allow", "duplicate"], [(d.outcome, d.reason) for d in outs]
        allow = next(d for d in outs if d.outcome == "allow")
        await g.complete(allow.decision_id, {"probe": "done"})
        await pub.caller(call, "Yes!")
        again = await g.check(call, TOOL, {"appeal_id": "PROBE-1"})
        assert again.outcome == "duplicate" and again.original_result == {"probe": "done"}, again

        # Probe 7: every refusal left a record with a reason and a message.
        for call in refused_calls:
            page = await g.list_decisions(call)
            checks = [r for r in page.decisions if r.get("kind", "check") == "check"]
            assert checks, f"no record for {call}"
            for r in checks:
                assert r["outcome"] == "refuse" and r["reason"] not in ("", "unspecified") and r["message"], r


async def test_race_allows_the_answer_that_lands_after_the_check(guard: RunningGuard) -> None:
    """The model's call arrives before the caller's yes: the guard waits for it."""
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "pipeline", lang="en")
        call = guard.call_id("race")
        await pub.agent(call, QUESTION)
        d = await guard.race(call=lambda: g.check(call, TOOL, ARGS, include_evidence=True),
                             answer=lambda: pub.caller(call, "Yes, please."))
        assert d.outcome == "allow", (d.outcome, d.reason, d.detail)
        assert d.answer_text == "Yes, please."
        assert d.evidence is not None and d.evidence["answer"]["text"] == "Yes, please."
        assert d.waited_ms > 0


async def test_guard_tool_runs_once_and_a_duplicate_gets_the_original_result(guard: RunningGuard) -> None:
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "pipeline", lang="en")
        call = guard.call_id("dup")
        ran = []

        @guard_tool(guard=g, call_id=call)
        async def submit_appeal(args):  # type: ignore[no-untyped-def]
            ran.append(args)
            return {"status": "submitted", "ticket": 41}

        await pub.agent(call, QUESTION)
        await pub.caller(call, "Yes, please.")
        first = await submit_appeal(ARGS)
        second = await submit_appeal(ARGS)
        assert first == {"status": "submitted", "ticket": 41}
        assert second == first, "the duplicate gets the original's result"
        assert isinstance(second["ticket"], int)
        assert len(ran) == 1, "the tool ran once"

        # A refusal hands the model the guard's message, and runs nothing.
        call2 = guard.call_id("refused")
        await pub.agent(call2, QUESTION)
        await pub.caller(call2, "Yes. Wait, no.")
        out = await submit_appeal(ARGS, call_id=call2)
        assert isinstance(out, str) and out, out
        assert len(ran) == 1


async def test_guard_tool_fails_closed_when_the_guard_cannot_be_asked() -> None:
    ran = []
    async with Guard("127.0.0.1:1", timeouts={"check": 0.5}) as g:
        tool = guard_tool(lambda args: ran.append(args) or {"ok": True}, guard=g, tool=TOOL, call_id="c1")
        assert await tool(ARGS) == UNAVAILABLE_MESSAGE
    assert ran == []


async def test_redeem_with_the_jwks(guard: RunningGuard) -> None:
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "pipeline", lang="en")
        call = guard.call_id("redeem")
        await pub.agent(call, QUESTION)
        await pub.caller(call, "Yes, please.")
        d = await g.check(call, TOOL, ARGS)
        assert d.outcome == "allow" and d.approval, d
        assert d.approval_expires_at is not None

        # The backend verifies offline with the guard's keys, then redeems once.
        v = Verifier(guard.jwks())
        claims = v.verify_action(d.approval, tool=TOOL, args={"appeal_id": "A-17"}, call_id=call)
        assert claims.decision_id == d.decision_id and claims.call_id == call
        with pytest.raises(Mismatch):
            v.verify_action(d.approval, tool=TOOL, args={"appeal_id": "A-18"})
        r = await g.redeem(d.approval, ARGS, tool=TOOL, call_id=call)
        assert (r.outcome, r.reason) == ("allow", "redeemed"), r
        assert r.allowed_decision_id == d.decision_id
        again = await g.redeem(d.approval, ARGS, tool=TOOL)
        assert (again.outcome, again.reason) == ("refuse", "already_redeemed"), again
        tampered = await g.redeem(d.approval, {"appeal_id": "A-18"}, tool=TOOL)
        assert (tampered.outcome, tampered.reason) == ("refuse", "approval_mismatch"), tampered


async def test_bad_input_is_refused_before_it_is_sent(guard: RunningGuard) -> None:
    async with Guard(guard.grpc) as g:
        with pytest.raises(YesguardInputError, match="beyond 2"):
            await g.check("c1", TOOL, {"amount": 2**60})
        with pytest.raises(YesguardInputError, match="not a JSON value"):
            await g.check("c1", TOOL, {"when": object()})
        with pytest.raises(YesguardInputError, match="call_id"):
            await g.check("", TOOL)
        pub = TranscriptPublisher(g, "pipeline")
        with pytest.raises(YesguardInputError, match="subject token"):
            await pub.caller("a.b", "Yes.")
        with pytest.raises(YesguardInputError, match="needs words"):
            await pub.caller("c1", "  ")
        # The guard's own answer to a malformed request names the field.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await g.check("a.b", TOOL)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "call_id" in (err.value.details() or "")


async def test_guard_sequenced_publisher(guard: RunningGuard) -> None:
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "gs", lang="en", guard_sequenced=True)
        call = guard.call_id("gs")
        q = await pub.agent(call, QUESTION)
        a = await pub.caller(call, "Yes, please.")
        assert (q.seq, a.seq) == (1, 2) and q.epoch == a.epoch > 0 and q.source == "gs"
        d = await g.check(call, TOOL, ARGS)
        assert d.outcome == "allow", (d.reason, d.detail)


async def test_a_rejected_event_is_refused_and_counted(guard: RunningGuard) -> None:
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "big", lang="en", max_text_bytes=1 << 20)
        call = guard.call_id("big")
        before = guard.metric("yesguard_transcript_events_rejected_total", {"reason": "text_too_long"})
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await pub.caller(call, "no " * 3000)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "text_too_long" in (err.value.details() or "")
        assert guard.metric("yesguard_transcript_events_rejected_total", {"reason": "text_too_long"}) == before + 1


async def test_guard_tool_speaks_the_guards_question(guard: RunningGuard) -> None:
    async with Guard(guard.grpc) as g:
        pub = TranscriptPublisher(g, "pipeline", lang="en")
        call = guard.call_id("ask")
        ran: list = []
        spoken: list = []

        async def say(text: str, ask: Ask) -> None:
            # The pipeline's TTS: what it speaks comes back as the agent's turn.
            spoken.append(ask)
            await pub.agent(call, text, response_id=ask.id)

        @guard_tool(guard=g, call_id=call, speak=say, include_evidence=True)
        async def submit_appeal(args):  # type: ignore[no-untyped-def]
            ran.append(args)
            return {"status": "submitted"}

        await pub.agent(call, "Alright, I have everything I need.")
        await pub.caller(call, "Yes.")
        first = await submit_appeal(ARGS)
        assert not ran and len(spoken) == 1, (first, spoken)
        assert isinstance(first, str) and "Do not ask again" in first
        assert spoken[0].lang == "en" and spoken[0].id.startswith("ask_")
        await pub.caller(call, "Yes.")
        assert await submit_appeal(ARGS) == {"status": "submitted"}
        rec = [d for d in guard.decision_records() if d.get("call_id") == call and d.get("outcome") == "OUTCOME_ALLOW"]
        assert rec and rec[0]["evidence"]["guard_question"] == spoken[0].id

        # A "no" to the guard's question runs nothing.
        call2 = guard.call_id("ask-no")
        no_tool = guard_tool(lambda a: ran.append(a) or {"ok": True}, guard=g, tool="submit_appeal", call_id=call2,
                             speak=lambda text, ask: pub.agent(call2, text))
        await pub.agent(call2, "One moment.")
        await pub.caller(call2, "Yes.")
        assert isinstance(await no_tool(ARGS), str)
        await pub.caller(call2, "No.")
        assert isinstance(await no_tool(ARGS), str)
        assert len(ran) == 1
