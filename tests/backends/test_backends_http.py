"""OpenAI and TGI backends against real loopback HTTP servers speaking those protocols."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from judgegraph import OpenAIBackend, PairwiseJudge, PointwiseJudge, RetryPolicy, Status
from judgegraph.backends import TGIBackend
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import Pricing

pytest.importorskip("openai")
pytest.importorskip("huggingface_hub")

# Short backoffs, and a per-request timeout that must never fire here (a loopback
# answer on a starved machine can take seconds): only the timeout test sets a short one.
FAST = RetryPolicy(max_attempts=3, initial_delay_s=0.01, max_delay_s=0.05, timeout_s=60.0)
ITEM = {"instruction": "What is 2+2?", "response": "4"}
KEY = "sk-test-DO-NOT-LEAK-0123456789"

BackendFactory = Callable[[LoopbackServer], Any]

BACKENDS: dict[str, BackendFactory] = {
    "openai": lambda s: OpenAIBackend("judge-model", base_url=s.url + "/v1", api_key=KEY, retry=FAST),
    "tgi-chat": lambda s: TGIBackend(s.url, mode="chat", token=KEY, retry=FAST),
    "tgi-generate": lambda s: TGIBackend(s.url, mode="generate", token=KEY, retry=FAST),
}


@pytest.fixture(params=list(BACKENDS))
def make_backend(request: pytest.FixtureRequest) -> BackendFactory:
    return BACKENDS[request.param]


def scripted(*replies: Reply | Fault) -> Callable[[LoopbackRequest], Reply | Fault]:
    it = iter(replies)
    last = replies[-1]
    return lambda req: next(it, last)


async def test_score_and_distribution_from_logprobs(make_backend: BackendFactory) -> None:
    reply = Reply("Correct and brief. [RESULT] 4", token_probs={"4": 0.7, "5": 0.2, "3": 0.1})
    with LoopbackServer(scripted(reply)) as server:
        backend = make_backend(server)
        result = await PointwiseJudge(backend, structured=False).ajudge(ITEM)
    assert result.status is Status.OK
    assert result.score == 4
    assert result.distribution == pytest.approx({3: 0.1, 4: 0.7, 5: 0.2})
    assert result.confidence == pytest.approx(0.7)
    assert result.expected_score == pytest.approx(3 * 0.1 + 4 * 0.7 + 5 * 0.2)
    assert result.rationale == "Correct and brief."
    assert result.provenance is not None and result.provenance.attempts == 1


async def test_structured_output_is_requested_and_parsed(make_backend: BackendFactory) -> None:
    seen: list[dict[str, Any]] = []

    def respond(req: LoopbackRequest) -> Reply:
        seen.append(req.body)
        return Reply('{"feedback": "solid", "score": 5}')

    with LoopbackServer(respond) as server:
        result = await PointwiseJudge(make_backend(server)).ajudge(ITEM)
    assert result.status is Status.OK and result.score == 5 and result.rationale == "solid"
    body = seen[0]
    if "parameters" in body:  # TGI generate: grammar
        grammar = body["parameters"]["grammar"]
        assert grammar["type"] == "json"
        assert grammar["value"]["properties"]["score"] == {"type": "integer", "minimum": 1, "maximum": 5}
    else:
        fmt = body["response_format"]
        schema = fmt.get("json_schema", {}).get("schema") or fmt.get("value")
        assert schema["required"] == ["feedback", "score"]


@pytest.mark.timing  # waits out a retry-after, checks the wait's lower bound
async def test_429_retry_after_is_honoured_then_succeeds(make_backend: BackendFactory) -> None:
    replies = scripted(Fault("status", 429, retry_after=0.2), Reply("ok [RESULT] 3"))
    with LoopbackServer(replies) as server:
        backend = make_backend(server)
        result = await PointwiseJudge(backend, structured=False).ajudge(ITEM)
        calls = sum(server.calls.values())
    assert result.status is Status.OK and result.score == 3
    assert calls == 2
    assert result.provenance is not None and result.provenance.attempts == 2
    # retry-after (0.2 s) beat the 0.01 s backoff: the wait shows in wall time.
    assert result.provenance.latency_s >= 0.2  # timing-lint: a lower bound the server's wait sets; slowness only adds


@pytest.mark.parametrize(
    "fault", [Fault("status", 500), Fault("reset"), Fault("garbage")], ids=["500", "reset", "garbage"]
)
async def test_transient_faults_are_retried(make_backend: BackendFactory, fault: Fault) -> None:
    with LoopbackServer(scripted(fault, Reply("fine [RESULT] 2"))) as server:
        result = await PointwiseJudge(make_backend(server), structured=False).ajudge(ITEM)
    assert result.status is Status.OK and result.score == 2
    assert result.provenance is not None and result.provenance.attempts == 2


async def test_persistent_failure_is_an_error_result_with_bounded_attempts(make_backend: BackendFactory) -> None:
    with LoopbackServer(scripted(Fault("status", 503))) as server:
        result = await PointwiseJudge(make_backend(server), structured=False).ajudge(ITEM)
        calls = sum(server.calls.values())
    assert result.status is Status.ERROR
    assert result.score is None
    assert "gave up after 3 attempts" in (result.reason or "")
    assert calls == FAST.max_attempts
    assert KEY not in (result.reason or "")


@pytest.mark.timing  # a sub-second timeout that must fire
async def test_timeout_is_an_error_not_a_hang(make_backend: BackendFactory) -> None:
    policy = RetryPolicy(max_attempts=2, initial_delay_s=0.01, timeout_s=0.3)
    # The hang outlasts any machine (the server's stop ends it): the 0.3 s timeout always fires first.
    with LoopbackServer(scripted(Fault("hang", delay_s=3600))) as server:
        backend = make_backend(server)
        backend.retry = policy
        result = await PointwiseJudge(backend, structured=False).ajudge(ITEM)
    assert result.status is Status.ERROR
    assert "timed out" in (result.reason or "")
    assert result.provenance is not None and result.provenance.attempts == 2


async def test_client_error_is_not_retried(make_backend: BackendFactory) -> None:
    with LoopbackServer(scripted(Fault("status", 400))) as server:
        result = await PointwiseJudge(make_backend(server), structured=False).ajudge(ITEM)
        calls = sum(server.calls.values())
    assert result.status is Status.ERROR and "400" in (result.reason or "")
    assert calls == 1
    assert KEY not in (result.reason or "")


async def test_truncated_output_is_unparsed_after_one_repair(make_backend: BackendFactory) -> None:
    cut = Reply("The answer is correct but the expla", finish_reason="length")
    with LoopbackServer(scripted(cut)) as server:
        result = await PointwiseJudge(make_backend(server), structured=False).ajudge(ITEM)
        calls = sum(server.calls.values())
    assert result.status is Status.UNPARSED
    assert result.score is None
    assert "cut off at max_tokens" in (result.reason or "")
    assert result.raw_text == "The answer is correct but the expla"
    assert calls == 2  # the output, then exactly one repair request


async def test_repair_request_recovers_a_bad_format() -> None:
    replies = scripted(Reply("Score: 4 out of 5"), Reply("Sorry.\n[RESULT] 4"))
    seen: list[LoopbackRequest] = []

    def respond(req: LoopbackRequest) -> Reply | Fault:
        seen.append(req)
        return replies(req)

    with LoopbackServer(respond) as server:
        backend = BACKENDS["openai"](server)
        result = await PointwiseJudge(backend, structured=False).ajudge(ITEM)
    assert result.status is Status.OK and result.score == 4
    repair = seen[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": "Score: 4 out of 5"}
    assert "no [RESULT] marker" in repair[-1]["content"]


async def test_usage_and_cost_are_recorded() -> None:
    pricing = Pricing(input_per_mtok=2.5, output_per_mtok=10.0)
    with LoopbackServer(scripted(Reply("A is right. [SCORES] 9 3", prompt_tokens=100))) as server:
        backend = OpenAIBackend("m", base_url=server.url + "/v1", api_key=KEY, retry=FAST, pricing=pricing)
        verdict = await PairwiseJudge(backend, structured=False).ajudge(
            {"instruction": "q", "response_a": "good", "response_b": "bad"}
        )
    assert verdict.provenance is not None
    usage = verdict.provenance.usage
    # Two orders, each 100 prompt tokens and the reply's tokens.
    assert usage.prompt_tokens == 200
    assert usage.completion_tokens > 0
    assert verdict.provenance.cost_usd == pytest.approx((200 * 2.5 + usage.completion_tokens * 10.0) / 1e6)


@pytest.mark.timing  # 40 requests at once, each under a timeout
async def test_concurrent_requests_share_one_backend() -> None:
    counter = itertools.count()

    def respond(req: LoopbackRequest) -> Reply:
        next(counter)
        return Reply("fine [RESULT] 5")

    with LoopbackServer(respond, latency_s=0.05) as server:
        backend = BACKENDS["openai"](server)
        items = [{"instruction": f"q{i}", "response": "r"} for i in range(40)]
        results = await PointwiseJudge(backend, structured=False).ajudge_many(items, max_concurrency=40)
    assert [getattr(r, "score", None) for r in results] == [5] * 40
    assert next(counter) == 40


async def test_tgi_chat_for_vllm_sends_model_and_vllm_schema_form() -> None:
    seen: list[dict[str, Any]] = []

    def respond(req: LoopbackRequest) -> Reply:
        seen.append(req.body)
        return Reply('{"feedback": "ok", "score": 4}')

    with LoopbackServer(respond) as server:
        backend = TGIBackend(server.url, mode="chat", model="judge-7b", engine="vllm", retry=FAST)
        result = await PointwiseJudge(backend).ajudge(ITEM)
    assert result.score == 4
    body = seen[0]
    assert body["model"] == "judge-7b"  # vLLM and SGLang route by the served name
    assert body["structured_outputs"]["json"]["required"] == ["feedback", "score"]
    assert "response_format" not in body
