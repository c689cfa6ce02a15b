"""Judge model calls as LangChain LLM runs: an in-process tracer sees them with
model name and usage, under the judge's run and under a graph node; a
LangSmith endpoint on 127.0.0.1 receives nothing while tracing is off."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langgraph.graph import START, StateGraph

from judgegraph import PointwiseJudge, create_judge_node
from judgegraph.backends import OpenAIBackend
from judgegraph.testing import LoopbackServer, Reply

ITEM = {"instruction": "What is 2+2?", "response": "4."}
REPLY = Reply('{"feedback": "Right.", "score": 5}', prompt_tokens=42)


class Collector(BaseTracer):
    """Keeps every finished run, parents included."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _end_trace(self, run: Run) -> None:
        self.runs.append(run)
        super()._end_trace(run)

    def by_type(self, run_type: str) -> list[Run]:
        return [r for r in self.runs if r.run_type == run_type]

    def parent(self, run: Run) -> Run:
        return next(r for r in self.runs if r.id == run.parent_run_id)


def backends(server: LoopbackServer) -> list[Any]:
    out: list[Any] = [OpenAIBackend("gpt-4.1-mini", base_url=server.url + "/v1", api_key="sk-test")]
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        return out
    return [*out, ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test", base_url=server.url + "/v1")]


def check_llm_run(llm: Run, *, provider: str) -> None:
    assert llm.extra is not None
    meta = llm.extra.get("metadata", {})
    assert meta["ls_model_name"] == "gpt-4.1-mini" and meta["ls_provider"] == provider
    assert llm.extra["invocation_params"]["model"] == "gpt-4.1-mini" or (
        llm.extra["invocation_params"].get("model_name") == "gpt-4.1-mini"
    )
    # BaseTracer keeps a chat run's messages as one rendered prompt (LangSmith's tracer keeps the messages).
    (prompt,) = llm.inputs["prompts"]
    assert prompt.startswith("System: ") and "What is 2+2?" in prompt
    message = llm.outputs["generations"][0][0]["message"]  # type: ignore[index]
    usage = message["kwargs"]["usage_metadata"]
    assert usage["input_tokens"] == 42 and usage["output_tokens"] > 0


async def test_each_model_call_is_a_child_llm_run_of_the_judge() -> None:
    with LoopbackServer(lambda req: REPLY) as server:
        for backend in backends(server):
            tracer = Collector()
            judge = PointwiseJudge(backend, name="quality")
            score = await judge.ainvoke(ITEM, config={"callbacks": [tracer]})
            assert score.ok
            (chain,) = [r for r in tracer.by_type("chain") if r.name == "quality"]
            (llm,) = tracer.by_type("llm")
            assert llm.parent_run_id == chain.id
            check_llm_run(llm, provider="openai")


async def test_a_judge_in_a_graph_node_is_a_run_under_the_node() -> None:
    with LoopbackServer(lambda req: REPLY) as server:
        for backend in backends(server):
            graph = StateGraph(dict)
            graph.add_node("grade", create_judge_node(PointwiseJudge(backend, name="quality")))
            graph.add_edge(START, "grade")
            tracer = Collector()
            out = await graph.compile().ainvoke(dict(ITEM), config={"callbacks": [tracer]})
            assert out["verdict"].ok
            (llm,) = tracer.by_type("llm")
            judge_run = tracer.parent(llm)
            assert judge_run.name == "quality" and judge_run.run_type == "chain"
            assert tracer.parent(judge_run).name == "grade"


def test_under_a_sync_graph_invoke_too() -> None:
    """The sync path runs the node on judgegraph's loop, and a chat model's
    call in a worker thread: the runs still nest under the node."""
    with LoopbackServer(lambda req: REPLY) as server:
        for backend in backends(server):
            graph = StateGraph(dict)
            graph.add_node("grade", create_judge_node(PointwiseJudge(backend, name="quality")))
            graph.add_edge(START, "grade")
            tracer = Collector()
            assert graph.compile().invoke(dict(ITEM), config={"callbacks": [tracer]})["verdict"].ok
            (llm,) = tracer.by_type("llm")
            judge_run = tracer.parent(llm)
            assert judge_run.name == "quality" and tracer.parent(judge_run).name == "grade"
            check_llm_run(llm, provider="openai")


async def test_astream_events_shows_the_model_call() -> None:
    with LoopbackServer(lambda req: REPLY) as server:
        judge = PointwiseJudge(OpenAIBackend("gpt-4.1-mini", base_url=server.url + "/v1", api_key="sk-test"))
        events = [e["event"] async for e in judge.astream_events(ITEM, version="v2")]
    assert "on_chat_model_start" in events and "on_chat_model_end" in events


def test_nothing_reaches_a_langsmith_endpoint_with_tracing_off() -> None:
    """A sink on 127.0.0.1 stands in for LangSmith; with tracing on (the
    control) it hears from the same script, with tracing off never."""
    script = textwrap.dedent(
        """
        import asyncio, http.server, os, sys, threading
        hits = []
        class Sink(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                hits.append(self.path); self.send_response(202); self.end_headers(); self.wfile.write(b"{}")
            do_PATCH = do_POST
            def do_GET(self):
                self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
            def log_message(self, *a): pass
        sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        os.environ["LANGSMITH_ENDPOINT"] = f"http://127.0.0.1:{sink.server_port}"
        os.environ["LANGSMITH_API_KEY"] = "lsv2-test"
        os.environ["LANGSMITH_TRACING"] = sys.argv[1]
        from langgraph.graph import START, StateGraph
        from langchain_core.tracers.langchain import wait_for_all_tracers
        from judgegraph import PointwiseJudge, create_judge_node
        from judgegraph.backends import OpenAIBackend
        from judgegraph.testing import LoopbackServer, Reply
        item = {"instruction": "What is 2+2?", "response": "4."}
        with LoopbackServer(lambda r: Reply('{"feedback": "ok", "score": 5}')) as server:
            judge = PointwiseJudge(OpenAIBackend("m", base_url=server.url + "/v1", api_key="x"))
            judge.invoke(item)
            judge.judge(item)
            g = StateGraph(dict); g.add_node("grade", create_judge_node(judge)); g.add_edge(START, "grade")
            asyncio.run(g.compile().ainvoke(dict(item)))
        wait_for_all_tracers()
        print("HITS", len(hits))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}

    def hits(tracing: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", script, tracing], env=env, capture_output=True, text=True, timeout=240
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return int(out.stdout.split("HITS")[-1])

    assert hits("true") > 0  # the control: the sink does hear traced runs
    assert hits("false") == 0


@pytest.mark.parametrize("callbacks", [None, []])
async def test_no_callbacks_means_no_runs(callbacks: list[Any] | None) -> None:
    from langchain_core.runnables.config import var_child_runnable_config

    from judgegraph.judges._tracing import tracing_active

    assert not tracing_active({"callbacks": callbacks})
    assert var_child_runnable_config.get() is None
