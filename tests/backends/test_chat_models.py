"""LangChain chat models as judge models: the real ChatOpenAI and ChatAnthropic
clients against loopback servers on 127.0.0.1 that speak their protocols."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from judgegraph import PairwiseJudge, PointwiseJudge, from_context
from judgegraph.backends import ChatModelBackend, OpenAIBackend
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import Pricing, RetryPolicy, Status

langchain_openai = pytest.importorskip("langchain_openai")
ITEM = {"instruction": "What is 2+2?", "response": "4."}
FAST = RetryPolicy(max_attempts=3, initial_delay_s=0.0, jitter=False)
VERDICT = '{"feedback": "Correct and brief.", "score": 4}'


def scripted(*outs: Reply | Fault) -> tuple[Callable[[LoopbackRequest], Reply | Fault], list[LoopbackRequest]]:
    seen: list[LoopbackRequest] = []

    def responder(req: LoopbackRequest) -> Reply | Fault:
        seen.append(req)
        return outs[min(len(seen), len(outs)) - 1]

    return responder, seen


def chat_openai(server: LoopbackServer, model: str = "gpt-4o-mini", **options: object) -> object:
    return langchain_openai.ChatOpenAI(model=model, api_key="sk-test", base_url=server.url + "/v1", **options)


async def test_chat_openai_structured_output_logprobs_usage_and_price() -> None:
    responder, seen = scripted(Reply(VERDICT, token_probs={"4": 0.6, "5": 0.3, "3": 0.1}, prompt_tokens=120))
    with LoopbackServer(responder) as server:
        backend = ChatModelBackend(chat_openai(server), pricing=Pricing(input_per_mtok=1.0, output_per_mtok=4.0))
        score = await PointwiseJudge(backend).ajudge(ITEM)
    assert score.status is Status.OK and score.score == 4
    body = seen[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["feedback", "score"]
    assert body["logprobs"] is True and body["top_logprobs"] == 10
    assert body["temperature"] == 0.0 and body["max_completion_tokens"] == 512
    # Logprobs read from response_metadata make a distribution and a confidence.
    assert score.distribution == pytest.approx({4: 0.6, 5: 0.3, 3: 0.1})
    assert score.confidence == pytest.approx(0.6)
    usage = score.provenance.usage
    assert usage.prompt_tokens == 120 and usage.completion_tokens > 0
    assert score.provenance.cost_usd == pytest.approx((120 * 1.0 + usage.completion_tokens * 4.0) / 1e6)
    assert score.provenance.backend == "langchain" and score.provenance.model == "gpt-4o-mini"


async def test_chat_model_given_directly_or_found_in_context() -> None:
    responder, seen = scripted(Reply(VERDICT))
    with LoopbackServer(responder) as server:
        model = chat_openai(server)
        direct = await PointwiseJudge(model).ajudge(ITEM)  # type: ignore[arg-type]
        looked_up = await PointwiseJudge(from_context("llm")).ajudge(ITEM, context={"llm": model})
        pairwise = await PairwiseJudge(from_context("llm")).ajudge(
            {"instruction": "Say hi.", "response_a": "Hi!", "response_b": "Go away."}, context={"llm": model}
        )
    assert direct.status is Status.OK and looked_up.status is Status.OK
    assert pairwise.status in (Status.OK, Status.UNPARSED)  # the scripted reply is a pointwise verdict
    assert len(seen) >= 3


async def test_init_chat_model_spec_through_from_spec() -> None:
    pytest.importorskip("langchain")
    responder, seen = scripted(Reply(VERDICT))
    with LoopbackServer(responder) as server:
        backend = ChatModelBackend.from_spec(
            "openai:gpt-4.1-mini", model_options={"base_url": server.url + "/v1", "api_key": "sk-test"}
        )
        score = await PointwiseJudge(backend).ajudge(ITEM)
    assert score.status is Status.OK and seen[0].body["model"] == "gpt-4.1-mini"


async def test_one_retry_policy_429_and_500_retried_not_stacked() -> None:
    responder, seen = scripted(Fault("status", status=429, retry_after=0), Fault("status", status=500), Reply(VERDICT))
    with LoopbackServer(responder) as server:
        score = await PointwiseJudge(ChatModelBackend(chat_openai(server), retry=FAST)).ajudge(ITEM)
    assert score.status is Status.OK and score.provenance.attempts == 3 and len(seen) == 3

    # All 500s: our 3 attempts and no more (ChatOpenAI alone would retry each twice).
    responder, seen = scripted(Fault("status", status=500))
    with LoopbackServer(responder) as server:
        score = await PointwiseJudge(ChatModelBackend(chat_openai(server, max_retries=5), retry=FAST)).ajudge(ITEM)
    assert score.status is Status.ERROR and "gave up after 3 attempts" in (score.reason or "")
    assert len(seen) == 3


@pytest.mark.timing  # a sub-second timeout that must fire
async def test_4xx_is_not_retried_and_timeout_is_per_call() -> None:
    responder, seen = scripted(Fault("status", status=400, message="bad schema"))
    with LoopbackServer(responder) as server:
        score = await PointwiseJudge(ChatModelBackend(chat_openai(server), retry=FAST)).ajudge(ITEM)
    assert score.status is Status.ERROR and "HTTP 400" in (score.reason or "") and len(seen) == 1

    responder, seen = scripted(Fault("hang", delay_s=3600))  # the server's stop ends it: the timeout fires first
    policy = RetryPolicy(max_attempts=1, timeout_s=0.3)
    with LoopbackServer(responder) as server:
        score = await PointwiseJudge(ChatModelBackend(chat_openai(server), retry=policy)).ajudge(ITEM)
    assert score.status is Status.ERROR and "timed out" in (score.reason or "")


@pytest.mark.parametrize("model", ["o3-mini", "gpt-5-mini"])
async def test_reasoning_models_through_chat_openai_and_openai_backend(model: str) -> None:
    responder, seen = scripted(Reply(VERDICT))
    with LoopbackServer(responder) as server:
        chat = ChatModelBackend(chat_openai(server, model=model), reasoning_effort="low")
        plain = OpenAIBackend(model, base_url=server.url + "/v1", api_key="sk-test", reasoning_effort="low")
        for backend in (chat, plain):
            assert (await PointwiseJudge(backend).ajudge(ITEM)).status is Status.OK
    for req in seen:
        assert "temperature" not in req.body and "max_tokens" not in req.body
        assert req.body["max_completion_tokens"] == 512 and req.body["reasoning_effort"] == "low"
        assert "logprobs" not in req.body


async def test_non_reasoning_openai_backend_keeps_temperature_and_max_tokens() -> None:
    responder, seen = scripted(Reply(VERDICT))
    with LoopbackServer(responder) as server:
        backend = OpenAIBackend("gpt-4.1-mini", base_url=server.url + "/v1", api_key="sk-test")
        await PointwiseJudge(backend).ajudge(ITEM)
    assert seen[0].body["temperature"] == 0.0 and seen[0].body["max_tokens"] == 512


def test_reasoning_effort_on_a_model_without_it_is_refused() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    with pytest.raises(ValueError, match="reasoning_effort"):
        ChatModelBackend(FakeListChatModel(responses=["x"]), reasoning_effort="low")


# ---------------------------------------------------------------- Anthropic


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
async def test_chat_anthropic_against_a_messages_api_loopback(method: str) -> None:
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    from judgegraph.testing_anthropic import AnthropicLoopbackServer

    responder, seen = scripted(Fault("status", status=429, retry_after=0), Fault("status", status=529), Reply(VERDICT))
    with AnthropicLoopbackServer(responder) as server:
        model = langchain_anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-test", base_url=server.url)
        backend = ChatModelBackend(model, retry=FAST, structured_method=method)
        score = await PointwiseJudge(backend).ajudge(ITEM)
    assert backend.model_retries_off
    assert score.status is Status.OK and score.score == 4, score.reason
    assert len(seen) == 3 and seen[-1].path == "/v1/messages"
    body = seen[-1].body
    assert body["max_tokens"] == 512 and body["temperature"] == 0.0
    if method == "json_schema":
        assert body["output_config"]["format"]["type"] == "json_schema"
    else:
        assert body["tool_choice"]["type"] == "tool"
        assert json.loads(score.raw_text or "{}")["score"] == 4
    assert score.provenance.usage.prompt_tokens == 10 and score.provenance.model == "claude-sonnet-4-5"
    assert score.distribution is None  # Anthropic returns no logprobs: no made-up distribution
