"""Bad input never stops a job: each broken row is recorded with a reason that
names the row (and the field, where there is one), and every good row is judged.

Covers malformed JSONL, missing and extra fields, bytes that are not UTF-8,
lone surrogates, empty strings, deep nesting, and prompts longer than the
model's context (which fail that item, clearly, and no other)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy, ScriptedBackend, Status
from judgegraph.backends import GenerateRequest
from judgegraph.jobs import SourceConfig, Store, arun_job
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply


def _good(i: int) -> bytes:
    return json.dumps({"instruction": f"question {i}", "response": f"answer {i}"}).encode() + b"\n"


# (raw line, what the row's problem must say); None: the row is judged.
BAD_JSONL: list[tuple[bytes, str | None]] = [
    (_good(0), None),
    (b'{"instruction": "q", "response": \n', "not valid JSON"),
    (b'{"instruction": "q"}\n', "missing response"),
    (b'{"response": "r"}\n', "missing instruction"),
    (b'{"instruction": "q", "response": "r", "extra": 1, "more": {"x": [1]}}\n', None),  # extra fields are ignored
    (b'{"instruction": "q \xff\xfe", "response": "r"}\n', "not valid UTF-8"),
    (b'{"instruction": "q", "response": "bad \\udcff half"}\n', "response"),  # a lone surrogate escape
    (b'{"instruction": "", "response": "r"}\n', "missing instruction"),
    (b'{"instruction": "q", "response": "   "}\n', "missing response"),
    (b'{"instruction": "q", "response": null}\n', "missing response"),
    (b'{"instruction": "q", "response": {"text": "nested"}}\n', "response"),
    (b'["instruction", "response"]\n', "expected a JSON object"),
    (b'"just a string"\n', "expected a JSON object"),
    (b'{"instruction": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n", "JSON"),
    (b"\x00\x01\x02 binary junk \x80\n", "not valid"),
    (_good(1), None),
    (b'{"instruction": "q", "response": 42}\n', None),  # a numeric answer is still an answer
    (b'{"instruction": "q\\u0000nul", "response": "r"}\n', None),  # NUL is valid text
    (_good(2)[:-1], None),  # last line without a newline
]


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def _scripted() -> ScriptedBackend:
    return ScriptedBackend(lambda req: "Fine. [RESULT] 4")


async def _run(path: Path, store: Path, backend: Any, **kw: Any) -> Any:
    return await arun_job(
        SourceConfig(path=str(path), **kw),
        judge=PointwiseJudge(structured=False),
        kind="pointwise",
        store=store,
        context={"backend": backend},
        run_id="bad",
        concurrency=4,
    )


async def test_every_kind_of_bad_jsonl_row_is_reported_by_row_and_the_rest_judged(tmp_path: Path) -> None:
    src = _write(tmp_path / "bad.jsonl", [line for line, _ in BAD_JSONL])
    backend = _scripted()
    summary = await _run(src, tmp_path / "s.db", backend)

    n_good = sum(1 for _, why in BAD_JSONL if why is None)
    assert summary.rows == len(BAD_JSONL)
    assert summary.invalid == len(BAD_JSONL) - n_good
    assert summary.ok == n_good and summary.errors == summary.unparsed == 0
    assert summary.problems_total == summary.invalid
    # Only the good rows reached the model.
    assert len(backend.calls) == n_good

    with Store(tmp_path / "s.db") as st:
        rows = list(st.rows("bad"))
        assert st.run("bad").state == "finished"
    assert [r.row for r in rows] == list(range(len(BAD_JSONL)))  # each row exactly once, in order
    for r, (_, why) in zip(rows, BAD_JSONL, strict=True):
        if why is None:
            assert r.status == "ok" and r.problem is None, r
        else:
            assert r.status is None and r.item_hash is None, r
            assert r.problem is not None and r.problem.startswith(f"row {r.row}: "), r.problem
            assert why in r.problem, (why, r.problem)
    # The summary lists the same problems, by row.
    assert {p.split(":")[0] for p in summary.problems} == {f"row {r.row}" for r in rows if r.problem}


async def test_non_utf8_bytes_are_named_with_their_position(tmp_path: Path) -> None:
    src = _write(tmp_path / "bytes.jsonl", [_good(0), b'{"instruction": "caf\xe9", "response": "r"}\n', _good(1)])
    summary = await _run(src, tmp_path / "s.db", _scripted())
    assert (summary.rows, summary.ok, summary.invalid) == (3, 2, 1)
    (problem,) = summary.problems
    assert problem.startswith("row 1: ") and "not valid UTF-8" in problem and "0xe9" in problem


async def test_csv_and_json_array_sources_with_bad_records(tmp_path: Path) -> None:
    csv_src = tmp_path / "bad.csv"
    csv_src.write_bytes(
        b"instruction,response\n"
        b"q0,a0\n"
        b"q1,caf\xe9\n"  # latin-1, not UTF-8
        b"q2\n"  # too few fields
        b"q3,a3,extra\n"  # too many fields
        b",a4\n"  # empty instruction
        b"q5,a5\n"
    )
    s = await _run(csv_src, tmp_path / "c.db", _scripted())
    assert (s.rows, s.ok, s.invalid) == (6, 2, 4)
    probs = "\n".join(s.problems)
    for needle in (
        "row 1: field 'response': not valid UTF-8",
        "row 2: CSV record has 1 fields",
        "row 3: CSV record has 3",
        "row 4: ",
    ):
        assert needle in probs, probs
    assert "missing instruction" in probs

    arr = tmp_path / "bad.json"
    arr.write_bytes(
        b'[{"instruction": "q0", "response": "a0"},\n'
        b' {"instruction": "q1", "response": "caf\xe9"},\n'
        b' {"instruction": "q2", "response": "a2"}]\n'
    )
    s = await _run(arr, tmp_path / "j.db", _scripted())
    assert (s.rows, s.ok, s.invalid) == (3, 2, 1)
    assert s.problems[0].startswith("row 1: ") and "not valid UTF-8" in s.problems[0]


async def test_a_file_of_only_bad_rows_finishes_with_nothing_judged(tmp_path: Path) -> None:
    src = _write(tmp_path / "all-bad.jsonl", [b"{\n", b"\xff\xff\n", b"[]\n", b'{"instruction": ""}\n'])
    backend = _scripted()
    s = await _run(src, tmp_path / "s.db", backend)
    assert (s.rows, s.invalid, s.judged) == (4, 4, 0)
    assert backend.calls == []
    with Store(tmp_path / "s.db") as st:
        assert st.counts("bad") == {"rows": 4, "ok": 0, "unparsed": 0, "error": 0, "invalid": 4, "pending": 0}


# ------------------------------------------------------------ longer than the context

CONTEXT_CHARS = 4_000


def _context_limited(req: LoopbackRequest) -> Reply | Fault:
    # What vLLM and OpenAI answer for a prompt over the context: HTTP 400, with the limit.
    if len(req.prompt) > CONTEXT_CHARS:
        return Fault(
            "status",
            400,
            message=f"This model's maximum context length is {CONTEXT_CHARS} tokens; the request has {len(req.prompt)}",
        )
    return Reply("Fine. [RESULT] 3")


async def test_over_context_item_fails_clearly_and_alone_on_an_http_backend(tmp_path: Path) -> None:
    rows = [{"instruction": f"q{i}", "response": f"a{i}"} for i in range(6)]
    rows[2]["response"] = "long " * 2_000
    src = tmp_path / "long.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with LoopbackServer(_context_limited) as server:
        backend = OpenAIBackend(
            "judge",
            base_url=server.url + "/v1",
            api_key="k",
            retry=RetryPolicy(max_attempts=3, initial_delay_s=0.01),  # the default 60 s timeout: never reached here
        )
        s = await _run(src, tmp_path / "s.db", backend)
        calls = sum(server.calls.values())
    assert (s.rows, s.ok, s.errors) == (6, 5, 1)
    assert calls == 6  # a 400 is not retried, and the item gets no repair round
    (problem,) = s.problems
    assert problem.startswith("row 2: error: HTTP 400") and "maximum context length" in problem


@pytest.mark.timing
async def test_over_context_prompt_fails_before_running_on_the_in_process_model(tiny_model: Path) -> None:
    from judgegraph import TransformersBackend

    backend = TransformersBackend(tiny_model, max_batch_size=8, batch_wait_s=0.05)
    judge = PointwiseJudge(backend, max_tokens=4, repair=False)
    items = [{"instruction": "q", "response": "short"}] * 3 + [{"instruction": "q", "response": "word " * 5_000}]
    results = await asyncio.gather(*(judge.ajudge(i) for i in items))  # a hang is pytest-timeout's to catch
    long = results[-1]
    assert long.status is Status.ERROR and long.score is None
    assert long.reason is not None and "context" in long.reason and "2048" in long.reason
    # Its batch-mates ran as usual (an untrained model may not answer in format, but it answered).
    for r in results[:3]:
        assert r.status is not Status.ERROR, r.reason
    # A direct call names the numbers.
    from judgegraph.backends import BackendError
    from judgegraph.types import Message

    with pytest.raises(BackendError, match=r"tokens.*context of 2048"):
        await backend.generate(GenerateRequest(messages=(Message(role="user", content="w " * 5_000),), max_tokens=4))
