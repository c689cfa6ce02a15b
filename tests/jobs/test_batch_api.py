"""Offline jobs through the OpenAI Batch API, against the loopback server's
Files and Batches endpoints: the same verdicts as live calls, per-item
failures, resumption after SIGKILL without a batch created twice."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _waiting import wait_until

from judgegraph.jobs import (
    BackendConfig,
    BatchOptions,
    JobProgress,
    JobSpec,
    JudgeConfig,
    Limits,
    SourceConfig,
    Store,
    arun_spec,
)
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply
from judgegraph.testing_batch import BatchAPI
from judgegraph.types import Pricing

ITEM = re.compile(r"item-(\d+)")
FAST = BatchOptions(poll_initial_s=0.01, poll_max_s=0.05)


def _items(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as fp:
        for i in range(n):
            good_first = i % 3 != 1
            rec = {
                "prompt": f"item-{i:03d}: which answer is better?",
                "left": f"GOOD answer {i}" if good_first else f"BAD answer {i}",
                "right": f"BAD answer {i}" if good_first else f"GOOD answer {i}",
            }
            fp.write(json.dumps(rec) + "\n")
    return path


class Judge:
    """Scores GOOD 8 and BAD 3; item 4 always prefers the first answer shown
    (inconsistent across orders); item 5's first answer cannot be read (a
    repair follows); item 6 is refused with HTTP 400."""

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        text = req.prompt
        i = int(ITEM.search(text).group(1))  # type: ignore[union-attr]
        if i == 6:
            return Fault("status", status=400, message="content policy")
        if i == 4:
            return Reply("Reasons. [SCORES] 7 4", prompt_tokens=40)
        if i == 5 and not any(m["role"] == "assistant" for m in req.body["messages"]):
            return Reply("I cannot decide.")
        first_good = text.index("GOOD") < text.index("BAD")
        return Reply("Reasons. [SCORES] 8 3" if first_good else "Reasons. [SCORES] 3 8", prompt_tokens=40)


def _spec(src: Path, url: str) -> JobSpec:
    return JobSpec(
        source=SourceConfig(
            path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"}
        ),
        judge=JudgeConfig(kind="pairwise"),
        backend=BackendConfig(
            model="judge-m",
            base_url=url + "/v1",
            structured_output=False,
            max_attempts=1,
            pricing=Pricing(input_per_mtok=1.0, output_per_mtok=4.0),
        ),
        limits=Limits(concurrency=4),
    )


def _verdicts(db: Path, run_id: str) -> dict[int, tuple[Any, ...]]:
    with Store(db) as st:
        rows = list(st.rows(run_id))
    assert all(r.result is not None for r in rows)
    return {
        r.row: (
            r.status,
            r.result["winner"],
            r.result["inconsistent"],
            r.result["score_a"],
            r.result["score_b"],
            r.reason,
        )
        for r in rows
        if r.result is not None
    }


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")


async def test_batch_verdicts_equal_live_verdicts(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 9)
    with LoopbackServer(Judge()) as server:
        live = await arun_spec(_spec(src, server.url), store=tmp_path / "live.db", run_id="r")
        live_calls = server.calls["/v1/chat/completions"]
        api = BatchAPI.attach(server, complete_after_polls=1)
        opts = FAST.model_copy(update={"max_requests_per_file": 8})
        batch = await arun_spec(
            _spec(src, server.url), store=tmp_path / "batch.db", run_id="r", batch_api=True, batch_options=opts
        )
        assert server.calls["/v1/chat/completions"] == live_calls  # nothing went live
    lv, bv = _verdicts(tmp_path / "live.db", "r"), _verdicts(tmp_path / "batch.db", "r")
    assert len(lv) == 9
    # Identical verdicts (the reason of the refused item names its route).
    assert {k: v[:5] for k, v in bv.items()} == {k: v[:5] for k, v in lv.items()}
    assert bv[0][:2] == ("ok", "A") and bv[1][:2] == ("ok", "B") and bv[4][2] is True and bv[5][:2] == ("ok", "A")
    assert bv[6][0] == "error" and bv[6][1] is None and "HTTP 400" in bv[6][5] and "content policy" in bv[6][5]
    assert (batch.ok, batch.errors) == (live.ok, live.errors) and batch.engine == "batch"
    # 18 first-round requests split 8/8/2, then one follow-up with item 5's two repairs,
    # then item 6's two refused requests resubmitted once.
    assert api.batches_created == 5
    assert max(api.billed.values()) == 1 and api.requests_billed == 18
    # Billed at half the live price.
    assert batch.cost_usd == pytest.approx(live.cost_usd * 0.5)
    con = sqlite3.connect(tmp_path / "batch.db")
    states = [r[0] for r in con.execute("SELECT state FROM batches")]
    con.close()
    assert states == ["completed"] * 5


async def test_repairs_sent_live_settle_in_one_round_at_the_live_price(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 9)
    with LoopbackServer(Judge()) as server:
        live = await arun_spec(_spec(src, server.url), store=tmp_path / "live.db", run_id="r")
        live_calls = server.calls["/v1/chat/completions"]
        api = BatchAPI.attach(server, complete_after_polls=1)
        opts = FAST.model_copy(update={"max_requests_per_file": 8, "repairs": "live"})
        batch = await arun_spec(
            _spec(src, server.url), store=tmp_path / "batch.db", run_id="r", batch_api=True, batch_options=opts
        )
        sent_live = server.calls["/v1/chat/completions"] - live_calls
    assert sent_live == 2  # item 5's two repairs, and nothing else
    lv, bv = _verdicts(tmp_path / "live.db", "r"), _verdicts(tmp_path / "batch.db", "r")
    assert {k: v[:5] for k, v in bv.items()} == {k: v[:5] for k, v in lv.items()}
    # 18 first-round requests split 8/8/2, then item 6's refused pair resubmitted: no follow-up batch.
    assert api.batches_created == 4 and api.requests_billed == 16  # the 2 repairs were not batch-billed
    # The repairs are billed at the live price, the rest at half of it.
    assert live.cost_usd is not None and batch.cost_usd is not None
    assert live.cost_usd * 0.5 < batch.cost_usd < live.cost_usd


@pytest.mark.parametrize("fault", ["fail", "expire"])
async def test_failed_or_expired_batch_is_an_error_per_item(tmp_path: Path, fault: str) -> None:
    src = _items(tmp_path / "items.jsonl", 4)
    with LoopbackServer(Judge()) as server:
        # Every batch fails (or expires): the first and its one resubmission.
        api = BatchAPI.attach(server, **{fault: range(1, 100)})  # type: ignore[arg-type]
        s = await arun_spec(
            _spec(src, server.url), store=tmp_path / "s.db", run_id="r", batch_api=True, batch_options=FAST
        )
    assert s.rows == 4 and s.errors == 4 and s.ok == 0
    assert api.batches_created == 2 and api.requests_billed == 0
    word = "failed" if fault == "fail" else "expired"
    for status, winner, *_, reason in _verdicts(tmp_path / "s.db", "r").values():
        assert status == "error" and winner is None and word in reason


async def test_slow_finalisation_is_waited_for(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 4)
    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server, complete_after_polls=1, finalize_polls=3)
        seen: list[tuple[dict[str, int], dict[str, int]]] = []

        def progress(p: JobProgress) -> None:
            if p.batches and (not seen or seen[-1] != (p.batches, p.batch_requests)):
                seen.append((dict(p.batches), dict(p.batch_requests)))

        s = await arun_spec(
            _spec(src, server.url),
            store=tmp_path / "s.db",
            run_id="r",
            batch_api=True,
            batch_options=FAST,
            progress=progress,
        )
    assert s.ok == 4 and s.errors == 0
    # The progress callback saw the batch move through every state, with its 8 requests.
    states = ["validating", "in_progress", "finalizing", "completed"]
    assert seen == [({st: 1}, {st: 8}) for st in states]
    # One batch, polled through in_progress, three polls of finalizing, then completed; nothing resubmitted.
    assert api.batches_created == 1 and api.requests_billed == 8
    assert [b.polls for b in api.batches.values()] == [5]


@pytest.mark.parametrize("broken", ["json", "custom_id"])
@pytest.mark.parametrize("persistent", [False, True])
async def test_malformed_output_line_resubmits_that_request_only(tmp_path: Path, broken: str, persistent: bool) -> None:
    """Item 2's output lines are unreadable (cut-off JSON, or no custom_id): its
    requests go into a follow-up batch; the other items are stored from the first."""
    src = _items(tmp_path / "items.jsonl", 4)
    spoiled: set[str] = set()

    def malformed(cid: str, body: dict[str, Any]) -> str | None:
        if "item-002" not in json.dumps(body) or (cid in spoiled and not persistent):
            return None
        spoiled.add(cid)
        return broken

    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server, malformed=malformed)  # type: ignore[arg-type]
        s = await arun_spec(
            _spec(src, server.url), store=tmp_path / "s.db", run_id="r", batch_api=True, batch_options=FAST
        )
    v = _verdicts(tmp_path / "s.db", "r")
    assert all(v[i][0] == "ok" for i in (0, 1, 3))
    assert api.batches_created == 2  # the first, and item 2's two requests again (max_resubmits=1)
    assert len(spoiled) == 2 and all(api.billed[c] == 2 for c in spoiled)  # the provider bills unreadable lines
    assert api.requests_billed == 10
    if persistent:
        assert (s.ok, s.errors) == (3, 1)
        assert v[2][0] == "error" and "output line" in v[2][5] and "unreadable" in v[2][5]
    else:
        assert s.ok == 4 and v[2][:2] == ("ok", "A")


async def test_spec_asks_for_the_batch_api(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 3)
    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server)
        spec = _spec(src, server.url).model_copy(update={"batch_api": FAST})
        s = await arun_spec(spec, store=tmp_path / "s.db", run_id="r")  # the spec's batch_api is honoured
        assert s.engine == "batch" and s.ok == 3 and api.batches_created == 1
        assert server.calls["/v1/chat/completions"] == 0
        live = await arun_spec(spec, store=tmp_path / "live.db", run_id="r", batch_api=False)  # the caller overrides
        assert live.engine == "local" and server.calls["/v1/chat/completions"] == 6 and api.batches_created == 1


def test_cli_spec_batch_api_and_the_flag_that_overrides_it(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 2)
    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server)
        spec = _spec(src, server.url).model_dump(mode="json")
        spec["batch_api"] = {"poll_initial_s": 0.01, "poll_max_s": 0.05, "batch_discount": 0.4}
        path = tmp_path / "job.json"
        path.write_text(json.dumps(spec))
        base = [sys.executable, "-m", "judgegraph.jobs.cli", "eval", "--spec", str(path), "--json"]
        done = subprocess.run(
            [*base, "--store", str(tmp_path / "a.db")],
            env={**os.environ, "COLUMNS": "200"},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout)["engine"] == "batch" and api.batches_created == 1
        assert server.calls["/v1/chat/completions"] == 0
        # The progress display has a bar per batch state, with its batch and request counts.
        assert "batches completed" in done.stderr and "1/1" in done.stderr and "4 requests" in done.stderr
        cmd = [*base, "--store", str(tmp_path / "b.db"), "--no-batch-api"]
        done = subprocess.run(cmd, env=dict(os.environ), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout)["engine"] == "local" and server.calls["/v1/chat/completions"] == 4
        assert api.batches_created == 1
        dry = subprocess.run(
            [*base, "--store", str(tmp_path / "c.db"), "--dry-run"],
            env=dict(os.environ),
            capture_output=True,
            text=True,
        )
        assert dry.returncode == 0, dry.stderr[-2000:]
        est = json.loads(dry.stdout)
        assert est["batch_cost_usd"] == pytest.approx(est["live_cost_usd"] * 0.4)  # the spec's discount


@pytest.mark.timing  # kills a process mid-poll
def test_sigkill_during_polling_then_resume_creates_no_batch_twice(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 4)
    db = tmp_path / "s.db"
    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server, complete_after_polls=10_000)  # held in progress until released
        cmd = [
            sys.executable, "-m", "judgegraph.jobs.cli", "eval", str(src), "--kind", "pairwise",
            "--map", "instruction=prompt", "--map", "response_a=left", "--map", "response_b=right",
            "--model", "judge-m", "--base-url", server.url + "/v1", "--no-structured", "--store", str(db),
            "--run-id", "crash", "--batch-api", "--poll-interval", "0.02", "--no-progress", "--json",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: api.polls >= 3, "the batch job polled three times", proc=proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert api.batches_created == 1 and api.requests_billed == 0
        api.complete_after_polls = 0  # the provider finishes while nobody watches
        done = subprocess.run(cmd, env=dict(os.environ), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads(done.stdout)
        # A third run finds everything stored and sends nothing.
        again = subprocess.run(cmd, env=dict(os.environ), capture_output=True, text=True)
        assert again.returncode == 0, again.stderr[-2000:]
    assert summary["resumed"] is True and summary["ok"] == 4
    assert json.loads(again.stdout)["cached"] == 4
    assert api.batches_created == 1 and max(api.billed.values()) == 1 and api.requests_billed == 8
    assert server.calls["/v1/chat/completions"] == 0


def test_dry_run_prices_without_sending(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 3)
    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server)
        cmd = [
            sys.executable, "-m", "judgegraph.jobs.cli", "eval", str(src), "--kind", "pairwise",
            "--map", "instruction=prompt", "--map", "response_a=left", "--map", "response_b=right",
            "--model", "judge-m", "--base-url", server.url + "/v1", "--no-structured", "--store",
            str(tmp_path / "s.db"), "--price-in", "2", "--price-out", "8", "--batch-api", "--dry-run", "--json",
        ]  # fmt: skip
        done = subprocess.run(cmd, env=dict(os.environ), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    est = json.loads(done.stdout)
    assert est["items"] == 3 and est["requests"] == 6 and est["prompt_tokens"] > 0
    assert est["batch_cost_usd"] == pytest.approx(est["live_cost_usd"] * 0.5)
    assert api.batches_created == 0 and not api.files and server.calls["/v1/chat/completions"] == 0
