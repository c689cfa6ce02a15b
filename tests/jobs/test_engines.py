"""One engine interface: the command line's options pick an engine, and each
engine runs the same spec into the same store as the function it stands for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgegraph.jobs import (
    BackendConfig,
    BatchEngine,
    BatchOptions,
    Engine,
    JobSpec,
    JudgeConfig,
    Limits,
    LocalEngine,
    RayEngine,
    SourceConfig,
    Store,
    engine_for,
)
from judgegraph.jobs._engines import ENGINES
from judgegraph.testing import LoopbackServer, Reply
from judgegraph.testing_batch import BatchAPI

# Starts a loopback server and polls a batch stand-in.
pytestmark = pytest.mark.timing

FAST = BatchOptions(poll_initial_s=0.01, poll_max_s=0.05)
OPTIONS = st.one_of(
    st.none(),
    st.builds(BatchOptions, poll_initial_s=st.floats(0.01, 10), batch_discount=st.floats(0.1, 1.0)),
    st.just(BatchOptions(engine="vllm", vllm_model="/models/judge")),
)


@given(
    name=st.one_of(st.sampled_from(ENGINES), st.text(max_size=8)),
    batch_api=st.booleans(),
    options=OPTIONS,
    actors=st.integers(1, 16),
    address=st.one_of(st.none(), st.just("ray://10.0.0.1:10001")),
)
def test_the_options_pick_one_engine(
    name: str, batch_api: bool, options: BatchOptions | None, actors: int, address: str | None
) -> None:
    if name not in ENGINES:
        with pytest.raises(ValueError, match="--engine must be local or ray"):
            engine_for(name, batch_api=batch_api, batch_options=options)
        return
    engine = engine_for(name, batch_api=batch_api, batch_options=options, ray_actors=actors, ray_address=address)
    assert isinstance(engine, Engine)
    if batch_api:  # a batch API takes the model calls whichever engine is named
        assert engine == BatchEngine(options)
        vllm = options is not None and options.engine == "vllm"
        assert engine.name == ("batch-vllm" if vllm else "batch-api")
    elif name == "ray":
        assert engine == RayEngine(actors=actors, address=address) and engine.name == "ray"
    else:
        assert engine == LocalEngine() and engine.name == "local"


def _spec(tmp_path: Path, url: str, n: int) -> JobSpec:
    src = tmp_path / "items.jsonl"
    src.write_text("".join(json.dumps({"q": f"question {i}", "a": f"answer {i}"}) + "\n" for i in range(n)))
    return JobSpec(
        source=SourceConfig(path=str(src), fields={"instruction": "q", "response": "a"}),
        judge=JudgeConfig(kind="pointwise"),
        backend=BackendConfig(model="judge-m", base_url=url + "/v1", structured_output=False, max_attempts=1),
        limits=Limits(concurrency=4),
    )


def test_local_then_batch_engine_on_one_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local engine judges live; the batch engine judges the same spec
    through the batch API without a live call, to the same verdicts; and
    either, run again on its store, judges nothing twice."""
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    with LoopbackServer(lambda req: Reply("Fine. [RESULT] 4")) as server:
        spec = _spec(tmp_path, server.url, 6)
        with Store(tmp_path / "live.db") as st_live:
            live = LocalEngine().run(spec, store=st_live, run_id="r")
            again = LocalEngine().run(spec, store=st_live, run_id="r")
        live_calls = server.calls["/v1/chat/completions"]
        BatchAPI.attach(server, complete_after_polls=1)
        with Store(tmp_path / "batch.db") as st_batch:
            batch = BatchEngine(FAST).run(spec, store=st_batch, run_id="r")
        assert server.calls["/v1/chat/completions"] == live_calls  # nothing went live
    assert (live.engine, live.ok, live.judged) == ("local", 6, 6)
    assert (again.judged, again.cached) == (0, 6)
    assert (batch.engine, batch.ok, batch.judged) == ("batch", 6, 6)
    with Store(tmp_path / "live.db") as a, Store(tmp_path / "batch.db") as b:
        scores = [{r.row: (r.result or {}).get("score") for r in s.rows("r")} for s in (a, b)]
    assert scores[0] == scores[1] == dict.fromkeys(range(6), 4)
