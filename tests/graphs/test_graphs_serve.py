"""``langgraph.json`` names graphs a LangGraph server can load and serve."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langgraph.pregel import Pregel

from judgegraph import Status
from judgegraph.testing import Reply

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
