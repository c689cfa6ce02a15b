"""Jobs on the local engine against a loopback OpenAI server: outcomes by row,
resume without re-judging, --rerun-failed, bounded retries, rate limits, CLI."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from judgegraph import OpenAIBackend, ScriptedBackend
from judgegraph.jobs import (
    BackendConfig,
    JobSpec,
    JudgeConfig,
    Limits,
    RateLimitedBackend,
    RateLimiter,
    SourceConfig,
    Store,
    arun_job,
    arun_spec,
)
from judgegraph.jobs._spec import build_judge
from judgegraph.testing import Fault, LoopbackRequest, Reply
from judgegraph.types import Criterion, RetryPolicy, Rubric

ITEM = re.compile(r"item-(\d+)")


def _items(path: Path, n: int, *, bad: tuple[int, ...] = ()) -> Path:
    with path.open("w", encoding="utf-8") as fp:
        for i in range(n):
            rec: dict[str, Any] = {
                "prompt": f"item-{i:03d}: which answer is better?",
                "left": f"GOOD answer {i}" if i % 2 == 0 else f"BAD answer {i}",
                "right": f"BAD answer {i}" if i % 2 == 0 else f"GOOD answer {i}",
                "human": "A" if i % 2 == 0 else "B",
            }
            if i in bad:
                rec["right"] = ""
            fp.write(json.dumps(rec) + "\n")
    return path


class Judge:
    """Server-side judge: scores the GOOD answer 8 and the BAD one 3, in
    whichever order they are shown; counts requests per item."""

    def __init__(self, *, unparsed: set[int] = frozenset(), fail: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.unparsed = set(unparsed)
        self.fail = set(fail)
        self.per_item: Counter[int] = Counter()

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        text = req.prompt
        i = int(ITEM.search(text).group(1))  # type: ignore[union-attr]
        self.per_item[i] += 1
        if i in self.fail:
            return Fault("status", status=400)
        if i in self.unparsed:
            return Reply("I cannot decide.")
        first_good = text.index("GOOD") < text.index("BAD")
        return Reply("Reasons. [SCORES] 8 3" if first_good else "Reasons. [SCORES] 3 8", prompt_tokens=50)


def _spec(src: Path, url: str, **limits: Any) -> JobSpec:
    return JobSpec(
        source=SourceConfig(
            path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"}, label="human"
        ),
        judge=JudgeConfig(kind="pairwise"),
        backend=BackendConfig(
            model="judge-m",
            base_url=url + "/v1",
            structured_output=False,
            max_attempts=2,
            pricing={"input_per_mtok": 1.0, "output_per_mtok": 4.0},
        ),
        limits=Limits(concurrency=8, **limits),
    )


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

        judge.unparsed.clear()
        judge.fail.clear()
        before = dict(judge.per_item)
        fixed = await arun_spec(spec, store=tmp_path / "s.db", rerun_failed=True)
        changed = {i for i in judge.per_item if judge.per_item[i] != before.get(i)}
        assert changed == {4, 9}
        assert (fixed.judged, fixed.ok, fixed.cached) == (2, 2, 28)
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


async def test_pointwise_multiturn_and_rubric_jobs(tmp_path: Path) -> None:
    src = tmp_path / "conv.jsonl"
    src.write_text(
        "\n".join(
            json.dumps(
                {
                    "q": f"q{i}",
                    "a": f"a{i}",
                    "turns": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}],
                    "score": i % 5 + 1,
                }
            )
            for i in range(6)
        )
        + "\n"
    )
    backend = ScriptedBackend(lambda req: "Fine. [RESULT] 4")
    crit = [Criterion(name=n, rubric=Rubric(criterion=n, levels={1: "bad", 2: "ok", 3: "good"})) for n in ("x", "y")]
    outcomes = {}
    for kind, fields, extra in (
        ("pointwise", {"instruction": "q", "response": "a"}, {}),
        ("multiturn", {"messages": "turns"}, {}),
        ("rubric", {"instruction": "q", "response": "a"}, {"criteria": crit}),
    ):
        cfg = SourceConfig(path=str(src), fields=fields, label="score")
        judge = build_judge(JudgeConfig(kind=kind, **extra))  # type: ignore[arg-type]
        outcomes[kind] = await arun_job(
            cfg, judge=judge, kind=kind, store=tmp_path / "s.db", run_id=kind, context={"backend": backend}
        )
    assert outcomes["pointwise"].ok == outcomes["multiturn"].ok == 6
    # A rubric on a 1-3 scale cannot take a 4: unparsed, with the reason, never clamped.
    assert outcomes["rubric"].unparsed == 6
    with Store(tmp_path / "s.db") as st:
        row = next(iter(st.rows("pointwise")))
        assert row.result["score"] == 4 and row.label == 1.0
        rub = next(iter(st.rows("rubric")))
        assert rub.status == "unparsed" and "x:" in rub.reason and "y:" in rub.reason


def test_config_hash_tracks_the_judge_not_the_plumbing(tmp_path: Path) -> None:
    src = str(tmp_path / "x.jsonl")
    base = JobSpec(
        source=SourceConfig(path=src),
        judge=JudgeConfig(kind="pairwise"),
        backend=BackendConfig(model="m", base_url="http://a/v1"),
    )
    same = base.model_copy(
        update={
            "backend": BackendConfig(model="m", base_url="http://user:key@a/v1/", max_attempts=9),
            "limits": Limits(concurrency=3, rpm=5),
        }
    )
    other_model = base.model_copy(update={"backend": BackendConfig(model="m2", base_url="http://a/v1")})
    other_template = base.model_copy(update={"judge": JudgeConfig(kind="pairwise", template="pairwise-choice")})
    # Two servers serving the same model name may answer differently (issue 15).
    other_server = base.model_copy(update={"backend": BackendConfig(model="m", base_url="http://b/v1")})
    assert base.config_hash() == same.config_hash()
    hashes = {base.config_hash(), other_model.config_hash(), other_template.config_hash(), other_server.config_hash()}
    assert len(hashes) == 4


# ------------------------------------------------------------------ rate limits


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.now += s


async def test_rpm_spaces_requests_evenly() -> None:
    t = FakeTime()
    lim = RateLimiter(rpm=120, clock=t.clock, sleep=t.sleep)
    times = []
    for _ in range(6):
        await lim.acquire(1)
        times.append(round(t.now, 6))
    # A one-second burst (2 requests), then one every half second.
    assert times == [0.0, 0.0, 0.5, 1.0, 1.5, 2.0]


async def test_tpm_charges_estimates_then_settles_to_real_usage() -> None:
    t = FakeTime()
    lim = RateLimiter(tpm=600, clock=t.clock, sleep=t.sleep)  # 10 tokens/s, burst 10
    await lim.acquire(50)  # a full bucket lets a big request through, leaving a debt of 40
    assert t.now == 0.0
    await lim.acquire(10)  # waits until the level is back to 10: (10 + 40) / 10 s
    assert t.now == pytest.approx(5.0)
    lim.settle(estimated=10, actual=2)  # it used less: the difference comes back
    await lim.acquire(8)
    assert t.now == pytest.approx(5.0)


async def test_rate_limited_backend_is_transparent_and_charges_every_request() -> None:
    t = FakeTime()
    lim = RateLimiter(rpm=60, clock=t.clock, sleep=t.sleep)
    inner = ScriptedBackend(lambda req: "[SCORES] 7 2", model="mm")
    wrapped = RateLimitedBackend(inner, lim)
    assert (wrapped.name, wrapped.model) == ("scripted", "mm")
    from judgegraph import PairwiseJudge

    verdict = await PairwiseJudge(wrapped).ajudge({"instruction": "q", "response_a": "a", "response_b": "b"})
    assert verdict.ok and verdict.provenance is not None and verdict.provenance.backend == "scripted"
    assert len(inner.calls) == 2 and t.now == pytest.approx(1.0)  # two orders, one second apart at 60 rpm


async def test_rate_limited_job_gives_the_same_results(tmp_path: Path, loopback: Any) -> None:
    src = _items(tmp_path / "items.jsonl", 6)
    with loopback(Judge()) as server:
        plain = await arun_spec(_spec(src, server.url), store=tmp_path / "a.db", run_id="r")
        limited = await arun_spec(
            _spec(src, server.url, rpm=60_000, tpm=10_000_000), store=tmp_path / "b.db", run_id="r"
        )
    assert plain.config_hash == limited.config_hash
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        assert [(r.item_hash, r.result["winner"]) for r in a.rows("r")] == [
            (r.item_hash, r.result["winner"]) for r in b.rows("r")
        ]


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
        assert res.exit_code == 0, res.output
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


async def test_judge_taken_from_the_context_by_key(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl", 3)
    cfg = SourceConfig(path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"})
    judge = build_judge(JudgeConfig(kind="pairwise", template="pairwise-choice"))
    ctx = {"judge": judge, "backend": ScriptedBackend(lambda req: "[RESULT] TIE")}
    s = await arun_job(cfg, judge="judge", kind="pairwise", store=tmp_path / "s.db", context=ctx)
    assert s.ok == 3
    with pytest.raises(LookupError, match="'nope'"):
        await arun_job(cfg, judge="nope", kind="pairwise", store=tmp_path / "s.db", context=ctx)


async def test_budget_cascade_is_fed_whole_batches(tmp_path: Path) -> None:
    from judgegraph import PairwiseJudge
    from judgegraph.cascade import Budget, create_cascade_judge
    from judgegraph.types import SwapPolicy

    src = _items(tmp_path / "items.jsonl", 10)
    cfg = SourceConfig(path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"})
    single = SwapPolicy(mode="single")
    judge = create_cascade_judge(
        [
            PairwiseJudge("cheap", template="pairwise-choice", swap=single),
            PairwiseJudge("strong", template="pairwise-choice", swap=single),
        ],
        escalate=Budget(fraction=0.3),
    )
    ctx = {"cheap": ScriptedBackend(lambda r: "[RESULT] A"), "strong": ScriptedBackend(lambda r: "[RESULT] B")}
    s = await arun_job(cfg, judge=judge, kind="pairwise", store=tmp_path / "s.db", context=ctx, run_id="b")
    assert (s.ok, s.errors) == (10, 0)
    with Store(tmp_path / "s.db") as st:
        rows = list(st.rows("b"))
    escalated = [r.row for r in rows if not r.result["tiers"][0]["decided"]]
    assert len(escalated) == 3  # floor(0.3 x 10): the budget applies to the batch
    assert all(r.result["winner"] == ("B" if r.row in escalated else "A") for r in rows)


async def test_a_hanging_server_times_out_each_attempt_and_the_item_errors(tmp_path: Path, loopback: Any) -> None:
    src = _items(tmp_path / "items.jsonl", 3)

    def respond(req: LoopbackRequest) -> Reply | Fault:
        if "item-001" in req.prompt:
            return Fault("hang", delay_s=3.0)
        return Reply("[SCORES] 6 6")

    with loopback(respond) as server:
        backend = OpenAIBackend(
            "m",
            base_url=server.url + "/v1",
            api_key="x",
            structured_output=False,
            retry=RetryPolicy(max_attempts=2, initial_delay_s=0.01, timeout_s=0.3),
        )
        s = await arun_spec(_spec(src, server.url), store=tmp_path / "s.db", run_id="h", backend=backend)
    assert (s.ok, s.errors) == (2, 1)
    with Store(tmp_path / "s.db") as st:
        row = next(r for r in st.rows("h") if r.row == 1)
    assert row.status == "error" and "gave up after 2 attempts" in row.reason and "timed out" in row.reason
