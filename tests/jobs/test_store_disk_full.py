"""A result store on a disk that fills up mid-job (issue 15), for real: the
store lives on a small tmpfs, a filler file takes most of it, and SQLite's own
writes run out of space. Skips where this process may not mount a tmpfs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgegraph import PointwiseJudge, ScriptedBackend
from judgegraph.backends import GenerateRequest
from judgegraph.jobs import SourceConfig, Store, StoreCommitError, StoreError, arun_job

LONG = "x" * 2000  # each result row carries a long rationale, so the disk fills within a few hundred items


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(path: Path) -> None:
    """Write until the disk refuses even one more byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
    finally:
        os.close(fd)


def _question(req: GenerateRequest) -> str:
    text = "\n".join(m.content for m in req.messages)
    return text[text.index("Question ") :].split("?")[0]


async def test_a_full_disk_ends_the_job_with_an_error_and_loses_nothing(tmp_path: Path, small_disk: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"instruction": f"Question {i}?", "response": f"answer {i}"}) + "\n" for i in range(600)),
        encoding="utf-8",
    )
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 7_800_000)  # leaves ~580 KB for the store
    backend = ScriptedBackend(lambda req: f"{LONG} [RESULT] 4")
    judge = PointwiseJudge(backend, structured=False, repair=False)
    db = small_disk / "s.db"
    store = Store(db, flush_interval_s=0.02, max_unsaved=100)

    with pytest.raises(StoreCommitError) as info:
        await arun_job(SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=store, run_id="r")
    assert "full" in str(info.value).lower() and str(db) in str(info.value)
    sent_first = len(backend.calls)
    assert sent_first < 600  # it stopped instead of judging everything into a full disk
    filler.unlink()  # the user frees space
    store.close()  # the results still buffered commit now

    with Store(db) as st:
        saved = st.counts("r")["ok"]
    assert 0 < saved <= sent_first
    summary = await arun_job(SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=db, run_id="r")
    assert summary.cached == saved and summary.judged == 600 - saved and summary.ok == 600
    with Store(db) as st:
        assert st.counts("r")["ok"] == 600
    per_item = Counter(_question(c) for c in backend.calls)
    assert len(per_item) == 600
    # Only items judged but not saved when the job stopped were sent twice.
    assert sum(n - 1 for n in per_item.values()) <= sent_first - saved
    assert os.path.getsize(db) > 0


async def test_a_disk_already_full_when_a_rerun_starts_gives_a_store_error_naming_the_file(
    tmp_path: Path, small_disk: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"instruction": "Question 1?", "response": "answer"}) + "\n", encoding="utf-8")
    backend = ScriptedBackend(lambda req: "Fine. [RESULT] 4")
    judge = PointwiseJudge(backend, structured=False, repair=False)
    db = small_disk / "s.db"
    await arun_job(SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=db, run_id="r")
    _fill(small_disk / "filler")  # then every byte left on the disk goes
    src.write_text(
        "".join(json.dumps({"instruction": f"Question {i}?", "response": "answer"}) + "\n" for i in range(50)),
        encoding="utf-8",
    )
    # Before the fix: a raw OSError from writing the run lock's holder note.
    with pytest.raises(StoreError) as info:
        await arun_job(SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=db, run_id="r")
    assert str(db) in str(info.value)
