"""Reports: the figures' numbers, the cascade cost–agreement curve, and the
HTML rendered by a real headless browser (Debian's chromium)."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from judgegraph import OpenAIBackend, PairwiseJudge, from_context
from judgegraph.cascade import LowConfidence, create_cascade_judge
from judgegraph.jobs import SourceConfig, Store, arun_job
from judgegraph.jobs._report import build_report, write_report
from judgegraph.testing import LoopbackRequest, Reply
from judgegraph.types import Pricing, SwapPolicy

pytest.importorskip("scipy")
ITEM = re.compile(r"item-(\d+)")
CHROMIUM = Path("/usr/bin/chromium")
N = 40


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "pairs.jsonl"
    with src.open("w") as fp:
        for i in range(N):
            good_first = i % 2 == 0
            fp.write(
                json.dumps(
                    {
                        "instruction": f"item-{i:03d}: pick one",
                        "topic": "math" if i < N // 2 else "chat",
                        "response_a": "GOOD answer" if good_first else "BAD answer",
                        "response_b": "BAD answer" if good_first else "GOOD answer",
                        "human": "A" if good_first else "B",
                    }
                )
                + "\n"
            )
        fp.write(json.dumps({"instruction": "item-999", "response_a": "x", "topic": "chat"}) + "\n")  # invalid
    return src


def _choice(req: LoopbackRequest, *, sure: bool, right: bool) -> Reply:
    """A pairwise-choice answer naming the GOOD (or, if not ``right``, the BAD)
    answer, with that verdict token's probability 0.95 or 0.6."""
    text = req.prompt
    good_first = text.index("GOOD") < text.index("BAD")
    pick = "A" if good_first == right else "B"
    other = "B" if pick == "A" else "A"
    p = 0.95 if sure else 0.6
    return Reply(f"Thoughts. [RESULT] {pick}", token_probs={pick: p, other: 1 - p - 0.01, "TIE": 0.01})


def _cheap(req: LoopbackRequest) -> Reply:
    """Sure and right on even items; unsure on odd ones, and wrong on a third of those."""
    i = int(ITEM.search(req.prompt).group(1))  # type: ignore[union-attr]
    if i == 6:
        return Reply("I will not say.")  # unparsed on the cheap tier: escalated
    return _choice(req, sure=i % 2 == 0, right=i % 2 == 0 or i % 3 != 0)


def _strong(req: LoopbackRequest) -> Reply:
    i = int(ITEM.search(req.prompt).group(1))  # type: ignore[union-attr]
    if i == 13:
        return Reply("no verdict at all")  # a failure of the last tier: an unparsed row
    return _choice(req, sure=True, right=True)


async def _cascade_run(tmp_path: Path, loopback: Any) -> tuple[Path, str]:
    src = _source(tmp_path)
    store = tmp_path / "runs.db"
    with loopback(_cheap) as cheap, loopback(_strong) as strong:
        ctx = {
            "cheap": OpenAIBackend(
                "small",
                base_url=cheap.url + "/v1",
                api_key="x",
                structured_output=False,
                pricing=Pricing(input_per_mtok=0.1, output_per_mtok=0.1),
            ),
            "strong": OpenAIBackend(
                "large",
                base_url=strong.url + "/v1",
                api_key="x",
                structured_output=False,
                pricing=Pricing(input_per_mtok=10.0, output_per_mtok=30.0),
            ),
        }
        judge = create_cascade_judge(
            [
                PairwiseJudge(from_context("cheap"), template="pairwise-choice", swap=SwapPolicy(mode="both")),
                PairwiseJudge(from_context("strong"), template="pairwise-choice", swap=SwapPolicy(mode="both")),
            ],
            escalate=LowConfidence(threshold=0.8),
        )
        cfg = SourceConfig(path=str(src), label="human", category="topic")
        summary = await arun_job(
            cfg, judge=judge, kind="pairwise", store=store, context=ctx, run_id="casc", concurrency=8
        )
    assert (summary.rows, summary.invalid, summary.unparsed) == (N + 1, 1, 1)
    return store, "casc"


