"""A string model means a model: ``PointwiseJudge("openai:gpt-4o")`` builds a
working judge; the runtime context is reached only through ``from_context``,
and the old spelling (a bare string) fails at construction saying what to write.
The OpenAI-compatible server is a real loopback server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from judgegraph import PairwiseJudge, PointwiseJudge, ScriptedBackend, Status, from_context, resolve_model
from judgegraph.backends import OpenAIBackend, TGIBackend
from judgegraph.graphs import create_multiturn_graph, create_pointwise_graph
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

ITEM = {"instruction": "What is 2+2?", "response": "4."}
VERDICT = '{"feedback": "Correct and brief.", "score": 4}'


def recording() -> tuple[Callable[[LoopbackRequest], Reply], list[LoopbackRequest]]:
    seen: list[LoopbackRequest] = []

    def responder(req: LoopbackRequest) -> Reply:
        seen.append(req)
        return Reply(VERDICT)

    return responder, seen


async def test_an_openai_model_id_judges_against_the_environments_server(monkeypatch: pytest.MonkeyPatch) -> None:
    responder, seen = recording()
    with LoopbackServer(responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
        score = await PointwiseJudge("openai:gpt-4o").ajudge(ITEM)
    assert score.status is Status.OK and score.score == 4
    assert len(seen) == 1 and seen[0].body["model"] == "gpt-4o"
    assert score.provenance is not None and score.provenance.model == "gpt-4o"


async def test_a_vllm_model_id_names_its_server() -> None:
    responder, seen = recording()
    with LoopbackServer(responder) as server:
        judge = PointwiseJudge(f"vllm:Qwen/Qwen2.5-7B-Instruct@{server.url}/v1")
        score = await judge.ajudge(ITEM)
    assert score.status is Status.OK and seen[0].body["model"] == "Qwen/Qwen2.5-7B-Instruct"


def test_model_ids_resolve_to_their_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    assert isinstance(resolve_model("openai:gpt-4o"), OpenAIBackend)
    tgi = resolve_model("tgi:http://127.0.0.1:8080")
    assert isinstance(tgi, TGIBackend)
    judge = PairwiseJudge("openai:gpt-4o-mini")
    assert isinstance(judge.backend, OpenAIBackend) and judge.backend.model == "gpt-4o-mini"


def test_other_providers_go_through_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain")
    pytest.importorskip("langchain_anthropic")
    from judgegraph.backends import ChatModelBackend

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    backend = PointwiseJudge("anthropic:claude-sonnet-4-5").backend
    assert isinstance(backend, ChatModelBackend)
    assert backend.provider == "anthropic" and backend.model == "claude-sonnet-4-5"


@pytest.mark.parametrize("old", ["gpt-4o", "backend"])
def test_a_bare_string_fails_at_construction_saying_what_to_write(old: str) -> None:
    with pytest.raises(ValueError) as caught:
        PointwiseJudge(old)
    message = str(caught.value)
    assert f'"openai:{old}"' in message and f'from_context("{old}")' in message


def test_an_unknown_provider_is_not_a_model() -> None:
    pytest.importorskip("langchain")
    with pytest.raises(ValueError, match=r"not a model id.*from_context\(\"judge:x\"\)"):
        PointwiseJudge("judge:x")


async def test_the_context_is_reached_only_through_from_context() -> None:
    backend = ScriptedBackend(lambda request: "Correct. [RESULT] 4")
    assert PointwiseJudge().backend == from_context("backend")  # the default, as before
    score = await PointwiseJudge(from_context("grader")).ajudge(ITEM, context={"grader": backend})
    assert score.status is Status.OK and score.score == 4
    with pytest.raises(LookupError, match="'grader'"):
        await PointwiseJudge(from_context("grader")).ajudge(ITEM, context={"backend": backend})
    with pytest.raises(ValueError):
        from_context("")


def test_a_graph_given_a_string_judge_fails_at_build() -> None:
    with pytest.raises(TypeError, match=r'from_context\("judge"\)'):
        create_pointwise_graph(judge="judge")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r'from_context\("turns"\)'):
        create_multiturn_graph(turn_policy="min", turn_judge="turns")  # type: ignore[arg-type]
