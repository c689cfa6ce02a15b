"""A rerun reports the run's state, not only what it did itself (issue 26).

The example: a run whose 20 rows all errored exits 1; the same command again
found them "already done" and exited 0 with ``"errors": 0``, while the store
held 20 errors, so a CI retry read success. The class: whatever the first run
left (ok, unparsed, error per item) and whatever the rerun does (nothing,
rejudge the failures against a fixed or a still broken server), the summary's
counts are the store's counts for the run, and it fails exactly when the
store holds a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import PointwiseJudge, ScriptedBackend
from judgegraph.backends import BackendError, GenerateRequest
from judgegraph.jobs import SourceConfig, Store, arun_job
from judgegraph.testing import Fault, LoopbackServer


def _items(path: Path, n: int) -> Path:
    path.write_text(
        "".join(json.dumps({"instruction": f"Question {i}?", "response": f"answer {i}"}) + "\n" for i in range(n)),
        encoding="utf-8",
    )
    return path


def test_a_rerun_of_a_failed_run_still_fails(tmp_path: Path) -> None:
    src = _items(tmp_path / "in.jsonl", 20)
    store = tmp_path / "s.db"
    env = {**os.environ, "JG_KEY": "x", "RAY_USAGE_STATS_ENABLED": "0"}
    with LoopbackServer(lambda req: Fault("status", 400, message="bad request")) as server:
        args = [sys.executable, "-m", "judgegraph", "eval", str(src), "--kind", "pointwise", "--model", "judge"]
        args += ["--base-url", server.url + "/v1", "--api-key-env", "JG_KEY", "--no-structured"]
        args += ["--store", str(store), "--run-id", "r", "--no-progress"]
        first = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        again = subprocess.run([*args, "--json"], env=env, capture_output=True, text=True, timeout=300)
        plain = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 1, first.stderr[-1500:]
    assert again.returncode == 1, (again.stdout[-800:], again.stderr[-800:])
    summary = json.loads(again.stdout)
    assert (summary["judged"], summary["cached"], summary["errors"], summary["ok"]) == (0, 20, 20, 0)
    # The summary is the command's result (stdout); the failed rows are diagnostics (stderr).
    assert plain.returncode == 1 and "error 20" in plain.stdout, (plain.stdout[-800:], plain.stderr[-800:])
    assert "error 20" not in plain.stderr and "20 of 20 rows failed" in plain.stderr


_OUTCOME = st.sampled_from(["ok", "unparsed", "error"])


@given(
    first=st.lists(_OUTCOME, min_size=1, max_size=8),
    second=st.lists(_OUTCOME, min_size=8, max_size=8),
    rerun_failed=st.booleans(),
)
@settings(max_examples=40)
def test_a_reruns_counts_are_the_stores(first: list[str], second: list[str], rerun_failed: bool) -> None:
    def server(outcomes: list[str]) -> ScriptedBackend:
        def answer(req: GenerateRequest) -> str:
            text = "\n".join(m.content for m in req.messages)
            i = int(text[text.index("Question ") + 9 :].split("?")[0])
            if outcomes[i] == "error":
                raise BackendError("HTTP 400 from judge: bad request")
            return "Fine. [RESULT] 4" if outcomes[i] == "ok" else "no verdict here"

        return ScriptedBackend(answer)

    with tempfile.TemporaryDirectory() as tmp:
        src = _items(Path(tmp) / "in.jsonl", len(first))
        db = Path(tmp) / "s.db"

        async def run(outcomes: list[str], rerun: bool) -> object:
            judge = PointwiseJudge(server(outcomes), repair=False)
            return await arun_job(
                SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=db, run_id="r", rerun_failed=rerun
            )

        asyncio.run(run(first, False))
        summary = asyncio.run(run(second, rerun_failed))
        with Store(db) as st_:
            counts = st_.counts("r")
    assert (summary.ok, summary.unparsed, summary.errors) == (counts["ok"], counts["unparsed"], counts["error"])  # type: ignore[attr-defined]
    failed_now = summary.unparsed + summary.errors  # type: ignore[attr-defined]
    assert (failed_now > 0) == (counts["unparsed"] + counts["error"] > 0)
