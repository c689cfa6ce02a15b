"""Replay: record a judge once, serve its verdicts by item, offline."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from judgegraph import (
    PairwiseInput,
    PairwiseJudge,
    PairwiseVerdict,
    PointwiseJudge,
    PointwiseScore,
    Provenance,
    ScriptedBackend,
    Status,
)
from judgegraph.backends import GenerateRequest
from judgegraph.judges import (
    ReplayJudge,
    VerdictRecord,
    arecord_verdicts,
    create_replay_judge,
    item_key,
    read_verdicts,
    write_verdicts,
)
from judgegraph.types import Pricing


def items(n: int) -> list[dict[str, str]]:
    return [
        {"instruction": f"Question {i}?", "response_a": f"first {i}", "response_b": f"second {i}"} for i in range(n)
    ]


def biased_scores(req: GenerateRequest) -> str:
    """Even items: A is better in both orders. Odd items: whichever answer is
    shown first wins, so the two orders disagree."""
    prompt = req.messages[1].content
    i = int(prompt.split("Question ", 1)[1].split("?", 1)[0])
    original = prompt.index(f"first {i}") < prompt.index(f"second {i}")
    if i % 2 or original:
        return f"Reasoned. [SCORES] 8 {i % 4 + 1}"
    return f"Reasoned. [SCORES] {i % 4 + 1} 8"


async def test_recorded_verdicts_replay_identically_from_jsonl(tmp_path: Path) -> None:
    price = Pricing(input_per_mtok=2.0, output_per_mtok=8.0)
    live_backend = ScriptedBackend(biased_scores, pricing=price)
    live = PairwiseJudge(live_backend, name="live-judge")
    data = items(8)
    recorded = await arecord_verdicts(live, data, labels=["A"] * 8)
    assert len(live_backend.calls) == 16  # both orders
    path = tmp_path / "verdicts.jsonl"
    assert write_verdicts(path, recorded) == 8
    rows = read_verdicts(path)
    assert rows == recorded

    replay = create_replay_judge(path)
    assert replay.name == "live-judge"
    shuffled = list(enumerate(data))
    random.Random(3).shuffle(shuffled)
    out = await replay.ajudge_many([d for _, d in shuffled])
    for (i, _), v in zip(shuffled, out, strict=True):
        assert v == recorded[i].result  # same verdict, orders, scores, cost and provenance
    assert {v.winner for v in out} >= {"A", "tie"}  # the data really varies by item
    assert len(live_backend.calls) == 16  # replay never called the model


async def test_unrecorded_item_is_an_error_result_not_a_guess() -> None:
    replay = ReplayJudge(await arecord_verdicts(PairwiseJudge(ScriptedBackend(biased_scores), name="j"), items(2)))
    v = await replay.ajudge({"instruction": "Question 0?", "response_a": "first 0", "response_b": "other"})
    assert isinstance(v, PairwiseVerdict)
    assert v.status is Status.ERROR and v.winner is None
    assert v.reason is not None and v.reason.startswith("no recorded verdict for this item")


async def test_pointwise_replay_and_cost_override() -> None:
    judge = PointwiseJudge(ScriptedBackend(lambda r: "Fine. [RESULT] 4"), name="scorer")
    recs = await arecord_verdicts(judge, [{"instruction": "q", "response": "r"}])
    replay = ReplayJudge(recs, cost_usd=0.25, latency_s=1.5)
    assert replay.input_model.__name__ == "PointwiseInput"
    v = await replay.ajudge({"instruction": "q", "response": "r"})
    assert isinstance(v, PointwiseScore) and v.score == 4
    assert v.provenance is not None and v.provenance.cost_usd == 0.25
    assert v.provenance.latency_s == 1.5  # timing-lint: the value given above
    missing = await replay.ajudge({"instruction": "q", "response": "other"})
    assert missing.status is Status.ERROR and missing.scale == (1, 5)


def test_item_key_depends_on_content_only() -> None:
    a = PairwiseInput(instruction="q", response_a="x", response_b="y")
    assert item_key(a) == item_key({"response_b": "y", "instruction": "q", "response_a": "x"})
    assert item_key(a) == item_key(PairwiseInput(instruction="q", response_a="x", response_b="y", reference=None))
    assert item_key(a) != item_key(a.swapped())
    assert item_key(a) != item_key(PairwiseInput(instruction="q", response_a="x", response_b="y", reference="r"))


def _verdict(winner: str) -> PairwiseVerdict:
    return PairwiseVerdict(status=Status.OK, winner=winner)  # type: ignore[arg-type]


def test_record_sets_are_checked() -> None:
    rows = [
        VerdictRecord(key="k1", judge="a", result=_verdict("A")),
        VerdictRecord(key="k1", judge="b", result=_verdict("B")),
    ]
    with pytest.raises(ValueError, match="several judges"):
        ReplayJudge(rows)
    assert ReplayJudge(rows, judge="b").records["k1"].winner == "B"
    with pytest.raises(ValueError, match="two different recordings for item k1"):
        ReplayJudge([*rows, VerdictRecord(key="k1", judge="a", result=_verdict("tie"))], judge="a")
    with pytest.raises(ValueError, match="no recorded verdicts for judge 'c'"):
        ReplayJudge(rows, judge="c")
    score = PointwiseScore(status=Status.OK, score=3, scale=(1, 5))
    with pytest.raises(ValueError, match="mix"):
        ReplayJudge({"k1": _verdict("A"), "k2": score})


def test_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    good = VerdictRecord(key="k", judge="j", result=_verdict("A")).model_dump_json()
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n\n" + '{"key": "k2", "judge": "j", "result": {"status": "ok"}}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: not a verdict record"):
        read_verdicts(path)


def test_pointwise_and_pairwise_records_parse_to_the_right_type() -> None:
    prov = Provenance(judge="j", backend="b", model="m", template_id="t", template_version=1, latency_s=0.1)
    rows = [
        VerdictRecord(key="p", judge="j", result=_verdict("B").model_copy(update={"provenance": prov})),
        VerdictRecord(key="s", judge="j", result=PointwiseScore(status=Status.OK, score=2, scale=(1, 3)), label=2),
    ]
    back = [VerdictRecord.model_validate_json(r.model_dump_json()) for r in rows]
    assert back == rows
    assert isinstance(back[0].result, PairwiseVerdict) and isinstance(back[1].result, PointwiseScore)
