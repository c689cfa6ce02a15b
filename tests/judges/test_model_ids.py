"""A string model means a model: ``PointwiseJudge("openai:gpt-4o")`` builds a
working judge; the runtime context is reached only through ``from_context``,
and the old spelling (a bare string) fails at construction saying what to write.
The OpenAI-compatible server is a real loopback server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=25)
@given(names=st.lists(st.integers(0, 20), min_size=1, max_size=40))
def test_a_model_id_in_the_context_is_one_backend_while_recently_used(names: list[int]) -> None:
    """A context naming a model id per call (a LangGraph app's usual way)
    reuses one backend, and its connections, per id; many ids keep a bounded
    number. Nothing is called: resolution alone is what is checked."""
    from judgegraph.judges import _model

    judge = PointwiseJudge(from_context("model"))
    recent: list[str] = []
    objects: dict[str, object] = {}
    for n in names:
        spec = f"vllm:judge-{n}@http://127.0.0.1:9/v1"
        got = judge.resolve_backend(None, {"model": spec})
        assert judge.resolve_backend(None, {"model": spec}) is got
        assert isinstance(got, OpenAIBackend) and got.model == f"judge-{n}"
        if spec in recent[-_model._RESOLVED_MAX :]:  # still among the kept: the very same backend
            assert got is objects[spec]
        objects[spec] = got
        recent = [s for s in recent if s != spec] + [spec]
    assert len(_model._shared_backends) <= _model._RESOLVED_MAX


def test_a_changed_key_or_server_in_the_environment_is_a_new_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = PointwiseJudge(from_context("model"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-one")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    first = judge.resolve_backend(None, {"model": "openai:gpt-4o"})
    assert judge.resolve_backend(None, {"model": "openai:gpt-4o"}) is first
    monkeypatch.setenv("OPENAI_API_KEY", "sk-two")
    assert judge.resolve_backend(None, {"model": "openai:gpt-4o"}) is not first
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:10/v1")
    moved = judge.resolve_backend(None, {"model": "openai:gpt-4o"})
    assert isinstance(moved, OpenAIBackend) and "127.0.0.1:10" in str(moved.identity().get("server"))


async def test_calls_through_one_model_id_share_the_servers_connections() -> None:
    responder, seen = recording()
    with LoopbackServer(responder) as server:
        judge = PointwiseJudge(from_context("model"))
        ctx = {"model": f"vllm:judge@{server.url}/v1"}
        for _ in range(5):
            assert (await judge.ajudge(ITEM, context=ctx)).status is Status.OK
        # One backend: five calls over the one keep-alive connection its client pools.
        assert server.stats.connections == 1, server.stats
    assert len(seen) == 5
