"""A batch output file is read strictly (issue 26, item 2).

A provider's (or vLLM's) output may answer a request twice, answer a
custom_id that was never asked, or leave one out. A duplicate with different
content used to be resolved silently (the last line won). Now: identical
duplicates count once; different ones make the item an error naming its
custom_id (after the resubmits the options allow); unknown ids are reported
(logged, and in the batch's row) and never stored; a missing one is an
error, as before. Both engines read their output through the same settler.
"""

from __future__ import annotations

import json
import logging
import random
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph.jobs import BackendConfig, BatchOptions, JobSpec, JudgeConfig, Limits, SourceConfig, Store, arun_spec
from judgegraph.jobs._batch_api import AnswerBook, BatchSettler
from judgegraph.jobs._batch_store import BatchTable
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply
from judgegraph.testing_batch import BatchAPI

FAST = BatchOptions(poll_initial_s=0.01, poll_max_s=0.05)
ITEM = re.compile(r"item-(\d+)")


def _items(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"q": f"item-{i}: 2+2?", "a": "4"}) + "\n" for i in range(n)))
    return path


def _spec(src: Path, url: str) -> JobSpec:
    return JobSpec(
        source=SourceConfig(path=str(src), fields={"instruction": "q", "response": "a"}),
        judge=JudgeConfig(kind="pointwise", repair=False),
        backend=BackendConfig(model="judge-m", base_url=url + "/v1", structured_output=False, max_attempts=1),
        limits=Limits(concurrency=4),
    )


def _grade(req: LoopbackRequest) -> Reply:
    return Reply("Fine. [RESULT] 4")


class _TwiceAndStranger(BatchAPI):
    """Item 1's request is answered twice, the copy with another score, and
    every output file carries one custom_id nobody asked for."""

    def _complete(self, batch: Any) -> None:
        super()._complete(batch)
        fid = batch.output_file_id
        lines = self.files[fid].decode().splitlines()
        extra = []
        for line in lines:
            rec = json.loads(line)
            if "item-1:" in json.dumps(self._asked(batch, rec["custom_id"])):
                body = rec["response"]["body"]
                body["choices"][0]["message"]["content"] = "Hmm. [RESULT] 1"
                extra.append(json.dumps(rec))
        stranger = json.loads(lines[0])
        stranger["custom_id"] = "jg-never-asked"
        self.files[fid] = ("\n".join([*lines, *extra, json.dumps(stranger)]) + "\n").encode()

    def _asked(self, batch: Any, cid: str) -> Any:
        for line in self.files[batch.input_file_id].splitlines():
            rec = json.loads(line)
            if rec["custom_id"] == cid:
                return rec["body"]
        return None


@pytest.mark.timing
async def test_an_id_answered_twice_differently_is_an_error_and_a_stranger_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    src = _items(tmp_path / "items.jsonl", 3)
    caplog.set_level(logging.WARNING, logger="judgegraph.jobs")
    with LoopbackServer(_grade) as server:
        api = _TwiceAndStranger.attach(server)
        summary = await arun_spec(
            _spec(src, server.url), store=tmp_path / "s.db", run_id="r", batch_api=True, batch_options=FAST
        )
    with Store(tmp_path / "s.db") as store:
        rows = {r.row: r for r in store.rows("r")}
    assert (summary.ok, summary.errors) == (2, 1)
    assert rows[0].status == "ok" and rows[2].status == "ok" and rows[0].result["score"] == 4
    bad = rows[1]
    assert bad.status == "error" and "2 times with different results" in bad.reason
    assert re.search(r"jg-[0-9a-f]{32}", bad.reason)  # names the custom_id
    assert api.batches_created == 2  # the first, then item 1 resubmitted once (max_resubmits=1), answered twice again
    # The stranger: never stored, reported in the log and in each batch's row.
    assert "jg-never-asked" in caplog.text
    con = sqlite3.connect(tmp_path / "s.db")
    reasons = [r[0] for r in con.execute("SELECT reason FROM batches")]
    con.close()
    assert len(reasons) == 2 and all("jg-never-asked" in (r or "") for r in reasons)


