"""Issue 28: with human labels on some rows (the source's ``label=``), the job summary carries the
judge's rates corrected for its own errors (prediction-powered, as the report's), next to the naive
ones; ``judgegraph eval`` prints them on stdout."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from judgegraph import PairwiseJudge, ScriptedBackend
from judgegraph.backends import BackendError, GenerateRequest
from judgegraph.jobs import CorrectedRate, JobSummary, SourceConfig, Store, arun_job
from judgegraph.jobs._summary_corrected import corrected_lines
from judgegraph.jobs.cli import app
from judgegraph.metrics import ppi_mean
from judgegraph.testing import LoopbackRequest, Reply
from judgegraph.types import SwapPolicy

pytest.importorskip("scipy")

ITEM = re.compile(r"item-(\d+)")
N = 60
# Every fifth row labelled (12 of 60): a sample like the whole, where the judge errs on 1 in 6
# (i = 15, 45) and A is better on half. So the correction is exact: 40/60 + (6 - 8)/12 = 0.5.
LABELLED = frozenset(range(0, N, 5))
# Both sides below are judgegraph.metrics.ppi_mean over the same values in the same (source) order,
# so they agree to the last bit; 1e-12 only leaves room for a float sum taken in another order.
TOL = 1e-12


def _a_is_better(i: int) -> bool:
    return i % 2 == 0


def _judge_says(i: int) -> str:
    """Right when A is better; also says A on every third item where B is better (it over-says A):
    of 60 items it says A on 40 (wrong on 10: i = 3 mod 6), while A is better on 30."""
    return "A" if _a_is_better(i) or i % 3 == 0 else "B"


def _truth(i: int) -> str:
    return "A" if _a_is_better(i) else "B"


def _source(path: Path, n: int, labelled: Collection[int]) -> Path:
    with path.open("w") as fp:
        for i in range(n):
            good = _a_is_better(i)
            record: dict[str, Any] = {
                "key": f"q{i}",
                "instruction": f"item-{i:03d}: pick one",
                "response_a": "GOOD" if good else "BAD",
                "response_b": "BAD" if good else "GOOD",
            }
            if i in labelled:
                record["pref"] = _truth(i)
            fp.write(json.dumps(record) + "\n")
    return path


def _backend(failing: Mapping[int, str] | None = None) -> ScriptedBackend:
    """The scripted judge: ``_judge_says``, except on ``failing`` items ("unparsed" or "error")."""
    fails = dict(failing or {})

    def answer(req: GenerateRequest) -> str:
        found = ITEM.search("\n".join(m.content for m in req.messages))
        if found is None:
            return "no verdict here"
        i = int(found.group(1))
        if fails.get(i) == "error":
            raise BackendError("HTTP 400 from judge: bad request")
        if fails.get(i) == "unparsed":
            return "no verdict here"
        return f"[RESULT] {_judge_says(i)}"

    return ScriptedBackend(answer)


def _judge(backend: ScriptedBackend) -> PairwiseJudge:
    # One order: the scripted judge reads the item, not the positions.
    return PairwiseJudge(backend, template="pairwise-choice", swap=SwapPolicy(mode="single"))


async def _run(
    src: Path,
    store: Path,
    *,
    failing: Mapping[int, str] | None = None,
    labelled_source: bool = True,
    run_id: str = "r",
    rerun_failed: bool = False,
) -> JobSummary:
    cfg = SourceConfig(path=str(src), id="key", label="pref" if labelled_source else None)
    return await arun_job(
        cfg,
        judge=_judge(_backend(failing)),
        kind="pairwise",
        store=store,
        run_id=run_id,
        rerun_failed=rerun_failed,
    )


def _expected(n: int, labelled: Collection[int], failing: Collection[int], side: str) -> Any:
    """ppi_mean straight from the script's numbers: every item whose verdict is usable, in order."""
    usable = [i for i in range(n) if i not in failing]
    judge = [_judge_says(i) == side for i in usable]
    human = [(_truth(i) == side) if i in labelled else None for i in usable]
    return ppi_mean(judge, human, name=f"share where {side} wins")


def _by_name(summary: JobSummary) -> dict[str, CorrectedRate]:
    assert summary.corrected is not None
    return {r.name: r for r in summary.corrected}


def _assert_matches(rate: CorrectedRate, expected: Any) -> None:
    assert rate.corrected.value == pytest.approx(expected.estimate, abs=TOL)
    assert rate.corrected.low == pytest.approx(expected.interval.low, abs=TOL)
    assert rate.corrected.high == pytest.approx(expected.interval.high, abs=TOL)
    assert rate.judge.value == pytest.approx(expected.naive.value, abs=TOL)
    assert rate.human.value == pytest.approx(expected.human_only.value, abs=TOL)
    assert (rate.n_judged, rate.n_labelled) == (expected.n_items, expected.n_labelled)
    assert rate.level == expected.interval.level and rate.method == expected.method == "ppi"


