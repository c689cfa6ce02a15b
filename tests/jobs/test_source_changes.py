"""An input file that changes while a job reads it is detected and reported,
and the run is not marked finished; rows from two versions are never kept
silently (issue 26's open class). A rerun on the settled file finishes and
reflects that one version: unchanged rows are not judged again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgegraph import ScriptedBackend
from judgegraph.jobs import SourceChangedError, SourceConfig, Store, arun_job
from judgegraph.judges import PointwiseJudge

N = 6


def _rows(n: int, tag: str = "") -> str:
    return "".join(json.dumps({"id": f"i{i}", "instruction": f"q{i}{tag}", "response": "a"}) + "\n" for i in range(n))


def _edit(path: Path, how: str) -> None:
    text = path.read_text()
    if how == "append":
        path.write_text(text + json.dumps({"id": "extra", "instruction": "new", "response": "a"}) + "\n")
    elif how == "truncate":
        path.write_text(text[: len(text) // 2 + 7])  # mid-line: the cut row is invalid, never half-judged
    elif how == "rewrite-same-size":
        path.write_text(text.replace("q1", "Q1", 1))  # one row's text, the size unchanged
    else:  # replaced by a new file under the same name
        path.unlink()
        path.write_text(_rows(N, "v2"))


def _parsed(line: str) -> dict[str, Any] | None:
    """A row of the settled file, or None for the line a truncation cut (the job reports it invalid)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _run(src: Path, store: Path, backend: ScriptedBackend) -> Any:
    return asyncio.run(
        arun_job(SourceConfig(path=str(src), id="id"), judge=PointwiseJudge(backend), kind="pointwise",
                 store=store, run_id="r")
    )  # fmt: skip


@settings(max_examples=24, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(["append", "truncate", "rewrite-same-size", "replace"]), at_call=st.integers(1, N))
def test_a_file_changed_mid_job_is_named_and_the_run_is_not_finished(
    tmp_path_factory: pytest.TempPathFactory, how: str, at_call: int
) -> None:
    folder = tmp_path_factory.mktemp("job")
    src, store = folder / "items.jsonl", folder / "runs.db"
    src.write_text(_rows(N))
    calls = 0

    def answer(_: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == at_call:  # someone saves the file while the job is judging it
            _edit(src, how)
        return "Fine. [RESULT] 4"

    with pytest.raises(SourceChangedError, match=r"items\.jsonl") as caught:
        _run(src, store, ScriptedBackend(answer))
    assert "run the same command again" in str(caught.value)
    with Store(store, read_only=True) as st:
        assert st.run("r").state == "interrupted"  # never "finished" over a file that changed under it
    # The settled file: the rerun finishes, and the run holds exactly its rows.
    again = _run(src, store, ScriptedBackend(lambda _: "Fine. [RESULT] 4"))
    settled = [r for line in src.read_text().splitlines() if (r := _parsed(line)) is not None]
    with Store(store, read_only=True) as st:
        assert st.run("r").state == "finished"
        assert sorted(r.item_id for r in st.rows("r") if r.item_id) == sorted(r["id"] for r in settled)
    assert again.rows == sum(1 for line in src.read_text().splitlines() if line.strip())


def test_an_unchanged_file_finishes_as_before(tmp_path: Path) -> None:
    src, store = tmp_path / "items.jsonl", tmp_path / "runs.db"
    src.write_text(_rows(N))
    summary = _run(src, store, ScriptedBackend(lambda _: "Fine. [RESULT] 4"))
    assert summary.ok == N
    with Store(store, read_only=True) as st:
        assert st.run("r").state == "finished"


@pytest.mark.parametrize("how", ["append", "truncate", "rewrite-same-size", "replace"])
def test_a_file_changed_between_a_run_and_its_resume_is_reported(tmp_path: Path, how: str) -> None:
    src, store = tmp_path / "items.jsonl", tmp_path / "runs.db"
    src.write_text(_rows(N))
    first = _run(src, store, ScriptedBackend(lambda _: "Fine. [RESULT] 4"))
    assert not any("changed since this run began" in p for p in first.problems)
    same = _run(src, store, ScriptedBackend(lambda _: "Fine. [RESULT] 4"))  # nothing changed: nothing said
    assert not any("changed since this run began" in p for p in same.problems) and same.judged == 0
    _edit(src, how)
    again = _run(src, store, ScriptedBackend(lambda _: "Fine. [RESULT] 4"))
    (notice,) = [p for p in again.problems if "changed since this run began" in p]
    assert str(src) in notice
    settled = [r for line in src.read_text().splitlines() if (r := _parsed(line)) is not None]
    with Store(store, read_only=True) as st:  # the finished pass holds the file as it is now, nothing older
        assert sorted(r.item_id for r in st.rows("r") if r.item_id) == sorted(r["id"] for r in settled)