# ---------------------------------------------------------------- the class, at the settler


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "cmpl-x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


# What a line may say about a request: one of two answers, or a refusal.
_OUTCOMES = ["[RESULT] 4", "[RESULT] 2", 400]


def _line(cid: str, outcome: str | int, n: int) -> str:
    if isinstance(outcome, int):
        body: dict[str, Any] = {"error": {"message": "refused", "type": "fault"}}
        resp = {"status_code": outcome, "body": body}
    else:
        resp = {"status_code": 200, "body": _completion(outcome)}
    return json.dumps({"id": f"batch_req_{n}", "custom_id": cid, "response": resp, "error": None})


class _Content:
    def __init__(self, content: bytes) -> None:
        self.content = content


class _Files:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    async def content(self, file_id: str) -> _Content:
        return _Content(self.files[file_id])


class _Provider:
    """A provider whose batches are done: only their files are left to read."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = _Files(files)


@st.composite
def _output(draw: st.DrawFn) -> tuple[list[str], dict[str, list[str | int]], list[str]]:
    asked = [f"jg-{i:032x}" for i in range(draw(st.integers(min_value=1, max_value=5)))]
    strangers = [f"jg-stranger-{i}" for i in range(draw(st.integers(min_value=0, max_value=2)))]
    copies = {
        k: draw(st.lists(st.sampled_from(_OUTCOMES), max_size=3)) for k in asked + strangers
    }  # zero copies: left out
    return asked, copies, strangers


@settings(max_examples=100)
@given(out=_output(), seed=st.integers(min_value=0, max_value=2**16), unreadable=st.integers(min_value=0, max_value=1))
async def test_any_output_file_stores_each_asked_id_once_or_says_why(
    tmp_path_factory: pytest.TempPathFactory,
    out: tuple[list[str], dict[str, list[str | int]], list[str]],
    seed: int,
    unreadable: int,
) -> None:
    asked, copies, strangers = out
    lines = [(k, o) for k, outs in copies.items() for o in outs]
    random.Random(seed).shuffle(lines)  # any order, the two files interleaved
    ok = [_line(k, o, n) for n, (k, o) in enumerate(lines) if not isinstance(o, int)]
    err = [_line(k, o, n) for n, (k, o) in enumerate(lines) if isinstance(o, int)]
    ok += ['{"custom_id": "jg-cut'] * unreadable  # a line cut off: read as nothing
    files = {"out": "\n".join(ok).encode(), "err": "\n".join(err).encode()}
    table = BatchTable(tmp_path_factory.mktemp("b") / "s.db")
    try:
        table.add("local", "cfg", asked)
        table.update("local", batch_id="batch_1", state="completed", output_file_id="out", error_file_id="err")
        book = AnswerBook()
        options = BatchOptions(max_resubmits=0)  # no follow-up batch: every verdict is final after one read
        await BatchSettler(_Provider(files), table, "cfg", book, options).asettle(set(asked))
        (row,) = table.rows("cfg")
    finally:
        table.close()
    for k in asked:
        distinct = list(dict.fromkeys(copies[k]))
        if not distinct:
            assert k not in book.answers and "missing" in book.failed[k]
        elif len(distinct) > 1:
            assert k not in book.answers and k in book.failed[k] and "different" in book.failed[k]
        elif isinstance(distinct[0], int):
            assert k not in book.answers and "HTTP 400" in book.failed[k]
        else:
            assert k not in book.failed and book.answers[k].text == distinct[0]
    assert set(book.answers) | set(book.failed) == set(asked)  # strangers are never stored
    answered_strangers = [s for s in strangers if copies[s]]
    for s in answered_strangers:
        assert row.reason is not None and s in row.reason
    if not answered_strangers:
        assert row.reason is None or "never asked" not in row.reason