async def test_summary_reports_the_corrected_rate_beside_the_naive_one(tmp_path: Path) -> None:
    labelled = LABELLED
    src = _source(tmp_path / "pairs.jsonl", N, labelled)
    summary = await _run(src, tmp_path / "runs.db")
    rates = _by_name(summary)
    assert set(rates) == {"share where A wins", "share where B wins"}
    for side in ("A", "B"):
        _assert_matches(rates[f"share where {side} wins"], _expected(N, labelled, (), side))
    a = rates["share where A wins"]
    # The judge says A on 40 of 60; A is better on 30: the labels bring the figure down to the truth.
    assert a.judge.value == pytest.approx(40 / 60, abs=TOL)
    assert a.corrected.value == pytest.approx(0.5, abs=TOL)
    assert a.share and not a.all_labelled and (a.n_excluded, a.n_excluded_labelled) == (0, 0)
    assert a.corrected.low is not None and a.corrected.high is not None
    assert a.corrected.low <= a.corrected.value <= a.corrected.high
    # The summary's JSON carries it too (what `judgegraph eval --json` prints).
    dumped = json.loads(summary.model_dump_json())
    assert dumped["corrected"][0]["name"] == "share where A wins" and dumped["corrected"][0]["all_labelled"] is False


async def test_the_summarys_figures_are_the_reports(tmp_path: Path) -> None:
    """One rule: the summary's corrected figures are the report's for the same run."""
    from judgegraph.jobs import build_report

    labelled = set(range(0, N, 4))
    src = _source(tmp_path / "pairs.jsonl", N, labelled)
    summary = await _run(src, tmp_path / "runs.db", failing={1: "unparsed", 8: "error"})
    with Store(tmp_path / "runs.db", read_only=True) as st_:
        report = build_report(st_, "r")
    assert summary.corrected is not None
    assert [r.name for r in summary.corrected] == [e["name"] for e in report.corrected]
    for rate, est in zip(summary.corrected, report.corrected, strict=True):
        assert rate.corrected.value == est["estimate"] and rate.judge.value == est["naive"]["value"]
        assert rate.n_judged == est["n_items"] and rate.n_labelled == est["n_labelled"]


async def test_unlabelled_sources_have_no_corrected_rates(tmp_path: Path) -> None:
    src = _source(tmp_path / "pairs.jsonl", 12, labelled=range(12))
    no_column = await _run(src, tmp_path / "a.db", labelled_source=False)
    assert no_column.corrected is None
    none_labelled = _source(tmp_path / "bare.jsonl", 12, labelled=())
    empty_column = await _run(none_labelled, tmp_path / "b.db")
    assert empty_column.corrected is None


async def test_one_label_is_too_few_to_correct_by(tmp_path: Path) -> None:
    src = _source(tmp_path / "pairs.jsonl", 12, labelled={3})
    summary = await _run(src, tmp_path / "runs.db")
    assert summary.corrected == []


async def test_failed_verdicts_are_excluded_and_counted(tmp_path: Path) -> None:
    labelled = LABELLED
    failing = {0: "unparsed", 3: "error", 5: "error", 7: "unparsed"}  # 0 and 5 are labelled
    src = _source(tmp_path / "pairs.jsonl", N, labelled)
    summary = await _run(src, tmp_path / "runs.db", failing=failing)
    assert (summary.unparsed, summary.errors) == (2, 2)
    for side, rate in (("A", _by_name(summary)["share where A wins"]), ("B", _by_name(summary)["share where B wins"])):
        _assert_matches(rate, _expected(N, labelled, failing, side))
        assert (rate.n_judged, rate.n_labelled) == (N - 4, len(labelled) - 2)
        assert (rate.n_excluded, rate.n_excluded_labelled) == (4, 2)


async def test_every_row_labelled_gives_the_human_figure(tmp_path: Path) -> None:
    src = _source(tmp_path / "pairs.jsonl", 24, labelled=range(24))
    summary = await _run(src, tmp_path / "runs.db")
    for rate in _by_name(summary).values():
        assert rate.all_labelled and rate.n_labelled == rate.n_judged == 24
        assert rate.corrected.value == pytest.approx(rate.human.value, abs=TOL)
        assert rate.corrected.value != rate.judge.value  # the judge is wrong on 4 of the 24
    assert summary.corrected is not None
    line = corrected_lines(summary.corrected)[0]
    assert "every row human-labelled, so corrected = the human figure" in line and "(prediction-powered, 95%)" in line


