"""API keys never reach the store, reports, logs, traces, output or exceptions.

A recognisable key is set in the environment, used against a loopback server
that checks it arrives, fails some calls (one kind of failure echoes the key
back in its error text, as some servers do), and then every output is
scanned for it: the store's database files, the report's HTML/JSON/Markdown,
captured logs at DEBUG, stdout and stderr, exception strings, the reprs of
backends, judges and specs, LangChain callback traces and LangGraph streams,
and the CLI's own output.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackHandler

from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy
from judgegraph.backends import BackendError, TGIBackend
from judgegraph.jobs import JobSpec, Store, arun_spec, build_backend
from judgegraph.jobs._report import write_report
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

KEY = "sk-jg-canary-7f3a9c1e5b2d4086e1aa"
CORE = "7f3a9c1e5b2d4086"  # the key's middle: catches a partly masked key too
ENV = "JG_TEST_SECRET_KEY"


def _leaks(blob: bytes | str) -> bool:
    raw = blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else blob
    return any(s.encode() in raw for s in (KEY, CORE)) or any(s.encode("utf-16-le") in raw for s in (KEY, CORE))


class EchoingServer:
    """Checks the key arrives; item k fails in the way k % 6 says, and an
    unauthorised answer quotes the key back, as some servers do."""

    def __init__(self) -> None:
        self.seen_keys: set[str] = set()

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        auth = req.headers.get("authorization", "")
        self.seen_keys.add(auth.removeprefix("Bearer ").strip())
        n = sum(int(ch) for ch in req.prompt if ch.isdigit()) % 6
        if n == 0:
            return Fault("status", 401, message=f"Incorrect API key provided: {auth}. Check your key.")
        if n == 1:
            return Fault("status", 500, message=f"upstream failed for {auth}")
        if n == 2:
            return Fault("garbage")
        if n == 3:
            return Fault("reset")
        return Reply("Fine. [RESULT] 4")


class Recorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
        self.events.append(repr((serialized, inputs, kw)))

    async def on_chain_end(self, outputs: Any, **kw: Any) -> None:
        self.events.append(repr((outputs, kw)))

    async def on_chain_error(self, error: BaseException, **kw: Any) -> None:
        self.events.append(repr((error, kw)))


def _files(folder: Path) -> Iterable[Path]:
    return (p for p in folder.rglob("*") if p.is_file())


async def test_the_api_key_reaches_no_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(ENV, KEY)
    caplog.set_level(logging.DEBUG)  # every logger, openai's and httpx's included
    for name in ("openai", "httpx", "httpx2", "httpcore", "huggingface_hub"):
        caplog.set_level(logging.DEBUG, logger=name)  # restored after the test
    src = tmp_path / "items.jsonl"
    src.write_text(
        "".join(json.dumps({"instruction": f"Question {i}?", "response": f"answer {i}"}) + "\n" for i in range(30)),
        encoding="utf-8",
    )
    texts: list[str] = []  # everything else that is output: exceptions, reprs, traces, streams
    server_fn = EchoingServer()
    with LoopbackServer(server_fn) as server:
        spec = JobSpec.model_validate(
            {
                "source": {"path": str(src)},
                "judge": {"kind": "pointwise", "structured": False},
                "backend": {
                    "model": "judge",
                    "base_url": server.url + "/v1",
                    "api_key_env": ENV,
                    "max_attempts": 2,
                    "timeout_s": 60,  # answered requests must never time out, however slow the machine
                },
                "limits": {"concurrency": 4},
            }
        )
        summary = await arun_spec(spec, store=tmp_path / "store.db", run_id="secrets")
        texts += [summary.model_dump_json(), repr(summary), repr(spec), spec.model_dump_json()]
        report = write_report(Store(tmp_path / "store.db"), "secrets", tmp_path / "report")
        assert set(report) == {"html", "json", "markdown"}

        backends = [
            build_backend(spec.backend),
            OpenAIBackend("judge", base_url=server.url + "/v1", api_key=KEY, retry=RetryPolicy(max_attempts=1)),
            TGIBackend(server.url, mode="chat", token=KEY, retry=RetryPolicy(max_attempts=1)),
        ]
        for b in backends:
            texts += [repr(b), str(b)]
            judge = PointwiseJudge(b, structured=False, repair=False)
            texts += [repr(judge), str(vars(judge))]
            # The unauthorised answer, as an exception from the backend and as a judge result.
            req_item = {"instruction": "Q 0?", "response": "answer 0"}  # digits sum to 0: the 401
            with pytest.raises(BackendError) as info:
                from judgegraph.backends import GenerateRequest
                from judgegraph.types import Message

                await b.generate(GenerateRequest(messages=(Message(role="user", content="zero 0"),)))
            texts += [str(info.value), repr(info.value), repr(info.value.args)]
            assert "401" in str(info.value)
            result = await judge.ajudge(req_item)
            assert not result.ok and "401" in (result.reason or "")
            texts += [result.model_dump_json(), repr(result)]
            # A traced Runnable call and a graph run, callbacks and streams recorded.
            rec = Recorder()
            out = await judge.ainvoke(req_item, {"callbacks": [rec], "tags": ["t"], "metadata": {"m": 1}})
            texts += [*rec.events, repr(out)]
            from graphs import create_pointwise_graph

            graph = create_pointwise_graph()
            rec = Recorder()
            async for chunk in graph.astream(
                {"instruction": "Question 5?", "response": "answer 5"},
                {"callbacks": [rec]},
                context={"judge": PointwiseJudge(structured=False), "backend": b},
                stream_mode=["updates", "custom", "debug", "values"],
            ):
                texts.append(repr(chunk))
            texts += rec.events
        # A spec with no key at all fails with an error that names the variable, not a value.
        monkeypatch.delenv(ENV)
        with pytest.raises(ValueError) as missing:
            build_backend(spec.backend.model_copy(update={"base_url": None}))
        texts.append(str(missing.value))
        monkeypatch.setenv(ENV, KEY)

    # The key was really used: the server saw it on every request.
    assert server_fn.seen_keys == {KEY}
    assert summary.rows == 30 and summary.ok > 0 and summary.errors > 0
    # Where it could leak: the store (database, WAL and shared-memory files).
    db_files = [p for p in tmp_path.iterdir() if p.name.startswith("store.db")]
    assert db_files
    for p in db_files:
        assert not _leaks(p.read_bytes()), p.name
    for p in _files(tmp_path / "report"):
        assert not _leaks(p.read_bytes()), p.name
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)
    assert caplog.records, "the DEBUG logs were captured"
    assert not _leaks(logged), [r.getMessage() for r in caplog.records if _leaks(r.getMessage())][:3]
    captured = capsys.readouterr()
    assert not _leaks(captured.out) and not _leaks(captured.err)
    for t in texts:
        assert not _leaks(t), t[:300]


def test_the_cli_prints_and_stores_no_key(tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text(
        "".join(json.dumps({"instruction": f"Question {i}?", "response": f"answer {i}"}) + "\n" for i in range(12)),
        encoding="utf-8",
    )
    server_fn = EchoingServer()
    env = {**os.environ, ENV: KEY}
    with LoopbackServer(server_fn) as server:
        common = [sys.executable, "-m", "judgegraph.jobs.cli"]
        ev = subprocess.run(
            [
                *common,
                "eval",
                str(src),
                "--kind",
                "pointwise",
                "--model",
                "judge",
                "--base-url",
                server.url + "/v1",
                "--api-key-env",
                ENV,
                "--no-structured",
                "--max-attempts",
                "2",
                "--store",
                str(tmp_path / "s.db"),
                "--run-id",
                "cli",
                "--no-progress",
            ],
            env=env,
            capture_output=True,
        )
        rep = subprocess.run(
            [*common, "report", "cli", "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "rep")],
            env=env,
            capture_output=True,
        )
    assert ev.returncode == 1, ev.stderr.decode()[-2000:]  # rows failed (the 401s): exit 1
    assert rep.returncode == 0, rep.stderr.decode()[-2000:]
    assert server_fn.seen_keys == {KEY}
    assert b"401" in ev.stderr  # the unauthorised items are listed, with the server's (scrubbed) text
    for blob in (ev.stdout, ev.stderr, rep.stdout, rep.stderr):
        assert not _leaks(blob), blob.decode()[-500:]
    for p in [*_files(tmp_path / "rep"), *(q for q in tmp_path.iterdir() if q.name.startswith("s.db"))]:
        assert not _leaks(p.read_bytes()), p
