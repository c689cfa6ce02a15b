"""A torn or corrupt row in the result store: reading it back names the store
file, the run and the row; the report still renders every good row and says
how many it could not read. Nothing already judged is lost."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from judgegraph import ScriptedBackend
from judgegraph.jobs import SourceConfig, Store, arun_job
from judgegraph.jobs._report import build_report
from judgegraph.jobs.cli import app
from judgegraph.judges import PointwiseJudge
from judgegraph.types import Pricing

N = 6
RUN = "r"


def _make_store(folder: Path) -> Path:
    src = folder / "items.jsonl"
    src.write_text(
        "".join(
            json.dumps({"key": f"item-{i}", "instruction": f"q{i}", "response": f"a{i}", "human": 1 + i % 5}) + "\n"
            for i in range(N)
        )
    )
    backend = ScriptedBackend(lambda _: "Fine. [RESULT] 4", pricing=Pricing(input_per_mtok=1.0, output_per_mtok=1.0))
    store = folder / "runs.db"
    asyncio.run(
        arun_job(
            SourceConfig(path=str(src), id="key", label="human"),
            judge=PointwiseJudge(backend),
            kind="pointwise",
            store=store,
            run_id=RUN,
        )
    )
    return store


@pytest.fixture(scope="module")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_store(tmp_path_factory.mktemp("store"))


def _item_hash(db: Path, row: int) -> str:
    with sqlite3.connect(db) as con:
        (h,) = con.execute("SELECT item_hash FROM items WHERE run_id=? AND row=?", (RUN, row)).fetchone()
    return str(h)


def test_report_with_a_torn_result_renders_the_rest_and_names_the_row(template_store: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    shutil.copy(template_store, db)
    with sqlite3.connect(db) as con:  # a write cut off part-way: the JSON ends mid-value
        con.execute("UPDATE results SET result=substr(result, 1, 17) WHERE item_hash=?", (_item_hash(db, 3),))
    out = tmp_path / "report"
    res = CliRunner().invoke(app, ["report", RUN, "--store", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["unreadable"] == 1 and summary["counts"]["ok"] == N - 1
    assert summary["counts"]["rows"] == N
    (problem,) = [p for p in summary["problems"] if "stored row unreadable" in p["reason"]]
    for part in (str(db), repr(RUN), "row 3", "item-3", "result"):
        assert part in problem["reason"]
    assert summary["n_labeled"] == N - 1  # the good rows are all in the figures
    assert summary["cost_usd"] is None  # the torn row's cost is unknown: the total is too, not understated
    html = (out / "report.html").read_text()
    assert "unreadable stored rows" in html  # a headline tile, beside ok, unparsed and error


@pytest.mark.parametrize("labels", ["human", "judge"])
def test_a_torn_row_is_named_and_never_exported_as_training_data(
    template_store: Path, tmp_path: Path, labels: str
) -> None:
    from judgegraph.finetune import traces_from_store

    db = tmp_path / "runs.db"
    shutil.copy(template_store, db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE results SET result=substr(result, 1, 17) WHERE item_hash=?", (_item_hash(db, 3),))
    export = traces_from_store(db, labels=labels)  # type: ignore[arg-type]
    assert export.counts["unreadable"] == 1 and export.counts["exported"] == N - 1, export.counts
    assert "item-3" not in {t.id for t in export.traces}
    (named,) = [p for p in export.problems if "stored row unreadable" in p]
    assert "row 3" in named and str(db) in named


def test_a_corrupt_run_spec_is_a_clear_error_naming_store_and_run(template_store: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    shutil.copy(template_store, db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET spec='{\"judge\": ' WHERE run_id=?", (RUN,))
    res = CliRunner().invoke(app, ["report", RUN, "--store", str(db), "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and isinstance(res.exception, SystemExit)  # a message, not a traceback
    assert str(db) in res.output.replace("\n", "") and repr(RUN) in res.output


# ------------------------------------------------------------ property over corruptions

_COLUMNS = {  # (table, column, key column): every stored value a read decodes or trusts the type of
    "result": ("results", "result", "item_hash"),
    "status": ("results", "status", "item_hash"),
    "cost_usd": ("results", "cost_usd", "item_hash"),
    "prompt_tokens": ("results", "prompt_tokens", "item_hash"),
    "label": ("items", "label", "item_hash"),
    "input": ("inputs", "input", "item_hash"),
    "item_id": ("items", "item_id", "item_hash"),
}
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_field_names = st.sampled_from(["score", "confidence", "criteria", "orders", "tiers", "status", "winner"])


@st.composite
def _corruption(draw: st.DrawFn) -> tuple[str, int, Any]:
    column = draw(st.sampled_from(sorted(_COLUMNS)))
    row = draw(st.integers(0, N - 1))
    how = draw(st.sampled_from(["truncate", "bytes", "text", "json", "field"]))
    value: Any
    if how == "truncate":
        value = ("truncate", draw(st.integers(0, 400)))
    elif how == "bytes":
        value = draw(st.binary(max_size=24))
    elif how == "text":
        value = draw(st.text(max_size=24))
    elif how == "json":
        value = json.dumps(draw(_json_value))
    else:  # a verdict field given a value of another type
        value = ("field", draw(_field_names), draw(_json_value))
    return column, row, value


def _corrupt(db: Path, column: str, row: int, value: Any) -> None:
    table, col, key = _COLUMNS[column]
    h = _item_hash(db, row)
    with sqlite3.connect(db) as con:
        where = f"{key}=?" + (" AND run_id=?" if table == "items" else "")
        args: tuple[Any, ...] = (h, RUN) if table == "items" else (h,)
        (old,) = con.execute(f"SELECT {col} FROM {table} WHERE {where}", args).fetchone()
        if isinstance(value, tuple) and value[0] == "truncate":
            value = str(old)[: value[1]]
        elif isinstance(value, tuple) and value[0] == "field":
            try:
                rec = json.loads(old)
                rec[value[1]] = value[2]
                value = json.dumps(rec)
            except (TypeError, ValueError, AttributeError):
                value = json.dumps({value[1]: value[2]})
        con.execute(f"UPDATE {table} SET {col}=? WHERE {where}", (value, *args))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corruptions=st.lists(_corruption(), min_size=1, max_size=3))
def test_no_corruption_raises_a_raw_decode_error_and_every_bad_row_is_named(
    template_store: Path, corruptions: list[tuple[str, int, Any]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        shutil.copy(template_store, db)
        with Store(template_store, read_only=True) as st0:
            before = {r.row: r for r in st0.rows(RUN, with_input=True)}
        touched = {row for _, row, _ in corruptions}
        for column, row, value in corruptions:
            _corrupt(db, column, row, value)
        with Store(db, read_only=True) as store:
            rows = list(store.rows(RUN, with_input=True))
            counts = store.counts(RUN)
            report = build_report(store, RUN)  # never a raw JSONDecodeError, KeyError or TypeError
    assert [r.row for r in rows] == list(range(N))  # every row still comes back, in order
    bad = [r for r in rows if r.unreadable is not None]
    for r in bad:
        assert r.row in touched
        assert r.unreadable is not None
        for part in (str(db), repr(RUN), f"row {r.row}"):
            assert part in r.unreadable
        assert r.status is None and r.result is None  # left out of the figures, never a default score
    for r in rows:
        if r.row not in touched:
            assert r == before[r.row]  # the good rows are untouched
        elif r.unreadable is None:  # still readable: it has the shapes the readers rely on
            assert r.result is None or isinstance(r.result, dict)
            assert r.input is None or isinstance(r.input, dict)
            assert r.label is None or isinstance(r.label, str | int | float | bool)
            assert r.cost_usd is None or isinstance(r.cost_usd, float | int)
            assert isinstance(r.prompt_tokens, int) and isinstance(r.completion_tokens, int)
    assert counts.get("unreadable", 0) == len(bad) and counts["rows"] == N
    assert report.counts == counts
    assert sum(1 for p in report.problems if "stored row unreadable" in p["reason"]) == len(bad)
    assert (report.cost_usd is None) == bool(bad)  # the run is priced: only an unreadable row unprices it
