"""Every credential source is scrubbed the same way (issue 15).

One canary per source: an argument, ``OPENAI_API_KEY`` (which the SDK reads
itself), user info in the URL, a credential header, and a client object the
caller built, for the OpenAI and the TGI backend. The loopback server checks
the credential arrives and answers every request with a 401 quoting what it
was sent, in the clear and decoded. The canary is then looked for in the
error reason, the job summary, the SQLite store and its run record, the
report, a LangGraph checkpoint, the backend's repr, and the logs at DEBUG
(the HTTP client's INFO request lines included).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver

from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy
from judgegraph.backends import TGIBackend
from judgegraph.jobs import SourceConfig, Store, arun_job, write_report
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

CANARY = "7c1e5b2d4086e1aa9f3b"


def _key(source: str) -> str:
    return f"sk-{source}-{CANARY}"


class _Echo:
    """Answers 401 with every credential header it got, raw and base64-decoded."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        creds = {k: v for k, v in req.headers.items() if k in ("authorization", "x-api-key")}
        self.seen += creds.values()
        decoded = []
        for v in creds.values():
            if v.lower().startswith("basic "):
                decoded.append(base64.b64decode(v.split()[1]).decode())
        return Fault("status", 401, message=f"bad credentials {creds} ({decoded}) for {req.path}")


Build = Callable[[str, str], Any]  # (server url, key) -> backend


def _openai(**kw: Any) -> Any:
    return OpenAIBackend("judge", retry=RetryPolicy(max_attempts=1), **kw)


SOURCES: dict[str, Build] = {
    "openai-argument": lambda url, key: _openai(base_url=url + "/v1", api_key=key),
    "openai-env": lambda url, key: _openai(base_url=url + "/v1"),
    "openai-url": lambda url, key: _openai(base_url=url.replace("://", f"://user:{key}@") + "/v1", api_key="unused"),
    "openai-header": lambda url, key: _openai(
        base_url=url + "/v1", api_key="unused", default_headers={"X-Api-Key": key}
    ),
    "openai-client": lambda url, key: _openai(client=_client(url, key)),
    # LangChain chat models hold the key in a SecretStr field (from the
    # argument or the environment), headers in default_headers (issue 26).
    "langchain-argument": lambda url, key: _chat(url, api_key=key),
    "langchain-env": lambda url, key: _chat(url),
    "langchain-header": lambda url, key: _chat(url, api_key="unused", default_headers={"X-Api-Key": key}),
    "langchain-auth-header": lambda url, key: _chat(url, api_key="unused", default_headers={"Authorization": key}),
    "tgi-argument": lambda url, key: TGIBackend(url, token=key, retry=RetryPolicy(max_attempts=1)),
    "tgi-url": lambda url, key: TGIBackend(url.replace("://", f"://user:{key}@"), retry=RetryPolicy(max_attempts=1)),
    "tgi-header": lambda url, key: TGIBackend(url, headers={"X-Api-Key": key}, retry=RetryPolicy(max_attempts=1)),
    "tgi-generate": lambda url, key: TGIBackend(
        url.replace("://", f"://user:{key}@"), mode="generate", retry=RetryPolicy(max_attempts=1)
    ),
}


def _chat(url: str, **kw: Any) -> Any:
    from langchain_openai import ChatOpenAI

    from judgegraph.backends import ChatModelBackend

    return ChatModelBackend(ChatOpenAI(model="judge", base_url=url + "/v1", **kw), retry=RetryPolicy(max_attempts=1))


def _client(url: str, key: str) -> Any:
    import openai

    return openai.AsyncOpenAI(api_key=key, base_url=url + "/v1", max_retries=0)


