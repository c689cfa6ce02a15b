"""The batch graph: input order, per-item isolation, the concurrency cap,
streaming, and resuming from a SQLite checkpoint without re-judging."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from _waiting import await_until

from judgegraph import BackendError, JudgeInputError, PointwiseScore, Rubric, RubricResult, Status
from judgegraph.backends import Capabilities, GenerateRequest, GenerateResult
from judgegraph.graphs import (
    ConversationVerdict,
    GuardrailDecision,
    ItemError,
    TurnVerdict,
    checkpoint_serde,
    create_batch_graph,
)
from judgegraph.judges import create_pairwise_judge, create_pointwise_judge


class PacedBackend:
    """A fake model endpoint: answers ``[RESULT] n`` where the response is
    ``answer-n``, after ``delay(n)`` seconds or once ``gate`` opens, and
    records how many requests it had in flight at most."""

    name = "paced"
    model = "paced"
    pricing = None
    capabilities = Capabilities()

    def __init__(self, delay: Any = lambda n: 0.0, gate: asyncio.Event | None = None) -> None:
        self.delay, self.gate = delay, gate
        self.calls = self.finished = self.in_flight = self.max_in_flight = 0

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            m = re.search(r"answer-(\d+)", request.messages[1].content)
            n = int(m.group(1)) if m else 0
            if "error" in request.messages[1].content:
                raise BackendError("model overloaded")
            if self.gate is not None and n % 2:
                await self.gate.wait()
            await asyncio.sleep(self.delay(n))
            self.finished += 1
            return GenerateResult(text=f"Seen. [RESULT] {n % 5 + 1}", model=self.model)
        finally:
            self.in_flight -= 1


class TogetherBackend(PacedBackend):
    """Holds each request until ``width`` have been in flight at once (or every
    one of ``total`` has been sent): how many ran together is then set by the
    graph's cap alone, never by how fast the machine started them."""

    def __init__(self, width: int, total: int) -> None:
        super().__init__()
        self.width, self.total = width, total

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            # The peak, not the count now: it never falls back, so the first request
            # to go on (and end) cannot strand the rest of its group below the mark.
            await await_until(lambda: self.max_in_flight >= self.width or self.calls == self.total, "a full group")
            self.finished += 1
            return GenerateResult(text="Seen. [RESULT] 3", model=self.model)
        finally:
            self.in_flight -= 1


def items(n: int) -> list[dict[str, str]]:
    return [{"instruction": "q", "response": f"answer-{i}"} for i in range(n)]


def ctx(backend: Any) -> dict[str, Any]:
    return {"judge": create_pointwise_judge(), "backend": backend}


@pytest.mark.timing  # races items against each other
async def test_results_keep_input_order_while_verdicts_stream_as_they_finish() -> None:
    # The odd items are held until every even one has streamed: they finish last by
    # construction, not because of how long anything took.
    gate = asyncio.Event()
    backend = PacedBackend(gate=gate)
    graph = create_batch_graph()
    streamed: list[int] = []
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream({"items": items(6)}, context=ctx(backend), stream_mode=["custom", "values"]):
        if mode == "custom":
            streamed.append(chunk["index"])
            if {0, 2, 4} <= set(streamed):
                gate.set()
        else:
            final = chunk
    assert sorted(streamed) == list(range(6)) and streamed != list(range(6))
    assert sorted(streamed[:3]) == [0, 2, 4]
    assert [r.score for r in final["results"]] == [i % 5 + 1 for i in range(6)]


async def test_each_item_fails_alone() -> None:
    class Picky:
        """A user's judge that crashes on one item."""

        async def ajudge(self, value: Any, *, context: Any = None) -> Any:
            if value.get("response") == "answer-1":
                raise RuntimeError("cannot handle this one")
            return await create_pointwise_judge().ajudge(value, context=context)

    batch = [*items(3), {"instruction": "q"}, {"instruction": "q", "response": "answer-4 error"}]
    out = await create_batch_graph().ainvoke({"items": batch}, context={"judge": Picky(), "backend": PacedBackend()})
    results = out["results"]
    assert [r.status for r in results] == [Status.OK, Status.ERROR, Status.OK, Status.ERROR, Status.ERROR]
    assert results[1] == ItemError(index=1, reason="item 1: RuntimeError: cannot handle this one")
    assert isinstance(results[3], ItemError)
    assert results[3].reason.startswith("item 3: invalid PointwiseInput: response")
    assert isinstance(results[4], PointwiseScore) and results[4].reason == "model overloaded"
    assert results[0].score == 1 and results[2].score == 3


