"""A cascade under the batch API: the local tier runs live, once per request;
only the escalated items' requests go into batches for the strong tier, and
the stored verdicts equal a live run's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_batch_api import FAST, Judge, _items, _verdicts

from judgegraph import OpenAIBackend, PairwiseJudge, RetryPolicy, ScriptedBackend
from judgegraph.backends import GenerateRequest
from judgegraph.cascade import Budget, ScoreMargin, SwapInconsistency, Tier, create_cascade_judge
from judgegraph.jobs import SourceConfig, aestimate_batch_job, arun_job
from judgegraph.testing import LoopbackServer
from judgegraph.testing_batch import BatchAPI
from judgegraph.types import Pricing

ITEM = re.compile(r"item-(\d+)")
ESCALATED = {1, 5, 6, 7}  # the local tier's two orders disagree on these


def _local(calls: list[int]) -> ScriptedBackend:
    """Right on every item except ESCALATED, where it prefers whichever answer is shown first."""

    def reply(req: GenerateRequest) -> str:
        text = req.messages[-1].content
        i = int(ITEM.search(text).group(1))  # type: ignore[union-attr]
        calls.append(i)
        if i in ESCALATED:
            return "Reasons. [SCORES] 6 5"
        first_good = text.index("GOOD") < text.index("BAD")
        return "Reasons. [SCORES] 9 2" if first_good else "Reasons. [SCORES] 2 9"

    return ScriptedBackend(reply, model="local-m", pricing=Pricing(input_per_mtok=0.0, output_per_mtok=0.0))


def _cascade(url: str, calls: list[int]) -> Any:
    strong = OpenAIBackend(
        "judge-m",
        base_url=url + "/v1",
        api_key="k",
        structured_output=False,
        retry=RetryPolicy(max_attempts=1),
        pricing=Pricing(input_per_mtok=1.0, output_per_mtok=4.0),
    )
    return create_cascade_judge(
        [PairwiseJudge(_local(calls), name="local"), PairwiseJudge(strong, name="strong")],
        escalate=SwapInconsistency(),
    )


SOURCE_FIELDS = {"instruction": "prompt", "response_a": "left", "response_b": "right"}


def _tiers(db: Path) -> dict[int, list[str]]:
    from judgegraph.jobs import Store

    with Store(db) as st:
        return {
            r.row: [t["judge"] for t in r.result["tiers"]] for r in st.rows("r") if r.result and "tiers" in r.result
        }


def _inputs(api: BatchAPI) -> list[dict[str, Any]]:
    """The request lines of every batch input file the server received."""
    recs = [json.loads(line) for data in api.files.values() for line in data.splitlines() if line.strip()]
    return [r for r in recs if "body" in r and "method" in r]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")


async def test_cascade_batches_only_escalated_items_and_matches_live(tmp_path: Path) -> None:
    src = SourceConfig(path=str(_items(tmp_path / "items.jsonl", 10)), fields=SOURCE_FIELDS)
    with LoopbackServer(Judge()) as server:
        live_local: list[int] = []
        live = await arun_job(
            src, judge=_cascade(server.url, live_local), kind="pairwise", store=tmp_path / "live.db", run_id="r"
        )
        live_calls = server.calls["/v1/chat/completions"]
        assert live_calls == 2 * len(ESCALATED) + 2  # both orders per escalated item, item 5's two repairs

        api = BatchAPI.attach(server, complete_after_polls=1)
        local: list[int] = []
        batch = await arun_job(
            src,
            judge=_cascade(server.url, local),
            kind="pairwise",
            store=tmp_path / "batch.db",
            run_id="r",
            batch_api=True,
            batch_options=FAST,
        )
        assert server.calls["/v1/chat/completions"] == live_calls  # nothing went live to the strong tier
    # The server saw batch requests for the escalated items only.
    inputs = _inputs(api)
    asked = {int(ITEM.findall(json.dumps(r["body"]["messages"]))[0]) for r in inputs}
    assert asked == ESCALATED
    # Both orders per escalated item and item 5's two repairs; item 6's refused pair is resubmitted once.
    assert len({r["custom_id"] for r in inputs}) == 2 * len(ESCALATED) + 2 and len(inputs) == 2 * len(ESCALATED) + 4
    assert all(r["body"]["model"] == "judge-m" for r in inputs)
    # The local tier ran live, each request once, although escalated items were judged in several rounds.
    assert sorted(local) == sorted(live_local) == sorted([i for i in range(10) for _ in range(2)])
    # Same verdicts, same deciding tiers, as the live run.
    lv, bv = _verdicts(tmp_path / "live.db", "r"), _verdicts(tmp_path / "batch.db", "r")
    assert {k: v[:5] for k, v in bv.items()} == {k: v[:5] for k, v in lv.items()}
    assert _tiers(tmp_path / "batch.db") == _tiers(tmp_path / "live.db")
    assert _tiers(tmp_path / "batch.db")[0] == ["local"] and _tiers(tmp_path / "batch.db")[1] == ["local", "strong"]
    assert bv[6][0] == "error" and "HTTP 400" in bv[6][5]
    assert (batch.ok, batch.errors) == (live.ok, live.errors)
    # The strong tier billed at batch price; the local tier is free.
    assert batch.cost_usd == pytest.approx(live.cost_usd * 0.5)
    assert max(api.billed.values()) == 1


async def test_dry_run_of_a_cascade_counts_every_item_escalated(tmp_path: Path) -> None:
    src = SourceConfig(path=str(_items(tmp_path / "items.jsonl", 4)), fields=SOURCE_FIELDS)
    with LoopbackServer(Judge()) as server:
        local: list[int] = []
        est = await aestimate_batch_job(src, judge=_cascade(server.url, local), kind="pairwise")
        assert server.calls["/v1/chat/completions"] == 0
    assert local == []  # the local tier is not run in a dry run
    assert (
        est.items == 4
        and est.requests == 8
        and est.live_cost_usd
        and est.batch_cost_usd == pytest.approx(est.live_cost_usd * 0.5)
    )


async def test_models_option_picks_the_batched_tier(tmp_path: Path) -> None:
    """BatchOptions(models=...) names the batched backends, e.g. when both tiers are OpenAI-compatible
    servers and only one of them is a provider with a batch API."""
    src = SourceConfig(path=str(_items(tmp_path / "items.jsonl", 3)), fields=SOURCE_FIELDS)
    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server)
        cheap = OpenAIBackend("cheap-m", base_url=server.url + "/v1", api_key="k", structured_output=False)
        strong = OpenAIBackend("judge-m", base_url=server.url + "/v1", api_key="k", structured_output=False)
        cascade = create_cascade_judge(
            [PairwiseJudge(cheap, name="cheap"), PairwiseJudge(strong, name="strong")],
            escalate=ScoreMargin(min_margin=100),  # every item goes up
        )
        s = await arun_job(
            src,
            judge=cascade,
            kind="pairwise",
            store=tmp_path / "s.db",
            run_id="r",
            batch_api=True,
            batch_options=FAST.model_copy(update={"models": ("judge-m",)}),
        )
    assert s.ok == 3
    assert server.calls["/v1/chat/completions"] == 6  # the cheap tier live, both orders
    assert {r["body"]["model"] for r in _inputs(api)} == {"judge-m"}


async def test_budget_policy_is_refused(tmp_path: Path) -> None:
    src = SourceConfig(path=str(_items(tmp_path / "items.jsonl", 2)), fields=SOURCE_FIELDS)
    cascade = create_cascade_judge(
        [Tier(PairwiseJudge(_local([]), name="local"), (Budget(fraction=0.5),)), PairwiseJudge(_local([]), name="s")]
    )
    with pytest.raises(ValueError, match="budget policy"):
        await arun_job(src, judge=cascade, kind="pairwise", store=tmp_path / "s.db", batch_api=True)


_CASCADE_JOB = """
import asyncio, json, re, sys
from judgegraph import OpenAIBackend, PairwiseJudge, RetryPolicy, ScriptedBackend
from judgegraph.types import Pricing
from judgegraph.cascade import SwapInconsistency, create_cascade_judge
from judgegraph.jobs import BatchOptions, SourceConfig, arun_job

