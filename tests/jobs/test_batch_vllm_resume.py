"""The local vLLM batch engine's process states, kill -9 and resume.

A stand-in *interpreter* plays vLLM here (the real run_batch on the tiny
model is tests/backends/test_vllm_batch.py): it takes the very command the
engine runs (``python -m vllm.entrypoints.openai.run_batch -i IN -o OUT ...``),
answers every request line, and can be held, released or made to die. It
records each start, which is what "never started twice" is checked against.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _waiting import POLL_S, await_until, wait_until

pytest.importorskip("openai")

from judgegraph.jobs import BackendConfig, BatchOptions, JobSpec, JudgeConfig, SourceConfig, Store, arun_spec
from judgegraph.jobs._batch_vllm import VLLMBatchClient, VLLMBatchError, work_dir_for

# Reads the control folder $JG_STANDIN: "mode" is answer, hold (until "release" exists),
# die (SIGKILL itself before writing anything) or die-once (die on the first start only).
STAND_IN = r"""
import json, os, signal, sys, time
ctl = os.environ["JG_STANDIN"]
args = sys.argv[1:]
assert args[:2] == ["-m", "vllm.entrypoints.openai.run_batch"], args
inp, out = args[args.index("-i") + 1], args[args.index("-o") + 1]
served = args[args.index("--served-model-name") + 1]
# A model folder may hold the score it gives (default 4): two folders answer differently.
score_file = os.path.join(args[args.index("--model") + 1], "score")
score = open(score_file).read().strip() if os.path.exists(score_file) else "4"
mode = open(os.path.join(ctl, "mode")).read().strip()  # read before the start is recorded
with open(os.path.join(ctl, "starts"), "a") as f:
    f.write("%d %s\n" % (os.getpid(), " ".join(args[2:])))
n = sum(1 for _ in open(os.path.join(ctl, "starts")))
if mode == "die" or (mode == "die-once" and n == 1):
    os.kill(os.getpid(), signal.SIGKILL)
while mode == "hold" and not os.path.exists(os.path.join(ctl, "release")):
    time.sleep(0.02)
lines = []
for line in open(inp):
    req = json.loads(line)
    assert req["body"]["model"] == served
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": served,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Fine. [RESULT] " + score}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}}
    lines.append(json.dumps({"id": "b", "custom_id": req["custom_id"], "error": None,
                             "response": {"status_code": 200, "request_id": "r", "body": body}}))
open(out, "w").write("\n".join(lines) + "\n")
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Callable[[str], None]]:
    """(interpreter, model folder, set_mode)."""
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    py = tmp_path / "vllm-python"
    # `python -c CHECK` (the engine's check that vllm imports) succeeds; `-m run_batch` runs the stand-in.
    py.write_text(f'#!/bin/sh\n[ "$1" = "-c" ] && exit 0\nexec {sys.executable} {tmp_path / "stand_in.py"} "$@"\n')
    py.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setenv("JG_STANDIN", str(ctl))

    def set_mode(mode: str) -> None:
        (ctl / "mode").write_text(mode)

    set_mode("answer")
    return py, model, set_mode


def _items(path: Path, n: int = 4) -> Path:
    path.write_text(
        "".join(json.dumps({"instruction": f"question {i}", "response": f"answer {i}"}) + "\n" for i in range(n))
    )
    return path


def _starts(tmp_path: Path) -> int:
    f = tmp_path / "ctl" / "starts"
    return len(f.read_text().splitlines()) if f.exists() else 0


def _spec(src: Path) -> JobSpec:
    return JobSpec(
        source=SourceConfig(path=str(src)),
        judge=JudgeConfig(kind="pointwise", structured=False, repair=False, max_tokens=16),
        backend=BackendConfig(model="tiny", structured_output=False),
    )


def _options(py: Path, model: Path) -> BatchOptions:
    return BatchOptions(engine="vllm", vllm_python=str(py), vllm_model=str(model), poll_initial_s=0.02, poll_max_s=0.05)


