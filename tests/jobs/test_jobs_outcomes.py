"""Jobs on the local engine against a loopback OpenAI server: outcomes by row, resume
without re-judging, --rerun-failed, bounded retries and timeouts, and the eval/report CLI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _loopback_job import ITEM, Judge, _items, _spec
from typer.testing import CliRunner

from judgegraph import OpenAIBackend
from judgegraph.jobs import Store, arun_spec
from judgegraph.testing import Fault, LoopbackRequest, Reply
from judgegraph.types import RetryPolicy


async def test_every_row_gets_an_outcome_and_failures_keep_their_reason(tmp_path: Path, loopback: Any) -> None:
    src = _items(tmp_path / "items.jsonl", 40, bad=(7,))
    judge = Judge(unparsed={3}, fail={5})
    with loopback(judge) as server:
        s = await arun_spec(_spec(src, server.url), store=tmp_path / "s.db", run_id="r1")
    assert (s.rows, s.ok, s.unparsed, s.errors, s.invalid, s.judged, s.cached) == (40, 37, 1, 1, 1, 39, 0)
    assert s.cost_usd > 0 and s.tokens > 0
    assert any(p.startswith("row 7:") and "response_b" in p for p in s.problems)
    assert any(p.startswith("row 5: error:") and "HTTP 400" in p for p in s.problems)
    with Store(tmp_path / "s.db") as st:
        rows = {r.row: r for r in st.rows("r1")}
        assert st.run("r1").state == "finished"
    assert len(rows) == 40
    assert rows[0].status == "ok" and rows[0].result["winner"] == "A" and rows[1].result["winner"] == "B"
    assert rows[0].label == "A"
    # No silent default: a failed row has a status and a reason, and no verdict.
    assert rows[3].status == "unparsed" and rows[3].result["winner"] is None and "[SCORES]" in rows[3].reason
    assert rows[5].status == "error" and rows[5].result["winner"] is None and "HTTP 400" in rows[5].reason
    assert rows[7].status is None and rows[7].item_hash is None and "missing response_b" in rows[7].problem
    # 400 is not retried; the unparsed item got one repair round per order.
    assert judge.per_item[5] == 2 and judge.per_item[3] == 4 and judge.per_item[0] == 2


async def test_resume_pays_for_nothing_done_and_rerun_failed_retries_only_failures(
    tmp_path: Path, loopback: Any
) -> None:
    src = _items(tmp_path / "items.jsonl", 30)
    judge = Judge(unparsed={4}, fail={9})
    with loopback(judge) as server:
        spec = _spec(src, server.url)
        first = await arun_spec(spec, store=tmp_path / "s.db")
        calls = server.calls["/v1/chat/completions"]
        again = await arun_spec(spec, store=tmp_path / "s.db")
        assert server.calls["/v1/chat/completions"] == calls  # nothing re-judged, failures included
        assert again.resumed and again.run_id == first.run_id
        assert (again.judged, again.cached) == (0, 30)
        assert (again.ok, again.unparsed, again.errors) == (28, 1, 1)  # the run's state: its failures still count

        judge.unparsed.clear()
        judge.fail.clear()
        before = dict(judge.per_item)
        fixed = await arun_spec(spec, store=tmp_path / "s.db", rerun_failed=True)
        changed = {i for i in judge.per_item if judge.per_item[i] != before.get(i)}
        assert changed == {4, 9}
        assert (fixed.judged, fixed.ok, fixed.cached) == (2, 30, 28)
    with Store(tmp_path / "s.db") as st:
        assert st.counts(first.run_id) == {"rows": 30, "ok": 30, "unparsed": 0, "error": 0, "invalid": 0, "pending": 0}
        assert st._db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 30


async def test_same_input_twice_is_judged_once(tmp_path: Path, loopback: Any) -> None:
    src = _items(tmp_path / "items.jsonl", 5)
    lines = src.read_text().splitlines()
    src.write_text("\n".join([*lines, lines[1], lines[1]]) + "\n")
    judge = Judge()
    with loopback(judge) as server:
        s = await arun_spec(_spec(src, server.url), store=tmp_path / "s.db", run_id="d")
    assert judge.per_item[1] == 2  # two orders, once
    assert (s.rows, s.judged, s.cached) == (7, 5, 2)
    with Store(tmp_path / "s.db") as st:
        rows = list(st.rows("d"))
    assert rows[5].item_hash == rows[6].item_hash == rows[1].item_hash and rows[6].status == "ok"


async def test_retries_are_bounded_and_recorded(tmp_path: Path, loopback: Any) -> None:
    src = _items(tmp_path / "items.jsonl", 4)
    flaky: Counter[int] = Counter()

    def respond(req: LoopbackRequest) -> Reply | Fault:
        i = int(ITEM.search(req.prompt).group(1))  # type: ignore[union-attr]
        flaky[i] += 1
        if i == 2:
            return Fault("status", status=503)
        if i == 1 and flaky[i] <= 2:
            return Fault("status", status=429, retry_after=0)  # both orders' first tries
        return Reply("[SCORES] 5 5")

    with loopback(respond) as server:
        backend = OpenAIBackend(
            "m",
            base_url=server.url + "/v1",
            api_key="x",
            structured_output=False,
            retry=RetryPolicy(max_attempts=3, initial_delay_s=0.01, jitter=False),
        )
        spec = _spec(src, server.url)
        s = await arun_spec(spec, store=tmp_path / "s.db", run_id="r", backend=backend)
    assert flaky[2] == 6  # 3 attempts x 2 orders, then it gives up
    assert flaky[1] == 4  # each order: one 429, then an answer
    with Store(tmp_path / "s.db") as st:
        rows = {r.row: r for r in st.rows("r")}
    assert rows[2].status == "error" and "gave up after 3 attempts" in rows[2].reason
    assert rows[1].status == "ok" and rows[1].result["provenance"]["attempts"] == 4
    assert s.errors == 1


@pytest.mark.timing  # a timeout that must fire for one item and not for the others
async def test_a_hanging_server_times_out_each_attempt_and_the_item_errors(tmp_path: Path, loopback: Any) -> None:
    src = _items(tmp_path / "items.jsonl", 3)

    def respond(req: LoopbackRequest) -> Reply | Fault:
        if "item-001" in req.prompt:
            return Fault("hang", delay_s=3600)  # outlasts any timeout; the server's stop ends it
        return Reply("[SCORES] 6 6")

    with loopback(respond) as server:
        backend = OpenAIBackend(
            "m",
            base_url=server.url + "/v1",
            api_key="x",
            structured_output=False,
            # Every request runs under this timeout: long enough that an answered one
            # never reaches it on a starved machine (two idle 5 s waits for the hung item).
            retry=RetryPolicy(max_attempts=2, initial_delay_s=0.01, timeout_s=5.0),
        )
        s = await arun_spec(_spec(src, server.url), store=tmp_path / "s.db", run_id="h", backend=backend)
    assert (s.ok, s.errors) == (2, 1)
    with Store(tmp_path / "s.db") as st:
        row = next(r for r in st.rows("h") if r.row == 1)
    assert row.status == "error" and "gave up after 2 attempts" in row.reason and "timed out" in row.reason


# ------------------------------------------------------------------ CLI


def test_cli_eval_then_report(tmp_path: Path, loopback: Any) -> None:
    from judgegraph.jobs.cli import app

    src = _items(tmp_path / "items.jsonl", 12, bad=(2,))
    runner = CliRunner()
    with loopback(Judge(unparsed={4})) as server:
        args = [
            "eval",
            str(src),
            "--model",
            "m",
            "--base-url",
            server.url + "/v1",
            "--no-structured",
            "--map",
            "instruction=prompt",
            "--map",
            "response_a=left",
            "--map",
            "response_b=right",
            "--label",
            "human",
            "--store",
            str(tmp_path / "s.db"),
            "--run-id",
            "cli",
            "--no-progress",
            "--json",
        ]
        res = runner.invoke(app, args)
        assert res.exit_code == 1, res.output  # one row unparsed, one invalid: a failed row is a failed job
        summary = json.loads(res.stdout[res.stdout.index("{") :])
        assert (summary["rows"], summary["ok"], summary["unparsed"], summary["invalid"]) == (12, 10, 1, 1)
        bad = runner.invoke(app, ["eval", str(src), "--model", "m", "--base-url", server.url, "--map", "oops"])
        assert bad.exit_code != 0 and "FIELD=VALUE" in bad.output
    rep = runner.invoke(app, ["report", "cli", "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "rep")])
    assert rep.exit_code == 0, rep.output
    data = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert data["counts"]["ok"] == 10 and data["n_labeled"] == 11
    assert (tmp_path / "rep" / "report.html").stat().st_size > 1000
    missing = runner.invoke(app, ["report", "nope", "--store", str(tmp_path / "s.db")])
    assert missing.exit_code != 0 and "no run 'nope'" in missing.output
    no_file = runner.invoke(
        app,
        [
            "eval",
            str(tmp_path / "absent.jsonl"),
            "--model",
            "m",
            "--base-url",
            "http://x/v1",
            "--store",
            str(tmp_path / "s.db"),
            "--no-progress",
        ],
    )
    assert no_file.exit_code == 2 and "no such file" in no_file.output
    bad_kind = runner.invoke(app, ["eval", str(src), "--model", "m", "--kind", "triplewise", "--no-progress"])
    assert bad_kind.exit_code == 2 and "judge.kind" in bad_kind.output
