"""A job against a judge server that fails a share of its calls.

The loopback server fails about ``share`` of all calls, choosing among: 429
with retry-after, 500, 503, connection reset, a hang past the client's
timeout, a 200 whose body is not JSON, output cut off at max_tokens, and
output with no verdict. The checks (``check_faulty_run``) hold for any size:
every item is judged or recorded as failed with its reason, none is lost or
duplicated, each item's retries stay bounded, every request the server saw
is accounted for in the store, and the totals agree across the job summary,
the store and the report. ``bench/soak.py`` runs the same code on 5,000 items.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy
from judgegraph.backends import TGIBackend
from judgegraph.jobs import JobSummary, SourceConfig, Store, arun_job
from judgegraph.jobs._report import build_report
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

pytestmark = pytest.mark.timing

MAX_ATTEMPTS = 4
# Fast retries. A hang lasts until the server stops, so the per-attempt timeout
# is the only thing that ends it; the timeout is long enough that no answer the
# server does send, on however busy a machine, runs into it. So which calls fail
# follows from the seed alone, and so do the counts checked below.
RETRY = RetryPolicy(
    max_attempts=MAX_ATTEMPTS, initial_delay_s=0.02, max_delay_s=0.2, timeout_s=5.0, max_retry_after_s=1.0
)
FAULT_KINDS = ("429", "500", "503", "reset", "hang", "garbage", "cut-off", "no-verdict")
_ITEM = re.compile(r"item (\d+) of the fault run")


def expected_score(i: int) -> int:
    return i % 5 + 1


class FaultyJudge:
    """The responder: answers item i with score ``expected_score(i)``, except
    that about ``share`` of calls fail, each with a kind drawn from
    ``FAULT_KINDS``. The draw depends only on (seed, item, call number), so
    a run is reproducible. Counts every call per item."""

    def __init__(self, share: float, seed: int = 0) -> None:
        self.share = share
        self.seed = seed
        self.calls: Counter[int] = Counter()
        self.faults: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        m = _ITEM.search(req.prompt)
        assert m is not None, "every request names its item"
        i = int(m.group(1))
        with self._lock:
            self.calls[i] += 1
            n = self.calls[i]
        rng = random.Random(f"{self.seed}/{i}/{n}")
        if rng.random() >= self.share:
            return Reply(f"Judged item {i}. [RESULT] {expected_score(i)}")
        kind = rng.choice(FAULT_KINDS)
        with self._lock:
            self.faults[kind] += 1
        if kind == "429":
            return Fault("status", 429, retry_after=0.05)
        if kind in ("500", "503"):
            return Fault("status", int(kind))
        if kind == "reset":
            return Fault("reset")
        if kind == "hang":
            return Fault("hang", delay_s=3600.0)  # released when the server stops
        if kind == "garbage":
            return Fault("garbage")
        if kind == "cut-off":
            return Reply(f"Judged item {i}. The answer is", finish_reason="length")
        return Reply("I would rather not say.")


@dataclass
class FaultyRun:
    n: int
    share: float
    summary: JobSummary
    server: FaultyJudge
    rows: list[Any]
    attempts: dict[str, int]
    report_counts: dict[str, int]
    elapsed_s: float
    extra: dict[str, Any] = field(default_factory=dict)


def write_items(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as fp:
        for i in range(n):
            fp.write(json.dumps({"id": f"i{i}", "instruction": f"Rate item {i} of the fault run.", "response": "x"}))
            fp.write("\n")
    return path


def make_backend(kind: str, url: str) -> Any:
    if kind == "openai":
        return OpenAIBackend("judge", base_url=url + "/v1", api_key="k", retry=RETRY, max_connections=64)
    return TGIBackend(url, mode="chat", retry=RETRY)


async def run_faulty_job(
    tmp: Path, n: int, *, share: float = 0.2, backend: str = "openai", concurrency: int = 32, seed: int = 0
) -> FaultyRun:
    src = write_items(tmp / "items.jsonl", n)
    server = FaultyJudge(share, seed)
    loop = asyncio.get_running_loop()
    with LoopbackServer(server) as srv:
        started = loop.time()
        summary = await arun_job(
            SourceConfig(path=str(src), id="id"),
            judge=PointwiseJudge(structured=False, top_logprobs=0),
            kind="pointwise",
            store=tmp / "store.db",
            context={"backend": make_backend(backend, srv.url)},
            run_id="faults",
            concurrency=concurrency,
        )
        elapsed = loop.time() - started
    with Store(tmp / "store.db") as st:
        rows = list(st.rows("faults"))
        attempts = {r.item_hash: r.attempts for r in st.results(summary.config_hash)}
        report = build_report(st, "faults")
    return FaultyRun(n, share, summary, server, rows, attempts, dict(report.counts), elapsed)


def check_faulty_run(run: FaultyRun) -> None:
    s, n = run.summary, run.n
    # Every item accounted for, once: judged now, nothing cached, nothing invalid.
    assert (s.rows, s.judged, s.cached, s.invalid) == (n, n, 0, 0)
    assert s.ok + s.unparsed + s.errors == n
    assert [r.row for r in run.rows] == list(range(n)), "a row is missing or duplicated"
    assert len({r.item_hash for r in run.rows}) == n == len(run.attempts)
    assert set(run.server.calls) <= set(range(n))
    # Each verdict is the one the server gave that item: no cross-wiring under faults.
    failed = 0
    for r in run.rows:
        i = int(r.item_id[1:])
        if r.status == "ok":
            assert r.result is not None and r.result["score"] == expected_score(i), (i, r.result)
            assert r.reason is None
        else:
            failed += 1
            if i not in run.server.calls:  # no attempt got through to the server (timed out unread, refused)
                assert r.status == "error" and r.reason, (i, r.reason)
            assert r.status in ("error", "unparsed"), r.status
            assert r.reason, f"item {i} failed without a reason"
            assert r.result is not None and r.result.get("score") is None, "a failure carries no score"
    # Bounded retries: at most MAX_ATTEMPTS per request, and one repair request.
    worst = max(run.server.calls.values())
    assert worst <= 2 * MAX_ATTEMPTS, worst
    # Every request the server saw is counted in the store and the summary. The
    # client may count more: a request it gave up on before the server read it
    # is the client's alone. How many that is depends on speed, so it is not bounded.
    assert sum(run.attempts.values()) == s.requests >= sum(run.server.calls.values())
    # The totals agree: job summary, store, report.
    assert failed == s.unparsed + s.errors == s.problems_total
    assert run.report_counts["ok"] == s.ok
    assert run.report_counts["error"] == s.errors and run.report_counts["unparsed"] == s.unparsed
    assert run.report_counts["invalid"] == 0 and run.report_counts.get("pending", 0) == 0
    for p in s.problems:
        assert re.match(r"row \d+: (error|unparsed): \S", p), p


def fault_share_seen(run: FaultyRun) -> float:
    return sum(run.server.faults.values()) / sum(run.server.calls.values())


@pytest.mark.parametrize(("backend", "n"), [("openai", 600), ("tgi", 200)])
async def test_job_at_20_percent_failures_loses_and_duplicates_nothing(tmp_path: Path, backend: str, n: int) -> None:
    run = await run_faulty_job(tmp_path, n, share=0.2, backend=backend)
    check_faulty_run(run)
    # The faults did happen, all kinds of them, at about the share asked for.
    assert set(run.server.faults) == set(FAULT_KINDS)
    assert 0.15 < fault_share_seen(run) < 0.25
    # With four attempts and a repair round most items end up judged.
    assert run.summary.ok >= 0.95 * n


async def test_a_server_that_always_fails_gives_every_item_a_reason_and_bounded_calls(tmp_path: Path) -> None:
    run = await run_faulty_job(tmp_path, 40, share=1.0, concurrency=16)
    check_faulty_run(run)
    assert run.summary.ok == 0 and run.summary.errors + run.summary.unparsed == 40
    kinds = Counter(re.sub(r"^row \d+: ", "", p).split(":")[0] for p in run.summary.problems)
    assert set(kinds) <= {"error", "unparsed"}
