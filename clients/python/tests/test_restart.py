"""Transcript ingestion over gRPC survives a guard restart: what was
stored before is replayed from the stream, and the same publisher (and
client) go on after it."""

from __future__ import annotations

from yesguard import Guard, TranscriptPublisher
from yesguard.testing import restart_guard, start_guard

QUESTION = "Shall I submit your appeal A-17 now?"


async def test_ingestion_survives_a_guard_restart() -> None:
    g = await start_guard()
    try:
        client = Guard(g.grpc)
        own = TranscriptPublisher(client, "pipeline", lang="en")
        by_guard = TranscriptPublisher(client, "gs", lang="en", guard_sequenced=True)
        calls = [g.call_id("restart-own"), g.call_id("restart-gs")]
        for pub, call in zip((own, by_guard), calls):
            await pub.agent(call, QUESTION)
        stored_before = g.metric("yesguard_transcript_grpc_events_total", {"result": "stored"})
        assert stored_before == 2

        g = await restart_guard(g)  # same data directory, same gRPC address
        # The restarted guard replayed the questions from its stream.
        assert g.metric("yesguard_transcript_events_total", {"speaker": "agent"}) >= 2

        # The publisher that numbers its own events goes on (seq 2 of its
        # epoch); the guard-numbered one gets the new process's epoch.
        yes = await own.caller(calls[0], "Yes, please.")
        assert yes.seq == 2 and yes.epoch == own.epoch and not yes.duplicate
        yes_gs = await by_guard.caller(calls[1], "Yes, please.")
        assert yes_gs.seq == 1
        for call in calls:
            d = await client.check(call, "submit_appeal", {"appeal_id": "A-17"}, include_evidence=True)
            assert d.outcome == "allow", (call, d.reason, d.detail)
            assert d.evidence is not None and d.evidence["question"]["text"] == QUESTION

        # A retry of an event stored before the restart is stored once.
        again = await client.publish_transcript([_event(calls[0], own.epoch)])
        assert again[0].duplicate
        await client.close()
    finally:
        await g.stop()


def _event(call: str, epoch: int):  # type: ignore[no-untyped-def]
    from yesguard.v1 import guard_pb2

    return guard_pb2.TranscriptEvent(call_id=call, type="transcript", speaker="agent", text=QUESTION, final=True,
                                     lang="en", source="pipeline", epoch=epoch, seq=1)
