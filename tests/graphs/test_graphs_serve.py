"""``langgraph.json`` names graphs a LangGraph server can load and serve."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _waiting import wait_until
from langgraph.pregel import Pregel

from judgegraph import Status
from judgegraph.testing import LoopbackRequest, Reply

ROOT = Path(__file__).resolve().parents[2]
CONFIG = json.loads((ROOT / "langgraph.json").read_text())


def load_by_path(spec: str) -> Any:
    """Import ``./file.py:attr`` the way the server does: by file path."""
    file, _, attr = spec.partition(":")
    path = (ROOT / file).resolve()
    name = f"_served_{path.stem}_{abs(hash(path))}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return getattr(module, attr)


def test_config_names_every_prebuilt_graph() -> None:
    assert set(CONFIG["graphs"]) == {"pairwise", "pointwise", "multiturn", "rubric", "guardrail", "batch"}
    assert any(dep.startswith(".") for dep in CONFIG["dependencies"])


@pytest.mark.parametrize("name", sorted(CONFIG["graphs"]))
def test_each_named_graph_loads_compiled_with_schemas(name: str) -> None:
    graph = load_by_path(CONFIG["graphs"][name])
    assert isinstance(graph, Pregel)
    drawn = graph.get_graph()
    assert "__start__" in drawn.nodes and "__end__" in drawn.nodes and len(drawn.nodes) >= 3
    # A server publishes these for each assistant; they must be generable.
    assert graph.get_input_jsonschema()["properties"]
    assert graph.get_output_jsonschema()["properties"]
    assert graph.get_context_jsonschema() is not None


async def test_served_graph_without_a_model_set_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGEGRAPH_MODEL", raising=False)
    graph = load_by_path(CONFIG["graphs"]["pointwise"])
    out = await graph.ainvoke({"instruction": "q", "response": "r"})
    assert out["verdict"].status is Status.ERROR and "JUDGEGRAPH_MODEL" in out["verdict"].reason


async def test_served_graph_calls_the_endpoint_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, loopback: Any
) -> None:
    pytest.importorskip("openai")
    with loopback(lambda req: Reply('{"feedback": "Fine.", "score": 4}')) as server:
        monkeypatch.setenv("JUDGEGRAPH_MODEL", "served-judge")
        monkeypatch.setenv("JUDGEGRAPH_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        graph = load_by_path(CONFIG["graphs"]["pointwise"])
        out = await graph.ainvoke({"instruction": "q", "response": "r"})
    assert out["verdict"].score == 4 and out["verdict"].provenance.model == "served-judge"
    assert server.calls["/v1/chat/completions"] == 1


# ---------------------------------------------------------------- deployable config


def test_config_builds_the_package_and_its_openai_extra() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0] for req in extras["openai"]}
    deps = CONFIG["dependencies"]
    assert "." in deps  # the repo itself, installed as a package
    assert {d for d in deps if not d.startswith(".")} == wanted
    # langgraph-cli pastes these into a RUN line unquoted: ">=" would be a shell redirect.
    assert not any(ch in d for d in deps for ch in "<>|&;$`\"' ")
    assert ".langgraph_api/" in (ROOT / ".gitignore").read_text().split()


def _cli() -> str:
    found = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which("langgraph")
    if found is None:
        pytest.skip("langgraph-cli is not installed (pip install 'langgraph-cli[inmem]')")
    return found


def test_langgraph_dockerfile_builds_from_the_config(tmp_path: Path) -> None:
    out = tmp_path / "Dockerfile"
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    done = subprocess.run(
        [_cli(), "dockerfile", str(out), "--config", str(ROOT / "langgraph.json")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    text = out.read_text()
    assert "-c /api/constraints.txt openai\n" in text and "ADD . /deps/" in text and "-e ." in text
    served = json.loads(re.search(r"LANGSERVE_GRAPHS='(.*)'", text).group(1))  # type: ignore[union-attr]
    assert set(served) == set(CONFIG["graphs"])


# ---------------------------------------------------------------- the context a served run may set


@pytest.mark.parametrize("name", sorted(CONFIG["graphs"]))
def test_served_graphs_advertise_only_the_context_they_use(name: str) -> None:
    graph = load_by_path(CONFIG["graphs"][name])
    fields = set(graph.get_context_jsonschema()["properties"])
    assert fields == ({"model", "base_url", "threshold"} if name == "guardrail" else {"model", "base_url"})


def scores(req: LoopbackRequest) -> Reply:
    schema = json.dumps(req.body.get("response_format") or {})
    if "score_a" in schema:  # prefers the answer "Paris.", wherever it is shown
        prompt = req.prompt
        first = prompt[prompt.index("begin response a") : prompt.index("begin response b")]
        a, b = (8, 3) if "Paris." in first else (3, 8)
        return Reply(f'{{"rationale": "Paris is right.", "score_a": {a}, "score_b": {b}}}')
    return Reply('{"feedback": "Fine.", "score": 4}')


async def test_served_context_sets_model_endpoint_and_threshold(monkeypatch: pytest.MonkeyPatch, loopback: Any) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("JUDGEGRAPH_MODEL", raising=False)
    with loopback(scores) as default, loopback(scores) as other:
        monkeypatch.setenv("JUDGEGRAPH_BASE_URL", default.url + "/v1")
        pointwise = load_by_path(CONFIG["graphs"]["pointwise"])
        out = await pointwise.ainvoke({"instruction": "q", "response": "r"}, context={"model": "ctx-judge"})
        assert out["verdict"].score == 4 and out["verdict"].provenance.model == "ctx-judge"
        assert default.calls["/v1/chat/completions"] == 1
        # Another endpoint from a run's context would receive the server's key: refused unless allowed.
        with pytest.raises(ValueError, match="JUDGEGRAPH_ALLOWED_BASE_URLS"):
            await pointwise.ainvoke(
                {"instruction": "q", "response": "r"}, context={"model": "m", "base_url": other.url + "/v1"}
            )
        monkeypatch.setenv("JUDGEGRAPH_ALLOWED_BASE_URLS", f"http://127.0.0.1:1/v1, {other.url}/v1/")
        await pointwise.ainvoke(
            {"instruction": "q", "response": "r"}, context={"model": "m", "base_url": other.url + "/v1"}
        )
        assert other.calls["/v1/chat/completions"] == 1 and default.calls["/v1/chat/completions"] == 1
        guardrail = load_by_path(CONFIG["graphs"]["guardrail"])
        passed = await guardrail.ainvoke({"instruction": "q", "answer": "a"}, context={"model": "m"})
        blocked = await guardrail.ainvoke({"instruction": "q", "answer": "a"}, context={"model": "m", "threshold": 4.5})
        assert passed["decision"].action == "pass" and "threshold 4" in passed["decision"].reason
        assert blocked["decision"].action == "block" and "threshold 4.5" in blocked["decision"].reason
        with pytest.raises(ValueError, match=r"context\.threshold must be a number"):
            await guardrail.ainvoke({"instruction": "q", "answer": "a"}, context={"model": "m", "threshold": "high"})


# ---------------------------------------------------------------- the real in-memory server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def judge_model() -> Iterator[Any]:
    from judgegraph.testing import LoopbackServer

    with LoopbackServer(scores) as server:
        yield server


@pytest.fixture(scope="module")
def dev_server(judge_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` serving langgraph.json, its judge model on loopback."""
    pytest.importorskip("langgraph_api")
    pytest.importorskip("langgraph_sdk")
    port = _free_port()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "OPENAI_API_KEY": "test-key",
        "JUDGEGRAPH_MODEL": "served-judge",
        "JUDGEGRAPH_BASE_URL": judge_model.url + "/v1",
    }
    env.pop("JUDGEGRAPH_ALLOWED_BASE_URLS", None)
    # The server resolves graph paths against its working directory: the repo root
    # (it keeps its in-memory state in .langgraph_api/ there, which git ignores).
    # Its log goes to a file: an unread pipe fills up and stalls the server.
    log_path = tmp_path_factory.mktemp("langgraph-dev") / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [_cli(), "dev", "--no-browser", "--no-reload", "--port", str(port), "--config", "langgraph.json"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited: {log_path.read_text()[-3000:]}")
        try:
            # A short wait per look is fine: a look that times out is only tried again.
            with urllib.request.urlopen(url + "/ok", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    try:
        # No deadline: how long the server takes to start depends on the machine; a
        # server that never starts is caught by pytest-timeout.
        wait_until(up, "langgraph dev answered /ok", poll_s=0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


RUNS: dict[str, dict[str, Any]] = {
    "pointwise": {"instruction": "Capital of France?", "response": "Paris."},
    "pairwise": {"instruction": "Capital of France?", "response_a": "Paris.", "response_b": "Lyon."},
    "rubric": {
        "instruction": "Capital of France?",
        "response": "Paris.",
        "criteria": [
            {
                "name": "accuracy",
                "rubric": {"criterion": "Correct?", "levels": {"1": "no", "5": "yes", "2": "-", "3": "-", "4": "-"}},
            }
        ],
    },
    "multiturn": {
        "messages": [
            {"role": "user", "content": "Weather in Rome?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "w1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}
                ],
            },
            {"role": "tool", "content": "27 C", "tool_call_id": "w1"},
            {"role": "assistant", "content": "27 C and clear."},
        ]
    },
    "guardrail": {"instruction": "Capital of France?", "answer": "Paris."},
    "batch": {"items": [{"instruction": "q1", "response": "r1"}, {"instruction": "q2", "response": "r2"}]},
}


def _check(name: str, values: dict[str, Any]) -> None:
    if name == "batch":
        assert [r["score"] for r in values["results"]] == [4, 4]
    elif name == "guardrail":
        assert values["decision"]["action"] == "pass"
    elif name == "pairwise":
        assert values["verdict"]["winner"] == "A" and not values["verdict"]["inconsistent"]
    elif name == "multiturn":
        assert values["verdict"]["status"] == "ok" and [t["turn"] for t in values["verdict"]["turns"]] == [3]
    elif name == "rubric":
        assert values["verdict"]["status"] == "ok" and values["verdict"]["criteria"]["accuracy"]["score"] == 4
    else:
        assert values["verdict"]["score"] == 4 and values["verdict"]["provenance"]["model"] == "served-judge"


@pytest.mark.timing  # starts a server process and waits for it
async def test_the_sdk_runs_and_streams_each_served_graph(dev_server: str, judge_model: Any) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    assistants = {a["graph_id"] for a in await client.assistants.search()}
    assert assistants == set(CONFIG["graphs"])
    for name, payload in RUNS.items():
        events = [
            part async for part in client.runs.stream(None, name, input=payload, stream_mode=["values", "custom"])
        ]
        kinds = {e.event for e in events}
        assert "custom" in kinds, (name, kinds)  # verdicts stream as they are made
        final = [e.data for e in events if e.event == "values"][-1]
        _check(name, final)
    # A run waited on, whose JSON context picks the model.
    picked = await client.runs.wait(None, "pointwise", input=RUNS["pointwise"], context={"model": "picked-judge"})
    assert isinstance(picked, dict) and picked["verdict"]["provenance"]["model"] == "picked-judge"
    assert judge_model.calls["/v1/chat/completions"] >= len(RUNS)