async def test_a_resumed_run_reports_the_same_as_a_fresh_one(tmp_path: Path) -> None:
    labelled = LABELLED
    failing = {5: "error", 9: "unparsed"}
    src = _source(tmp_path / "pairs.jsonl", N, labelled)
    fresh = await _run(src, tmp_path / "fresh.db", failing=failing)
    # Half the rows in a first invocation, then the whole file: the second judges only the rest.
    first_part = tmp_path / "part" / "pairs.jsonl"
    first_part.parent.mkdir()
    lines = src.read_text().splitlines(keepends=True)
    first_part.write_text("".join(lines[: N // 2]))
    store = tmp_path / "resumed.db"
    cfg_first = await _run(first_part, store, failing=failing, run_id="r")
    assert cfg_first.judged == N // 2
    first_part.write_text("".join(lines))
    resumed = await _run(first_part, store, failing=failing, run_id="r")
    assert resumed.resumed and resumed.cached == N // 2 and resumed.judged == N - N // 2
    assert resumed.corrected == fresh.corrected
    # And again with nothing left to judge: every verdict comes from the store.
    again = await _run(first_part, store, failing=failing, run_id="r")
    assert again.judged == 0 and again.corrected == fresh.corrected


def test_eval_prints_the_corrected_lines_on_stdout(tmp_path: Path, loopback: Any) -> None:
    labelled = LABELLED
    src = _source(tmp_path / "pairs.jsonl", N, labelled)

    def reply(req: LoopbackRequest) -> Reply:
        found = ITEM.search(req.prompt)
        return Reply("no verdict" if found is None else f"[RESULT] {_judge_says(int(found.group(1)))}")

    with loopback(reply) as server:
        args = ["eval", str(src), "--kind", "pairwise", "--model", "m", "--base-url", server.url + "/v1"]
        args += ["--api-key-env", "JG_TEST_KEY", "--template", "pairwise-choice", "--swap", "single"]
        args += ["--no-structured", "--id", "key", "--label", "pref", "--store", str(tmp_path / "runs.db")]
        args += ["--run-id", "r", "--no-progress"]
        res = CliRunner().invoke(app, args, env={"JG_TEST_KEY": "x"})
    assert res.exit_code == 0, res.output
    expected = _expected(N, labelled, (), "A")
    low, high = expected.interval.low, expected.interval.high
    naive = expected.naive
    assert naive.interval is not None
    line = (
        f"share where A wins: judge {100 * naive.value:.1f}% [{100 * naive.interval.low:.1f}, "
        f"{100 * naive.interval.high:.1f}] over {N} rows; corrected with {len(labelled)} human labels "
        f"{100 * expected.estimate:.1f}% [{100 * low:.1f}, {100 * high:.1f}] (prediction-powered, 95%)"
    )
    assert line in res.stdout.splitlines(), res.stdout
    assert "share where B wins: judge" in res.stdout
    assert "share where A wins" not in res.stderr
    as_json = CliRunner().invoke(app, [*args, "--json"], env={"JG_TEST_KEY": "x"})
    assert as_json.exit_code == 0, as_json.output
    summary = json.loads(as_json.stdout)
    assert summary["corrected"][0]["corrected"]["value"] == pytest.approx(expected.estimate, abs=TOL)


_OUTCOME = st.sampled_from(["ok", "ok", "ok", "unparsed", "error"])


@given(rows=st.lists(st.tuples(st.booleans(), _OUTCOME), min_size=2, max_size=16))
@settings(max_examples=30)
def test_any_label_subset_gives_ppi_over_the_usable_rows(rows: list[tuple[bool, str]]) -> None:
    """Whichever rows are labelled and whichever verdicts fail: the summary's figure is ppi_mean over
    the rows with a usable verdict, the failures are counted, and no label means no correction."""
    n = len(rows)
    labelled = {i for i, (lab, _) in enumerate(rows) if lab}
    failing = {i: outcome for i, (_, outcome) in enumerate(rows) if outcome != "ok"}
    with tempfile.TemporaryDirectory() as tmp:
        src = _source(Path(tmp) / "pairs.jsonl", n, labelled)
        summary = asyncio.run(_run(src, Path(tmp) / "runs.db", failing=failing))
    usable_labels = len(labelled - set(failing))
    if not labelled:
        assert summary.corrected is None
        return
    if usable_labels < 2:
        assert summary.corrected == []
        return
    for side in ("A", "B"):
        rate = _by_name(summary)[f"share where {side} wins"]
        _assert_matches(rate, _expected(n, labelled, failing, side))
        assert rate.n_excluded == len(failing) and rate.n_excluded_labelled == len(labelled & set(failing))
        assert rate.all_labelled == (usable_labels == n - len(failing))


async def test_without_the_metrics_extra_the_run_still_ends_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judgegraph.jobs import _recorder

    def missing(store: Store, run_id: str) -> list[CorrectedRate] | None:
        raise ImportError("No module named 'scipy'")

    monkeypatch.setattr(_recorder, "run_corrected", missing)
    src = _source(tmp_path / "pairs.jsonl", 12, labelled=range(0, 12, 2))
    summary = await _run(src, tmp_path / "runs.db")
    assert summary.ok == 12 and summary.corrected is None
    assert any("judge-corrected rates not computed" in p and "judgegraph[metrics]" in p for p in summary.problems)