async def test_report_figures_from_a_cascade_run(tmp_path: Path, loopback: Any) -> None:
    store, run = await _cascade_run(tmp_path, loopback)
    with Store(store) as st:
        d = build_report(st, run)
    assert d.counts == {"rows": N + 1, "ok": N - 1, "unparsed": 1, "error": 0, "invalid": 1, "pending": 0}
    # Every ok verdict is right (the strong tier fixes the cheap tier's mistakes).
    assert d.labels == ["A", "B", "tie", "failed"]
    assert d.confusion == [[N // 2, 0, 0, 0], [0, N // 2 - 1, 0, 1], [0, 0, 0, 0]]
    assert d.metrics is not None and d.metrics["accuracy"]["value"] == 1.0
    assert d.score_distribution["human"] == {"A": N // 2, "B": N // 2}
    # Calibration from the verdicts' token-probability confidence.
    assert d.calibration is not None and sum(b["count"] for b in d.calibration["bins"]) == N - 1
    # Both tiers answered consistently in both orders.
    assert d.position is not None and d.position["consistency"] == 1.0
    assert set(d.position_by_category) == {"math", "chat"}
    # Cost–agreement: the run's own point, down to escalating nothing.
    casc = d.cascade
    assert casc is not None and casc["x"] == "cost_per_item"
    escalated = N // 2  # the odd items (unsure), including item 13; plus item 6 (unparsed on tier 0)
    assert casc["tier_use"] == {"escalated": escalated + 1, "decided at tier 0": N // 2 - 1}
    pts = casc["points"]
    actual = [p for p in pts if p["actual"]]
    assert len(actual) == 1 and actual[0]["escalated_share"] == pytest.approx((escalated + 1) / N)
    assert actual[0]["accuracy"] == pytest.approx((N - 1) / N)  # item 13 failed at the last tier
    cheapest = min(pts, key=lambda p: p["cost_per_item"])
    assert cheapest["escalated_share"] < actual[0]["escalated_share"]
    assert cheapest["cost_per_item"] < actual[0]["cost_per_item"]
    assert cheapest["accuracy"] < actual[0]["accuracy"]
    costs = [p["cost_per_item"] for p in pts]
    assert costs == sorted(costs)
    # Problems are listed by row.
    got = [(p["where"], p["kind"]) for p in d.problems]
    assert got == [("row 13", "unparsed"), (f"row {N}", "invalid")]
    assert "response_b" in d.problems[1]["reason"]


async def test_report_files_and_browser_render(tmp_path: Path, loopback: Any) -> None:
    store, run = await _cascade_run(tmp_path, loopback)
    with Store(store) as st:
        paths = write_report(st, run, tmp_path / "report")
    html = paths["html"].read_text()
    for kind in ("confusion", "scores", "calibration", "cascade", "position"):
        assert f'data-plot="{kind}"' in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    summary = json.loads(paths["json"].read_text())
    assert summary["run_id"] == "casc" and summary["counts"]["ok"] == N - 1
    md = paths["markdown"].read_text()
    assert f"| accuracy ({N - 1} of {N} labelled rows with a verdict) | 100.0% |" in md
    assert "## Cascade" in md and "## Confusion matrix" in md
    usd = re.findall(r"^\| [\d.]+% \| ([^|]+) \|", md, flags=re.M)  # the cascade table's USD/item column
    assert usd and all(re.fullmatch(r"\$\d+\.\d+", u) or u == "$0" for u in usd), usd
    refs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert all(r.startswith("#") for r in refs), refs  # nothing outside the file is fetched
    # Rates say what they are a share of: the pairs with both orders read, the labelled rows with a verdict.
    assert f"position consistency ({N - 1} of {N - 1} items with both orders read; 1 of {N} judged rows" in html
    assert f"accuracy ({N - 1} of {N} labelled rows with a verdict)" in html
    drawn = re.findall(r"<text[^>]*>([^<]*)</text>", html)  # every label the plots write
    assert "$0" in drawn and not [t for t in drawn if re.search(r"\de[-+]?\d", t)]

    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ]
    url = paths["html"].resolve().as_uri()
    dom = subprocess.run(
        [
            str(CHROMIUM),
            *flags,
            f"--user-data-dir={tmp_path / 'profile1'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    check = re.search(r'id="render-check" data-plots="(\d+)" data-rendered="(\d+)"', dom.stdout)
    assert check is not None, dom.stdout[:2000]
    assert int(check.group(1)) >= 5 and check.group(1) == check.group(2)

    def screenshot(target: str, name: str) -> Path:
        shot = tmp_path / f"{name}.png"
        res = subprocess.run(
            [
                str(CHROMIUM),
                *flags,
                f"--user-data-dir={tmp_path / name}",
                "--window-size=1280,1600",
                f"--screenshot={shot}",
                target,
            ],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
        return shot

    shot = screenshot(url, "report")
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    empty = screenshot(blank.as_uri(), "blank")
    assert _png_size(shot.read_bytes()) == _png_size(empty.read_bytes()) == (1280, 1600)
    # Charts, tables and text compress far worse than an empty page.
    assert shot.stat().st_size > 10 * empty.stat().st_size, (shot.stat().st_size, empty.stat().st_size)


async def test_report_shows_a_comparison(tmp_path: Path, loopback: Any) -> None:
    store, run = await _cascade_run(tmp_path, loopback)
    rows = [
        {"name": "local", "agreement": 0.7, "low": 0.6, "high": 0.8, "cost_per_1k": 0.0, "cells": ["local", "70%"]},
        {
            "name": "cascade",
            "agreement": 0.9,
            "low": 0.8,
            "high": 0.95,
            "cost_per_1k": 1.5,
            "cells": ["cascade", "90%"],
        },
    ]
    comparison = {"title": "Judges compared", "columns": ["judge", "agreement"], "rows": rows, "mark": "cascade"}
    with Store(store) as st:
        paths = write_report(st, run, tmp_path / "report", comparison=comparison)
        html = paths["html"].read_text()
        assert "Judges compared" in html and '<tr class="mark"><td>cascade</td>' in html
        for kind in ("comparison-agreement", "comparison-cost"):
            assert f'data-plot="{kind}"' in html
        assert "| judge | agreement |" in paths["markdown"].read_text()
        assert json.loads(paths["json"].read_text())["comparison"]["mark"] == "cascade"
        bad = {**comparison, "rows": [{**rows[0], "cells": ["local"]}]}
        with pytest.raises(ValueError, match="row 'local' has 1 cells for 2 columns"):
            write_report(st, run, tmp_path / "bad", comparison=bad)
    assert not (tmp_path / "bad").exists()  # checked before anything is written


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height