def _states(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT state FROM batches ORDER BY created_at")]
    finally:
        con.close()


def _polled(db: Path) -> float:
    """When a job last wrote a batch's state (every poll does, after its pump)."""
    con = sqlite3.connect(db)
    try:
        return float(con.execute("SELECT max(updated_at) FROM batches").fetchone()[0])
    finally:
        con.close()


def _batch_dirs(db: Path) -> list[Path]:
    return sorted((work_dir_for(db) / "batches").glob("*/"))


@pytest.mark.timing  # kills a process, waits for run_batch
@pytest.mark.parametrize("finish", ["before the rerun", "during the rerun"])
def test_kill9_then_rerun_adopts_the_running_batch_and_starts_nothing_twice(
    tmp_path: Path, stand_in: tuple[Path, Path, Callable[[str], None]], finish: str
) -> None:
    py, model, set_mode = stand_in
    set_mode("hold")
    src, db = _items(tmp_path / "items.jsonl"), tmp_path / "s.db"
    cmd = [
        sys.executable, "-m", "judgegraph.jobs.cli", "eval", str(src), "--kind", "pointwise", "--no-structured",
        "--store", str(db), "--run-id", "r", "--batch-engine", "vllm", "--vllm-model", str(model),
        "--vllm-python", str(py), "--poll-interval", "0.02", "--no-progress", "--json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # no key, no server: none is needed
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(
        lambda: _starts(tmp_path) == 1 and any((d / "pid").exists() for d in _batch_dirs(db)), "run_batch ran", proc=job
    )
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    (batch,) = _batch_dirs(db)
    launcher = int((batch / "pid").read_text().split()[0])
    os.kill(launcher, 0)  # run_batch outlived the job that started it
    if finish == "before the rerun":
        (tmp_path / "ctl" / "release").touch()
        wait_until(lambda: (batch / "exit").exists(), "run_batch finished")
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    else:
        before = _polled(db)
        rerun = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The rerun polls the batch it found in progress (each poll pumps first, so a
        # second start would have happened by then) and writes its state to the store.
        wait_until(lambda: _polled(db) != before, "the rerun polled the batch", proc=rerun)
        assert rerun.poll() is None and _starts(tmp_path) == 1
        (tmp_path / "ctl" / "release").touch()
        out, err = rerun.communicate()
        done = subprocess.CompletedProcess(cmd, rerun.returncode, out, err)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["resumed"] is True and summary["ok"] == 4 and summary["engine"] == "batch"
    again = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and json.loads(again.stdout)["cached"] == 4
    assert _starts(tmp_path) == 1 and len(_batch_dirs(db)) == 1 and _states(db) == ["completed"]
    with Store(db) as st:
        rows = list(st.rows("r"))
    assert [(r.status, r.result["score"] if r.result else None) for r in rows] == [("ok", 4)] * 4


@pytest.mark.timing  # kills run_batch mid-run
async def test_dead_run_batch_with_no_output_fails_and_is_resubmitted_once(
    tmp_path: Path, stand_in: tuple[Path, Path, Callable[[str], None]]
) -> None:
    """Launcher and run_batch both killed mid-run (no exit status, no output):
    the batch is failed, its requests go into one new batch, which answers."""
    import asyncio

    py, model, set_mode = stand_in
    set_mode("hold")
    src, db = _items(tmp_path / "items.jsonl"), tmp_path / "s.db"
    job = asyncio.create_task(
        arun_spec(_spec(src), store=db, run_id="r", batch_api=True, batch_options=_options(py, model))
    )
    await await_until(
        lambda: job.done() or (_starts(tmp_path) == 1 and any((d / "pid").exists() for d in _batch_dirs(db))),
        "run_batch ran",
    )
    assert not job.done(), job.result()
    set_mode("answer")  # for the resubmission; the first run_batch holds
    (batch,) = _batch_dirs(db)
    os.killpg(int((batch / "pid").read_text().split()[0]), signal.SIGKILL)
    s = await job
    assert (s.ok, s.errors) == (4, 0)
    assert _starts(tmp_path) == 2 and _states(db) == ["failed", "completed"]
    assert not (batch / "exit").exists() and not (batch / "output.jsonl").exists()


@pytest.mark.parametrize("mode", ["die", "die-once"])
async def test_run_batch_that_dies_is_an_error_per_item_after_one_resubmission(
    tmp_path: Path, stand_in: tuple[Path, Path, Callable[[str], None]], mode: str
) -> None:
    py, model, set_mode = stand_in
    set_mode(mode)
    src, db = _items(tmp_path / "items.jsonl"), tmp_path / "s.db"
    s = await arun_spec(_spec(src), store=db, run_id="r", batch_api=True, batch_options=_options(py, model))
    assert _starts(tmp_path) == 2  # the first and one resubmission (max_resubmits=1), never more
    if mode == "die-once":
        assert (s.ok, s.errors) == (4, 0) and _states(db) == ["failed", "completed"]
        return
    assert (s.ok, s.errors) == (0, 4) and _states(db) == ["failed", "failed"]
    with Store(db) as st:
        for r in st.rows("r"):
            assert r.status == "error" and r.reason is not None
            assert "run_batch exited with status -9" in r.reason and "log " in r.reason


def test_options_name_what_is_wrong(tmp_path: Path, stand_in: tuple[Path, Path, Callable[[str], None]]) -> None:
    import asyncio

    py, model, _ = stand_in
    src = _items(tmp_path / "items.jsonl")
    with pytest.raises(ValueError, match="needs vllm_model"):
        BatchOptions(engine="vllm")
    with pytest.raises(ValueError, match="only apply to engine 'vllm'"):
        BatchOptions(vllm_model=str(model))
    cases = [
        (tmp_path / "no-such-python", model, "vllm_python .--vllm-python.: no executable interpreter"),
        (Path(sys.executable), model, "vllm_python .--vllm-python.: .* cannot import vllm"),  # ours has no vllm
        (py, tmp_path / "no-model", "vllm_model .--vllm-model.: no model folder"),
        (py, tmp_path, "vllm_model .--vllm-model.: .* has no config.json"),
    ]
    for python, folder, message in cases:
        opts = BatchOptions(engine="vllm", vllm_python=str(python), vllm_model=str(folder))
        with pytest.raises(VLLMBatchError, match=message):
            asyncio.run(arun_spec(_spec(src), store=tmp_path / "s.db", batch_api=True, batch_options=opts))
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened
    cmd = [
        sys.executable,
        "-m",
        "judgegraph.jobs.cli",
        "eval",
        str(src),
        "--kind",
        "pointwise",
        "--store",
        str(tmp_path / "c.db"),
    ]
    done = subprocess.run([*cmd, "--batch-engine", "vllm"], capture_output=True, text=True)
    assert done.returncode == 2 and "--vllm-model" in done.stderr, done.stderr
    done = subprocess.run(
        [*cmd, "--batch-engine", "vllm", "--vllm-model", str(tmp_path / "none"), "--vllm-python", str(py)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "vllm_model (--vllm-model): no model folder" in done.stderr, done.stderr


@pytest.mark.timing  # two run_batch processes, waited for
async def test_queued_batches_start_one_at_a_time_and_once_across_clients(
    tmp_path: Path, stand_in: tuple[Path, Path, Callable[[str], None]]
) -> None:
    """Two batches, one process slot: the second waits queued; a rerun's client
    lists both by their keys, and however many clients poll, each starts once."""
    import asyncio

    py, model, set_mode = stand_in
    set_mode("hold")
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    line = json.dumps({"custom_id": "jg-1", "method": "POST", "url": "/v1/chat/completions", "body": body}) + "\n"
    first = VLLMBatchClient(tmp_path / "w", model=model, python=py)
    ids = []
    for key in ("k1", "k2"):
        f = await first.files.create(file=(f"{key}.jsonl", line.encode()), purpose="batch")
        b = await first.batches.create(
            input_file_id=f.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"judgegraph_key": key},
        )
        ids.append(b.id)
    wait_until(lambda: _starts(tmp_path) == 1, "the first run_batch")
    rerun = VLLMBatchClient(tmp_path / "w", model=model, python=py)

    async def listed() -> dict[str, str]:
        return {b.metadata["judgegraph_key"]: b.status async for b in rerun.batches.list()}

    # The stand-in counts its start before the launcher has written the pids
    # that make it in_progress (until then it is "validating", started): wait
    # for that event, with no deadline (a hang is pytest-timeout's to catch).
    while (seen := await listed())["k1"] != "in_progress":
        assert seen["k2"] == "validating", seen  # the second never starts while the first holds the slot
        await asyncio.sleep(POLL_S)
    assert seen == {"k1": "in_progress", "k2": "validating"}  # the second queued behind the first
    (tmp_path / "ctl" / "release").touch()
    done: dict[str, Any] = {}
    while len(done) < 2:  # no deadline: a hang is pytest-timeout's to catch
        for client in (first, rerun):  # both poll (and pump); the exclusive start keeps it to one each
            for bid in ids:
                b = await client.batches.retrieve(bid)
                assert b.status in ("validating", "in_progress", "completed"), b
                if b.status == "completed":
                    done[bid] = b
        await asyncio.sleep(0.02)
    assert _starts(tmp_path) == 2
    for b in done.values():
        out = json.loads((await rerun.files.content(b.output_file_id)).content)
        assert out["custom_id"] == "jg-1" and out["response"]["status_code"] == 200


def test_a_local_engine_has_no_provider_discount(
    tmp_path: Path, stand_in: tuple[Path, Path, Callable[[str], None]]
) -> None:
    from judgegraph.jobs._batch_cli import batch_options

    py, model, _ = stand_in
    assert BatchOptions().batch_discount == 0.5
    assert _options(py, model).batch_discount == 1.0  # the user's own prices, if any, as they are
    assert BatchOptions(engine="vllm", vllm_model=str(model), batch_discount=0.3).batch_discount == 0.3
    # A spec's options follow the engine the command line picks, unless the spec set a discount.
    spec = _spec(tmp_path / "x.jsonl").model_copy(update={"batch_api": _options(py, model)})
    assert batch_options(spec, {"engine": "provider"}).batch_discount == 0.5
    provider = spec.model_copy(update={"batch_api": BatchOptions(poll_initial_s=0.02)})
    assert batch_options(provider, {"engine": "vllm", "vllm_model": str(model)}).batch_discount == 1.0
    fixed = spec.model_copy(update={"batch_api": BatchOptions(batch_discount=0.4)})
    assert batch_options(fixed, {"engine": "vllm", "vllm_model": str(model)}).batch_discount == 0.4

    src = _items(tmp_path / "items.jsonl", 3)
    cmd = [
        sys.executable, "-m", "judgegraph.jobs.cli", "eval", str(src), "--kind", "pointwise",
        "--store", str(tmp_path / "s.db"), "--price-in", "2", "--price-out", "8", "--dry-run", "--json",
        "--batch-engine", "vllm", "--vllm-model", str(model), "--vllm-python", str(py),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    est = json.loads(done.stdout)
    assert est["items"] == 3 and est["live_cost_usd"] > 0
    assert est["batch_cost_usd"] == pytest.approx(est["live_cost_usd"])
    assert _starts(tmp_path) == 0  # a dry run starts no run_batch


async def test_python_api_keys_verdicts_by_the_model_folder(
    tmp_path: Path, stand_in: tuple[Path, Path, Callable[[str], None]]
) -> None:
    """arun_job with engine vllm: folder B's job judges again, with B's answers, not A's (issue 24)."""
    from judgegraph.backends import OpenAIBackend
    from judgegraph.jobs import arun_job
    from judgegraph.judges import PointwiseJudge

    py, model_a, _ = stand_in
    model_b = tmp_path / "model-b"
    model_b.mkdir()
    (model_b / "config.json").write_text("{}")
    (model_b / "score").write_text("2")
    source, db = SourceConfig(path=str(_items(tmp_path / "items.jsonl", 3))), tmp_path / "s.db"
    # Never called (run_batch answers); its URL goes nowhere.
    backend = OpenAIBackend("tiny", base_url="http://127.0.0.1:9/v1", api_key="unused", structured_output=False)
    judge = PointwiseJudge(backend, structured=False, repair=False, max_tokens=16)

    async def scores(model: Path) -> list[int]:
        summary = await arun_job(
            source, judge=judge, kind="pointwise", store=db, batch_api=True, batch_options=_options(py, model)
        )
        with Store(db) as st:
            return [r.result["score"] for r in st.rows(summary.run_id) if r.result is not None]

    assert await scores(model_a) == [4, 4, 4]
    assert await scores(model_b) == [2, 2, 2]
    assert _starts(tmp_path) == 2
    assert await scores(model_a) == [4, 4, 4]  # folder A's verdicts are still reused
    assert _starts(tmp_path) == 2
