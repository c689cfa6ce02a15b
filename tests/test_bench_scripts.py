"""Every bench script still imports: a test module it borrows from can move
(bench/soak.py broke when the tests moved into folders) and nothing else
would notice until someone ran it. And the scripts whose tables show rates
print them with their intervals (issue 28), checked on a small subset."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _md_tables import BRACKETED, Table, missing_interval, tables

BENCH = Path(__file__).resolve().parents[1] / "bench"

# One fresh interpreter for all of them: a script's own sys.path changes stay in it.
_IMPORT_ALL = """
import importlib.util, sys, traceback
failed = []
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        failed.append(path + ": " + traceback.format_exc(limit=2).strip().splitlines()[-1])
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_bench_script_imports() -> None:
    scripts = sorted(str(p) for p in BENCH.glob("*.py"))
    assert any(s.endswith("soak.py") for s in scripts)
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL, *scripts], capture_output=True, text=True, cwd=BENCH)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def _load(name: str) -> Any:
    """A bench script as a module (under its own name, so its dataclasses resolve)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _assert_interval_columns(text: str, *, expect_tables: int) -> list[Table]:
    """Every rate table names its interval in the header, and every cell under a "[95% ...]"
    header holds one ([low, high]) beside its value ("–" where there is nothing to compare)."""
    found = tables(text, "bench output")
    assert len(found) == expect_tables, [t.header for t in found]
    assert [t.header for t in found if missing_interval(t)] == []
    for t in found:
        for header, column in t.column("[95%"):
            assert t.rows, t.header
            bare = [c for c in column if not BRACKETED.search(c) and c not in ("–", "")]
            assert not bare, f"{header}: cells without an interval: {bare}"
    return found


@pytest.mark.timing  # a loopback server and batch jobs polled to completion
async def test_batch_cost_tables_carry_intervals(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = shared_data / "llmbar"
    if not (root / "LLMBar" / "Natural").is_dir():
        pytest.skip("LLMBar Natural is not in ../shared/data/llmbar")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    bench = _load("batch_cost")
    # One strategy and one fold seed: the tables' shape, not the bench's figures.
    out = await bench.strategy_rows(root, "Metrics_Reference", tmp_path, seeds=(0,))
    found = _assert_interval_columns("\n".join(bench.report([out], (0,))), expect_tables=4)
    cost, _, jury, _ = found
    assert len(cost.rows) == 3 and len(jury.rows) == 1  # one row per cheap tier; one strategy
    ((_, strict),) = jury.column("strict Δ")
    assert BRACKETED.search(strict[0]), strict  # the paired difference has its interval too


def test_sampled_confidence_tables_carry_intervals(shared_data: Path) -> None:
    root = shared_data / "llmbar"
    if not (root / "LLMBar" / "Natural").is_dir():
        pytest.skip("LLMBar is not in ../shared/data/llmbar")
    bench = _load("sampled_confidence")
    # One evaluator: both tables, one row each.
    found = _assert_interval_columns("\n".join(bench.report(root, evaluators=("GPT-4",))), expect_tables=2)
    assert [len(t.rows) for t in found] == [1, 1]
    for t in found:
        ((_, rate),) = t.column("error rate")
        assert BRACKETED.search(rate[0]), rate


async def test_cascade_llmbar_tables_carry_intervals(shared_data: Path) -> None:
    root = shared_data / "llmbar"
    if not (root / "LLMBar" / "Natural").is_dir():
        pytest.skip("LLMBar is not in ../shared/data/llmbar")
    bench = _load("cascade_llmbar")
    # One Natural strategy, one other subset, two random orders: every table, few rows.
    text = "\n".join(await bench.report(root, strategies=("Metrics_Reference",), subsets=("FairEval",), orders=2))
    found = _assert_interval_columns(text, expect_tables=6)
    natural, calibration = found[0], found[-1]
    assert len(natural.rows) == 1 + 3 * 3  # GPT-4 alone, then each cheap judge alone and in two cascades
    ((_, delta),) = natural.column("strict Δ")
    assert delta[0] == "–" and all(BRACKETED.search(d) for d in delta[1:]), delta  # GPT-4 is not compared with itself
    assert "95%" in " ".join(calibration.header)  # the one-sided bound says its level


def test_llmbar_agreement_table_carries_intervals(shared_data: Path) -> None:
    subset = shared_data / "llmbar" / "Processed" / "FairEval"
    if not subset.is_dir():
        pytest.skip("LLMBar's FairEval subset is not in ../shared/data/llmbar")
    bench = _load("llmbar_agreement")
    # One subset (8 recorded runs): each row still matches LLMBar's own statistics.json.
    (found,) = _assert_interval_columns("\n".join(bench.table(subset)), expect_tables=1)
    assert len(found.rows) == 8
    ((_, matches),) = found.column("matches statistics.json")
    assert set(matches) == {"yes"}
    assert len(found.column("[95% bootstrap")) == 3  # the three kappa columns