@pytest.mark.timing  # counts requests in flight together
async def test_max_concurrency_caps_items_in_flight() -> None:
    graph = create_batch_graph()
    # Each request waits until 3 (capped) or all 12 (no cap) are in flight: the graph
    # must let that many run together for the run to finish at all, and a fourth
    # beside the capped three would show in max_in_flight.
    capped, free = TogetherBackend(3, total=12), TogetherBackend(12, total=12)
    await graph.ainvoke({"items": items(12)}, {"max_concurrency": 3}, context=ctx(capped))
    await graph.ainvoke({"items": items(12)}, context=ctx(free))
    assert capped.max_in_flight == 3 and free.max_in_flight == 12


async def test_any_judge_kind_and_an_empty_batch() -> None:
    pair = {"instruction": "q", "response_a": "answer-1", "response_b": "answer-2"}
    judge = create_pairwise_judge(template="pairwise-choice")
    out = await create_batch_graph().ainvoke({"items": [pair]}, context={"judge": judge, "backend": PacedBackend()})
    assert out["results"][0].status is Status.UNPARSED  # "[RESULT] 2" is not a choice: flagged, not guessed
    assert (await create_batch_graph().ainvoke({"items": []}, context=ctx(PacedBackend())))["results"] == []
    with pytest.raises(JudgeInputError, match="items: expected a list"):
        await create_batch_graph().ainvoke({"items": "answer-1"}, context=ctx(PacedBackend()))


@pytest.mark.timing  # cancels a run mid-way
async def test_resume_after_interruption_judges_only_unfinished_items(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    batch = items(10)
    batch[4] = {"instruction": "q"}  # malformed: recorded, never sent to the model
    cfg: Any = {"configurable": {"thread_id": "nightly"}, "max_concurrency": 10}
    async with aiosqlite.connect(tmp_path / "runs.db") as conn:
        graph = create_batch_graph(checkpointer=AsyncSqliteSaver(conn, serde=checkpoint_serde()))
        first = PacedBackend(gate=asyncio.Event())  # odd items hang until the run is killed
        run = asyncio.create_task(graph.ainvoke({"items": batch}, cfg, context=ctx(first)))
        saved = 0

        async def poll_saved() -> None:
            nonlocal saved
            while not (saved == 5 and first.calls == 9):
                state = await graph.aget_state(cfg)
                saved = sum(1 for t in state.tasks if t.result)
                await asyncio.sleep(0.01)

        # Until the even items and the bad one are saved, and every odd item is held
        # at the model (no deadline: a hang is pytest-timeout's to catch).
        await poll_saved()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert (first.calls, first.finished) == (9, 4)

        second = PacedBackend()
        out = await graph.ainvoke(None, cfg, context=ctx(second))
    assert second.calls == 5  # the five odd items; the rest came from the checkpoint
    results = out["results"]
    assert [r.status for r in results] == [Status.OK] * 4 + [Status.ERROR] + [Status.OK] * 5
    assert [r.score for i, r in enumerate(results) if i != 4] == [i % 5 + 1 for i in range(10) if i != 4]


def test_checkpoint_serde_round_trips_graph_results_without_warnings(caplog: pytest.LogCaptureFixture) -> None:
    serde = checkpoint_serde()
    score = PointwiseScore(status=Status.OK, score=4, scale=(1, 5))
    values = [
        ItemError(index=3, reason="item 3: bad"),
        GuardrailDecision(action="block", reason="r", judge_status=Status.ERROR, timed_out=True),
        ConversationVerdict(status=Status.OK, policy="min", turn_score=4, turns=(TurnVerdict(turn=1, verdict=score),)),
        RubricResult(status=Status.OK, criteria={"c": score}, weighted_score=0.75),
        Rubric(criterion="c", levels={1: "a", 2: "b"}),
    ]
    with caplog.at_level(logging.WARNING):
        back = [serde.loads_typed(serde.dumps_typed(v)) for v in values]
    assert back == values
    assert not [r for r in caplog.records if "unregistered" in r.getMessage()]


async def test_a_missing_backend_is_a_set_up_error_not_n_item_errors() -> None:
    with pytest.raises(LookupError, match="'backend'"):
        await create_batch_graph().ainvoke({"items": items(3)}, context={"judge": create_pointwise_judge()})
