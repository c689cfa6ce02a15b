"""Which judge a job runs: pointwise, multi-turn and rubric kinds, a judge taken from the
context, a budget cascade fed whole batches, and what the config hash tracks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _loopback_job import _items

from judgegraph import ScriptedBackend, from_context
from judgegraph.jobs import BackendConfig, JobSpec, JudgeConfig, Limits, SourceConfig, Store, arun_job
from judgegraph.jobs._spec import build_judge
from judgegraph.types import Criterion, Rubric


async def test_pointwise_multiturn_and_rubric_jobs(tmp_path: Path) -> None:
    src = tmp_path / "conv.jsonl"
    src.write_text(
        "\n".join(
            json.dumps(
                {
                    "q": f"q{i}",
                    "a": f"a{i}",
                    "turns": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}],
                    "score": i % 5 + 1,
                }
            )
            for i in range(6)
        )
        + "\n"
    )
    backend = ScriptedBackend(lambda req: "Fine. [RESULT] 4")
    crit = [Criterion(name=n, rubric=Rubric(criterion=n, levels={1: "bad", 2: "ok", 3: "good"})) for n in ("x", "y")]
    outcomes = {}
    for kind, fields, extra in (
        ("pointwise", {"instruction": "q", "response": "a"}, {}),
        ("multiturn", {"messages": "turns"}, {}),
        ("rubric", {"instruction": "q", "response": "a"}, {"criteria": crit}),
    ):
        cfg = SourceConfig(path=str(src), fields=fields, label="score")
        judge = build_judge(JudgeConfig(kind=kind, **extra))  # type: ignore[arg-type]
        outcomes[kind] = await arun_job(
            cfg, judge=judge, kind=kind, store=tmp_path / "s.db", run_id=kind, context={"backend": backend}
        )
    assert outcomes["pointwise"].ok == outcomes["multiturn"].ok == 6
    # A rubric on a 1-3 scale cannot take a 4: unparsed, with the reason, never clamped.
    assert outcomes["rubric"].unparsed == 6
    with Store(tmp_path / "s.db") as st:
        row = next(iter(st.rows("pointwise")))
        assert row.result["score"] == 4 and row.label == 1.0
        rub = next(iter(st.rows("rubric")))
        assert rub.status == "unparsed" and "x:" in rub.reason and "y:" in rub.reason


def test_config_hash_tracks_the_judge_not_the_plumbing(tmp_path: Path) -> None:
    src = str(tmp_path / "x.jsonl")
    base = JobSpec(
        source=SourceConfig(path=src),
        judge=JudgeConfig(kind="pairwise"),
        backend=BackendConfig(model="m", base_url="http://a/v1"),
    )
    same = base.model_copy(
        update={
            "backend": BackendConfig(model="m", base_url="http://user:key@a/v1/", max_attempts=9),
            "limits": Limits(concurrency=3, rpm=5),
        }
    )
    other_model = base.model_copy(update={"backend": BackendConfig(model="m2", base_url="http://a/v1")})
    other_template = base.model_copy(update={"judge": JudgeConfig(kind="pairwise", template="pairwise-choice")})
    # Two servers serving the same model name may answer differently (issue 15).
    other_server = base.model_copy(update={"backend": BackendConfig(model="m", base_url="http://b/v1")})
    assert base.config_hash() == same.config_hash()
    hashes = {base.config_hash(), other_model.config_hash(), other_template.config_hash(), other_server.config_hash()}
    assert len(hashes) == 4


async def test_judge_taken_from_the_context_with_from_context(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 3)
    cfg = SourceConfig(path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"})
    judge = build_judge(JudgeConfig(kind="pairwise", template="pairwise-choice"))
    ctx = {"judge": judge, "backend": ScriptedBackend(lambda req: "[RESULT] TIE")}
    s = await arun_job(cfg, judge=from_context("judge"), kind="pairwise", store=tmp_path / "s.db", context=ctx)
    assert s.ok == 3
    with pytest.raises(LookupError, match="'nope'"):
        await arun_job(cfg, judge=from_context("nope"), kind="pairwise", store=tmp_path / "s.db", context=ctx)
    with pytest.raises(TypeError, match=r"from_context\(key\)"):  # a string is no longer a key
        await arun_job(cfg, judge="judge", kind="pairwise", store=tmp_path / "s.db", context=ctx)


async def test_budget_cascade_is_fed_whole_batches(tmp_path: Path) -> None:
    from judgegraph import PairwiseJudge
    from judgegraph.cascade import Budget, create_cascade_judge
    from judgegraph.types import SwapPolicy

    src = _items(tmp_path / "items.jsonl", 10)
    cfg = SourceConfig(path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"})
    single = SwapPolicy(mode="single")
    judge = create_cascade_judge(
        [
            PairwiseJudge(from_context("cheap"), template="pairwise-choice", swap=single),
            PairwiseJudge(from_context("strong"), template="pairwise-choice", swap=single),
        ],
        escalate=Budget(fraction=0.3),
    )
    ctx = {"cheap": ScriptedBackend(lambda r: "[RESULT] A"), "strong": ScriptedBackend(lambda r: "[RESULT] B")}
    s = await arun_job(cfg, judge=judge, kind="pairwise", store=tmp_path / "s.db", context=ctx, run_id="b")
    assert (s.ok, s.errors) == (10, 0)
    with Store(tmp_path / "s.db") as st:
        rows = list(st.rows("b"))
    escalated = [r.row for r in rows if not r.result["tiers"][0]["decided"]]
    assert len(escalated) == 3  # floor(0.3 x 10): the budget applies to the batch
    assert all(r.result["winner"] == ("B" if r.row in escalated else "A") for r in rows)