url, src, db = sys.argv[1:4]
def reply(req):
    text = req.messages[-1].content
    i = int(re.search(r"item-(\\d+)", text).group(1))
    if i % 2:
        return "Reasons. [SCORES] 6 5"  # inconsistent across orders: escalated
    return "Reasons. [SCORES] 9 2" if text.index("GOOD") < text.index("BAD") else "Reasons. [SCORES] 2 9"
local = ScriptedBackend(reply, model="local-m")
strong = OpenAIBackend("judge-m", base_url=url + "/v1", api_key="k", structured_output=False,
                       retry=RetryPolicy(max_attempts=1), pricing=Pricing(input_per_mtok=1.0, output_per_mtok=4.0))
cascade = create_cascade_judge([PairwiseJudge(local, name="local"), PairwiseJudge(strong, name="strong")],
                               escalate=SwapInconsistency())
s = asyncio.run(arun_job(SourceConfig(path=src, fields={"instruction": "prompt", "response_a": "left",
                         "response_b": "right"}), judge=cascade, kind="pairwise", store=db, run_id="crash",
                         batch_api=True, batch_options=BatchOptions(poll_initial_s=0.02, poll_max_s=0.05)))
print(s.model_dump_json())
"""


@pytest.mark.timing  # kills a process mid-poll
def test_cascade_sigkill_during_polling_then_resume_bills_nothing_twice(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from _waiting import wait_until

    src = _items(tmp_path / "items.jsonl", 4)  # items 1 and 3 escalate
    script = tmp_path / "job.py"
    script.write_text(_CASCADE_JOB)
    db = tmp_path / "s.db"
    with LoopbackServer(Judge()) as server:
        api = BatchAPI.attach(server, complete_after_polls=10_000)  # held in progress until released
        cmd = [sys.executable, str(script), server.url, str(src), str(db)]
        env = {**os.environ, "OPENAI_API_KEY": "not-a-real-key"}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: api.polls >= 3, "the batch job polled three times", proc=proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert api.batches_created == 1 and api.requests_billed == 0
        api.complete_after_polls = 0
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    # The local tier's own verdicts (items 0 and 2) were stored before the kill; the rerun judged
    # only the two escalated items, escalated them again and adopted the batch in flight.
    assert (summary["cached"], summary["judged"], summary["ok"], summary["errors"], summary["resumed"]) == (
        2,
        2,
        4,
        0,
        True,
    )
    assert api.batches_created == 1 and api.requests_billed == 4 and max(api.billed.values()) == 1
    assert server.calls["/v1/chat/completions"] == 0
