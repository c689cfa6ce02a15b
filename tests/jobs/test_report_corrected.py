"""`judgegraph report RUN --labels FILE`: human labels on some items turn the judge's own rates
into judge-corrected ones (prediction-powered), shown beside the naive figures."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from judgegraph import OpenAIBackend, PairwiseJudge
from judgegraph.jobs import SourceConfig, Store, arun_job
from judgegraph.jobs._report import read_labels
from judgegraph.jobs._report_data import corrected_estimates
from judgegraph.jobs.cli import app
from judgegraph.metrics import ppi_mean
from judgegraph.testing import LoopbackRequest, Reply
from judgegraph.types import SwapPolicy

pytest.importorskip("scipy")
ITEM = re.compile(r"item-(\d+)")
N = 60


def _good_first(i: int) -> bool:
    return i % 2 == 0


def _biased(req: LoopbackRequest) -> Reply:
    """Right when A is better; also says A on every third item where B is better: it over-says A."""
    i = int(ITEM.search(req.prompt).group(1))  # type: ignore[union-attr]
    pick = "A" if _good_first(i) or i % 3 == 0 else "B"
    return Reply(f"[RESULT] {pick}")


async def _run(tmp_path: Path, loopback: Any) -> tuple[Path, str]:
    src = tmp_path / "pairs.jsonl"
    with src.open("w") as fp:
        for i in range(N):
            good = _good_first(i)
            record = {
                "key": f"q{i}",
                "instruction": f"item-{i:03d}: pick one",
                "response_a": "GOOD" if good else "BAD",
                "response_b": "BAD" if good else "GOOD",
            }
            fp.write(json.dumps(record) + "\n")
    store = tmp_path / "runs.db"
    with loopback(_biased) as server:
        judge = PairwiseJudge(
            OpenAIBackend("m", base_url=server.url + "/v1", api_key="x", structured_output=False),
            template="pairwise-choice",
            swap=SwapPolicy(mode="single"),  # one order: the scripted judge reads the item, not the positions
        )
        await arun_job(SourceConfig(path=str(src), id="key"), judge=judge, kind="pairwise", store=store, run_id="r")
    return store, "r"


async def test_report_with_a_labels_file_shows_corrected_rates(tmp_path: Path, loopback: Any) -> None:
    store, run = await _run(tmp_path, loopback)
    labelled = list(range(0, N, 3))  # 20 of 60 items get a human label
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"id": f"q{i}", "label": "A" if _good_first(i) else "B"}) + "\n" for i in labelled)
    )
    out = tmp_path / "report"
    res = CliRunner().invoke(app, ["report", run, "--store", str(store), "--out", str(out), "--labels", str(labels)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    shares = {e["name"]: e for e in summary["corrected"]}
    assert set(shares) == {"share where A wins", "share where B wins"}
    # Recomputed directly from the judge's stored verdicts and the labels file.
    with Store(store) as st:
        rows = list(st.rows(run))
    verdicts = {str(r.item_id): r.result["winner"] for r in rows if r.result is not None}  # type: ignore[index]
    by_id = read_labels(labels)
    ids = sorted(verdicts)
    expected = ppi_mean(
        [verdicts[i] == "A" for i in ids], [None if i not in by_id else by_id[i] == "A" for i in ids], name="x"
    )
    a = shares["share where A wins"]
    assert a["estimate"] == pytest.approx(expected.estimate, abs=1e-12)
    assert a["naive"]["value"] == pytest.approx(sum(v == "A" for v in verdicts.values()) / N, abs=1e-12)
    assert (a["n_items"], a["n_labelled"]) == (N, len(labelled))
    # The judge over-says A (40 of 60); the labelled items say half: the correction pulls it down.
    assert a["naive"]["value"] > 0.6 and a["estimate"] < a["naive"]["value"]
    assert a["interval"]["low"] <= a["estimate"] <= a["interval"]["high"]
    md = (out / "summary.md").read_text()
    assert "## Corrected for the judge's errors" in md and "share where A wins" in md
    assert "<h2>Corrected for the judge's errors</h2>" in (out / "report.html").read_text()
    # Labels whose ids match no row are refused, not silently ignored.
    stray = tmp_path / "stray.csv"
    stray.write_text("id,label\nnope,A\nnada,B\n")
    bad = CliRunner().invoke(app, ["report", run, "--store", str(store), "--out", str(out), "--labels", str(stray)])
    assert bad.exit_code != 0 and "no row's id matches" in bad.output


def test_read_labels_csv_and_jsonl(tmp_path: Path) -> None:
    csv_file = tmp_path / "l.csv"
    csv_file.write_text("id,label,extra\na,A,x\nb,3,y\n")
    assert read_labels(csv_file) == {"a": "A", "b": "3"}
    jl = tmp_path / "l.jsonl"
    jl.write_text('{"id": "a", "label": 4}\n\n{"id": "b", "label": "tie"}\n')
    assert read_labels(jl) == {"a": 4, "b": "tie"}
    jl.write_text('{"id": "a"}\n')
    with pytest.raises(ValueError, match="needs an id and a label"):
        read_labels(jl)
    jl.write_text("not json\n")
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        read_labels(jl)


def test_pointwise_mean_score_is_corrected() -> None:
    # Judge scores one point high everywhere; humans labelled four rows: the correction removes the point.
    judged: list[tuple[str | None, Any, Any]] = [(f"i{k}", float(2 + k % 3 + 1), None) for k in range(30)]
    labels = {f"i{k}": 2 + k % 3 for k in range(0, 30, 7)}
    (est,) = corrected_estimates("pointwise", judged, labels)
    assert est["name"] == "mean score"
    assert est["naive"]["value"] == pytest.approx(4.0, abs=1e-12)
    assert est["estimate"] == pytest.approx(3.0, abs=1e-12)
    assert corrected_estimates("pointwise", judged, None) == []  # no labels, no correction
