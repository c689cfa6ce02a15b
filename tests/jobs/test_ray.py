"""The Ray Data engine stores the same results as the local engine, and each
engine resumes the other's run without re-judging."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judgegraph.jobs import BackendConfig, JobSpec, JudgeConfig, Limits, SourceConfig, Store, arun_spec
from judgegraph.testing import LoopbackRequest, Reply

# Starts a local Ray cluster (worker processes), and two actors race for repeated inputs
# (the claims actor decides, so the counts below are the protocol's, not the race's).
# A local Ray cluster starts a dozen worker processes: on a busy 2-core machine (CI's
# other worker beside it) one test took 588 s, so its hang limit is above the default.
pytestmark = [pytest.mark.timing, pytest.mark.timeout(1800)]

pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ITEM = re.compile(r"item-(\d+)")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def responder(req: LoopbackRequest) -> Reply:
    text = req.prompt
    i = int(ITEM.search(text).group(1))  # type: ignore[union-attr]
    if i % 11 == 5:
        return Reply("no verdict")
    first_good = text.index("GOOD") < text.index("BAD")
    return Reply(f"[SCORES] {6 + i % 3} 2" if first_good else f"[SCORES] 2 {6 + i % 3}")


def _strip(value: Any) -> Any:
    """A stored result without its timings, which differ run to run."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "latency_s"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _canonical(store: Path, run_id: str) -> list[tuple[Any, ...]]:
    with Store(store) as st:
        return [
            (
                r.file,
                r.row,
                r.item_hash,
                r.label,
                r.category,
                r.problem,
                r.status,
                r.reason,
                _strip(r.result),
                r.cost_usd,
                r.prompt_tokens,
                r.completion_tokens,
            )
            for r in st.rows(run_id, with_input=True)
        ]


def test_ray_engine_matches_local_engine(tmp_path: Path, loopback: Any, ray_local: None) -> None:
    from judgegraph.jobs._ray import run_spec_ray

    rows = []
    for i in range(90):
        good_first = i % 2 == 0
        rows.append(
            {
                "q": f"item-{i:03d}",
                "a": "GOOD x" if good_first else "BAD x",
                "b": "" if i == 17 else ("BAD x" if good_first else "GOOD x"),
                "pref": "A" if good_first else "B",
                "topic": ["t1", "t2", "t3"][i % 3],
            }
        )
    src = tmp_path / "items.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src, row_group_size=20)  # five shards
    with loopback(responder) as server:
        spec = JobSpec(
            source=SourceConfig(
                path=str(src),
                fields={"instruction": "q", "response_a": "a", "response_b": "b"},
                label="pref",
                category="topic",
            ),
            judge=JudgeConfig(kind="pairwise"),
            backend=BackendConfig(
                model="m",
                base_url=server.url + "/v1",
                structured_output=False,
                pricing={"input_per_mtok": 2.0, "output_per_mtok": 8.0},
            ),
            limits=Limits(concurrency=8),
        )
        local = asyncio.run(arun_spec(spec, store=tmp_path / "local.db", run_id="r"))
        calls = server.calls["/v1/chat/completions"]
        dist = run_spec_ray(spec, store=tmp_path / "ray.db", run_id="r", actors=2)
        assert server.calls["/v1/chat/completions"] == 2 * calls
        # The Ray engine resumes the local engine's finished run without paying again.
        again = run_spec_ray(spec, store=tmp_path / "local.db", run_id="r", actors=2)
        assert server.calls["/v1/chat/completions"] == 2 * calls
    assert (again.judged, again.cached, again.invalid) == (0, 89, 1)
    # Its counts are the run's, verdicts found in the store included, as the local engine's are.
    assert (again.ok, again.unparsed, again.errors) == (local.ok, local.unparsed, local.errors)

    assert local.config_hash == dist.config_hash
    for s in (local, dist):
        assert (s.rows, s.invalid, s.judged) == (90, 1, 89)
        assert s.unparsed == sum(1 for i in range(90) if i % 11 == 5 and i != 17)
    assert dist.cost_usd == pytest.approx(local.cost_usd)
    a, b = _canonical(tmp_path / "local.db", "r"), _canonical(tmp_path / "ray.db", "r")
    assert len(a) == 90
    assert a == b
    assert json.dumps(a[0][8], sort_keys=True) == json.dumps(b[0][8], sort_keys=True)


def test_ray_engine_judges_an_input_repeated_across_shards_once(tmp_path: Path, loopback: Any, ray_local: None) -> None:
    from judgegraph.jobs._ray import run_spec_ray

    # Rows 20-39 repeat rows 0-19; with one shard per 10 rows and a batch per
    # shard, the repeats reach both actors.
    rows = [
        {"q": f"item-{i % 20:03d}", "a": "GOOD x" if i % 2 else "BAD x", "b": "BAD x" if i % 2 else "GOOD x"}
        for i in range(40)
    ]
    src = tmp_path / "items.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src, row_group_size=10)
    with loopback(responder) as server:
        spec = JobSpec(
            source=SourceConfig(path=str(src), fields={"instruction": "q", "response_a": "a", "response_b": "b"}),
            judge=JudgeConfig(kind="pairwise"),
            backend=BackendConfig(model="m", base_url=server.url + "/v1", structured_output=False),
            limits=Limits(concurrency=8),
        )
        local = asyncio.run(arun_spec(spec, store=tmp_path / "local.db", run_id="r"))
        calls = server.calls["/v1/chat/completions"]
        dist = run_spec_ray(spec, store=tmp_path / "ray.db", run_id="r", actors=2, batch_size=10)
        assert server.calls["/v1/chat/completions"] == 2 * calls
    for s in (local, dist):
        assert (s.rows, s.judged, s.cached) == (40, 20, 20)
    assert _canonical(tmp_path / "local.db", "r") == _canonical(tmp_path / "ray.db", "r")