def _leaks(blob: bytes | str) -> bool:
    raw = blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else blob
    return CANARY.encode() in raw or base64.b64encode(f"user:{CANARY}".encode()) in raw


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_a_credential_from_any_source_reaches_no_output(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = _key(source)
    monkeypatch.setenv("OPENAI_API_KEY", key if source.endswith("-env") else "sk-env-unrelated")
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpx2", "httpcore", "httpcore2", "huggingface_hub"):
        caplog.set_level(logging.DEBUG, logger=name)
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"instruction": f"Q{i}?", "response": f"a{i}"}) + "\n" for i in range(3)), encoding="utf-8"
    )
    echo = _Echo()
    texts: list[str] = []
    with LoopbackServer(echo) as server:
        backend = SOURCES[source](server.url, key)
        texts += [repr(backend), str(backend)]
        judge = PointwiseJudge(backend, structured=False, repair=False)
        summary = await arun_job(
            SourceConfig(path=str(src)),
            judge=judge,
            kind="pointwise",
            store=tmp_path / "s.db",
            run_id="r",
            # The run record as a user's spec would have it: the URL with its credentials.
            spec={"backend": {"base_url": server.url.replace("://", f"://user:{key}@") + "/v1"}, "source": source},
        )
        texts += [summary.model_dump_json()]
        result = await judge.ajudge({"instruction": "Q?", "response": "a"})
        texts += [result.model_dump_json(), repr(result)]
        from graphs import create_pointwise_graph

        saver = InMemorySaver()
        graph = create_pointwise_graph(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "t"}}
        await graph.ainvoke(
            {"instruction": "Q?", "response": "a"}, config, context={"judge": judge, "backend": backend}
        )
        texts += [repr(saver.storage), repr(list(saver.list(config)))]
    write_report(Store(tmp_path / "s.db", read_only=True), "r", tmp_path / "report")

    # The credential was really sent, and the server really quoted it back.
    assert any(key in s or base64.b64encode(f"user:{key}".encode()).decode() in s for s in echo.seen), echo.seen
    assert summary.errors == 3 and "401" in summary.problems[0]
    assert "401" in (result.reason or "") and not result.ok
    for t in texts:
        assert not _leaks(t), t[:400]
    for p in tmp_path.rglob("*"):
        if p.is_file() and p.name != "in.jsonl":
            assert not _leaks(p.read_bytes()), p
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)
    assert "HTTP Request" in logged or "tgi" in source  # the client's INFO request lines were captured
    assert not _leaks(logged), [r.getMessage()[:200] for r in caplog.records if _leaks(r.getMessage())][:3]


# ---------------------------------------------------------------- the class, generated

_AUTH_WORDS = ["Api-Key", "Authorization", "Auth-Token", "Token", "Secret", "Session", "Access-Key", "Password"]
_PLACES = ["api_key", "env", "default_headers", "model_kwargs_headers", "sdk_client"]


@given(
    place=st.sampled_from(_PLACES),
    header=st.builds(
        lambda prefix, word, upper: (prefix + word).upper() if upper else prefix + word,
        st.sampled_from(["", "X-", "X-Org-", "Proxy-"]),
        st.sampled_from(_AUTH_WORDS),
        st.booleans(),
    ),
    scheme=st.sampled_from(["", "Bearer ", "Token "]),
    body=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=12, max_size=48),
)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_chat_models_credential_is_scrubbed_however_given(place: str, header: str, scheme: str, body: str) -> None:
    """Any chat model credential, wherever it sits on the model (argument,
    environment, a header of any auth-like name, headers passed per call, the
    SDK client the caller built), never reaches the error a judge reports."""
    import os

    import openai
    from langchain_openai import ChatOpenAI

    from judgegraph.backends import ChatModelBackend

    key = f"sk-{body}"
    seen: list[str] = []

    def everything(req: LoopbackRequest) -> Fault:
        seen.extend(req.headers.values())
        return Fault("status", 401, message=f"you sent {req.headers} to {req.path}")

    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = key if place == "env" else "sk-env-unrelated"
    try:
        with LoopbackServer(everything) as server:
            base = server.url + "/v1"
            kw: dict[str, Any] = {"model": "judge", "base_url": base, "api_key": "sk-unused-but-long"}
            if place == "api_key":
                kw["api_key"] = key
            elif place == "env":
                del kw["api_key"]
            elif place == "default_headers":
                kw["default_headers"] = {header: scheme + key}
            elif place == "model_kwargs_headers":
                kw["model_kwargs"] = {"extra_headers": {header: scheme + key}}
            else:
                # The caller's own SDK clients, sync and async (sync judging uses the sync one).
                kw["async_client"] = openai.AsyncOpenAI(api_key=key, base_url=base, max_retries=0).chat.completions
                kw["client"] = openai.OpenAI(api_key=key, base_url=base, max_retries=0).chat.completions
            backend = ChatModelBackend(ChatOpenAI(**kw), retry=RetryPolicy(max_attempts=1))
            result = PointwiseJudge(backend, structured=False, repair=False).judge(
                {"instruction": "Q?", "response": "a"}
            )
    finally:
        if old is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old
    assert "401" in (result.reason or "") and not result.ok
    assert any(body in h for h in seen), seen  # the credential was really sent, and quoted back
    for text in (result.reason or "", result.model_dump_json(), repr(backend)):
        assert body not in text, text[:300]
