"""The one verdict identity, checked by reflection (issue 24).

Every request field, every constructor argument of the backends and the
model judges, and every field of a LangChain chat model is read from the
code itself; changing any one of them must change the identity, unless it
is in an explicit exclusion list, which must name real fields (not stale)
and whose fields must really be left out. A field added later is covered
without anyone remembering to add it here.
"""

from __future__ import annotations

import dataclasses
import inspect
import shutil
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import judgegraph.judges as judges
from judgegraph.backends import (
    REQUEST_FIELDS_EXCLUDED,
    ChatModelBackend,
    GenerateRequest,
    OpenAIBackend,
    ScriptedBackend,
    TGIBackend,
    backend_identity,
    cache_key,
    canonical_json,
)
from judgegraph.backends._langchain import CHAT_MODEL_FIELDS_EXCLUDED
from judgegraph.jobs import config_hash, fingerprint_for
from judgegraph.judges import ModelJudge
from judgegraph.types import Criterion, Message, Rubric, SwapPolicy

langchain_openai = pytest.importorskip("langchain_openai")

BASE = GenerateRequest(messages=(Message(role="user", content="Grade this."),))
SCRIPTED = ScriptedBackend(lambda req: "[RESULT] 3")
SECRET = "sk-very-secret-0123456789"


def _changed(value: Any, annotation: object) -> Any:
    """A different value of the same kind as ``value`` (its annotation says
    which kind when it is None)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, tuple) and value and isinstance(value[0], Message):
        return (*value, Message(role="assistant", content="changed"))
    if isinstance(value, tuple | list):
        return [*value, "changed"]
    if isinstance(value, Mapping):
        return {**value, "changed": "1"}
    if value is None:
        literals = [a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal]
        if literals:
            return typing.get_args(literals[0])[0]
        kind = str(annotation)
        for name, new in (
            ("bool", True),
            ("int", 3),
            ("float", 0.25),
            ("dict", {"changed": 1}),
            ("Mapping", {"changed": "1"}),
            ("list", ["changed"]),
            ("str", "changed"),
        ):
            if name in kind:
                return new
    raise AssertionError(f"no way to change {value!r} ({annotation}): teach _changed this kind")


# ---------------------------------------------------------------- requests

KEYED_REQUEST_FIELDS = [f.name for f in dataclasses.fields(GenerateRequest) if f.name not in REQUEST_FIELDS_EXCLUDED]


def test_request_exclusions_name_real_fields_that_are_left_out() -> None:
    fields = {f.name: f for f in dataclasses.fields(GenerateRequest)}
    assert set(REQUEST_FIELDS_EXCLUDED) <= set(fields), "stale entries in REQUEST_FIELDS_EXCLUDED"
    for name in REQUEST_FIELDS_EXCLUDED:
        other = dataclasses.replace(BASE, **{name: _changed(getattr(BASE, name), fields[name].type)})
        assert cache_key(other, SCRIPTED) == cache_key(BASE, SCRIPTED)


@pytest.mark.parametrize("name", KEYED_REQUEST_FIELDS)
def test_every_request_field_changes_the_cache_key(name: str) -> None:
    field = next(f for f in dataclasses.fields(GenerateRequest) if f.name == name)
    other = dataclasses.replace(BASE, **{name: _changed(getattr(BASE, name), field.type)})
    assert cache_key(other, SCRIPTED) != cache_key(BASE, SCRIPTED)


_messages = st.lists(
    st.builds(Message, role=st.sampled_from(["system", "user", "assistant"]), content=st.text(max_size=12)),
    min_size=1,
    max_size=3,
).map(tuple)
# One strategy per GenerateRequest field (checked below, so a new field is drawn too).
REQUEST_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "messages": _messages,
    "max_tokens": st.integers(1, 4096),
    "temperature": st.floats(0.0, 2.0).map(lambda x: x + 0.0),  # no -0.0: it equals 0.0
    "stop": st.lists(st.text(max_size=4), max_size=2).map(tuple),
    "json_schema": st.none() | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    "logprobs": st.booleans(),
    "top_logprobs": st.integers(0, 20),
    "seed": st.none() | st.integers(0, 2**31),
    "template_id": st.none() | st.text(max_size=8),
    "template_version": st.none() | st.integers(0, 9),
    "repair": st.booleans(),
}
_requests = st.builds(GenerateRequest, **REQUEST_FIELDS)


@given(_requests, st.sampled_from(KEYED_REQUEST_FIELDS), _requests)
def test_requests_differing_in_one_field_get_different_keys(
    base: GenerateRequest, name: str, donor: GenerateRequest
) -> None:
    other = dataclasses.replace(base, **{name: getattr(donor, name)})
    same = getattr(other, name) == getattr(base, name)
    assert (cache_key(other, SCRIPTED) == cache_key(base, SCRIPTED)) is same


def test_the_request_generator_covers_every_field() -> None:
    # A field added to GenerateRequest must be drawn by the property test above too.
    assert set(REQUEST_FIELDS) == {f.name for f in dataclasses.fields(GenerateRequest)}


# ---------------------------------------------------------------- backends


def _chat_openai(**options: Any) -> Any:
    settings = {"model": "gpt-4o-mini", "api_key": SECRET, "base_url": "http://127.0.0.1:9/v1", **options}
    return langchain_openai.ChatOpenAI(**settings)


def _no_prompt(messages: Any) -> str:
    return ""


# What each backend is built with, and the changes a plain value cannot express.
BACKENDS: dict[type[Any], dict[str, Any]] = {
    OpenAIBackend: {"model": "judge", "api_key": SECRET, "base_url": "http://127.0.0.1:9/v1"},
    TGIBackend: {"base_url": "http://127.0.0.1:9", "token": SECRET},
    ChatModelBackend: {"model": _chat_openai()},
}
SPECIAL: dict[str, Callable[[], Any]] = {
    "prompt_format": lambda: _no_prompt,
    "reasoning": lambda: True,  # None means "by the model's name": not a reasoning model here
    "structured_output": lambda: False,  # None or True: both mean structured output here
    "logprobs": lambda: False,  # None means "if the model has logprobs": it has
    "model": lambda: None,  # per backend, below
}


def _params(cls: type[Any]) -> list[inspect.Parameter]:
    sig = inspect.signature(cls.__init__)
    params = list(sig.parameters.values())[1:]
    assert not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params), f"{cls.__name__}: spell options out"
    return params


def _other_backend_value(cls: type[Any], param: inspect.Parameter, base: Mapping[str, Any]) -> Any:
    if param.name == "model":
        return _chat_openai(model="gpt-4o") if cls is ChatModelBackend else "judge-2"
    if param.name in SPECIAL:
        return SPECIAL[param.name]()
    return _changed(base.get(param.name, param.default), param.annotation)


@pytest.mark.parametrize("cls", list(BACKENDS), ids=lambda c: c.__name__)
def test_backend_exclusions_name_real_arguments(cls: type[Any]) -> None:
    names = {p.name for p in _params(cls)}
    assert set(cls.IDENTITY_EXCLUDED) <= names, f"stale entries in {cls.__name__}.IDENTITY_EXCLUDED"


@pytest.mark.parametrize(
    ("cls", "name"),
    [(cls, p.name) for cls in BACKENDS for p in _params(cls) if p.name not in cls.IDENTITY_EXCLUDED],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_every_backend_argument_changes_the_identity(cls: type[Any], name: str) -> None:
    base = BACKENDS[cls]
    param = next(p for p in _params(cls) if p.name == name)
    one, two = cls(**base), cls(**{**base, name: _other_backend_value(cls, param, base)})
    assert backend_identity(one) != backend_identity(two)
    assert cache_key(BASE, one) != cache_key(BASE, two)


@pytest.mark.parametrize("cls", list(BACKENDS), ids=lambda c: c.__name__)
def test_excluded_backend_arguments_leave_the_identity_alone(cls: type[Any]) -> None:
    base = BACKENDS[cls]
    from judgegraph.types import Pricing, RetryPolicy

    others: dict[str, Any] = {
        "api_key": "sk-another-key-9876543210",
        "token": "hf_another_token_9876543210",
        "retry": RetryPolicy(max_attempts=9, timeout_s=1.0),  # timing-lint: a setting, never waited on
        "pricing": Pricing(input_per_mtok=1.0, output_per_mtok=2.0),
        "max_connections": 7,
        "client": None,  # the default: the backend builds its own for the same server
    }
    for name in cls.IDENTITY_EXCLUDED:
        other = cls(**{**base, name: others[name]})
        assert backend_identity(other) == backend_identity(cls(**base)), name


# ---------------------------------------------------------------- LangChain chat model fields


def _chat_classes() -> list[type[Any]]:
    classes: list[type[Any]] = [langchain_openai.ChatOpenAI]
    try:
        from langchain_anthropic import ChatAnthropic
    except ImportError:
        return classes
    return [*classes, ChatAnthropic]


def _chat_model(cls: type[Any]) -> Any:
    if cls.__name__ == "ChatAnthropic":
        return cls(model="claude-test", api_key=SECRET, base_url="http://127.0.0.1:9")
    return _chat_openai()


def test_chat_model_exclusions_name_real_fields() -> None:
    fields = set().union(*(set(c.model_fields) for c in _chat_classes()))
    assert set(CHAT_MODEL_FIELDS_EXCLUDED) <= fields, "stale entries in CHAT_MODEL_FIELDS_EXCLUDED"


@pytest.mark.parametrize(
    ("cls", "name"),
    [(c, n) for c in _chat_classes() for n in c.model_fields if n not in CHAT_MODEL_FIELDS_EXCLUDED],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_every_chat_model_field_changes_the_identity(cls: type[Any], name: str) -> None:
    model = _chat_model(cls)
    new = _changed(getattr(model, name), cls.model_fields[name].annotation)
    if name in ("default_headers", "default_query"):
        new = {"X-Route": "b"}  # a credential header is left out on purpose (below)
    other = model.model_copy(update={name: new})
    assert backend_identity(ChatModelBackend(model)) != backend_identity(ChatModelBackend(other))


@pytest.mark.parametrize("cls", _chat_classes(), ids=lambda c: c.__name__)
def test_excluded_chat_model_fields_leave_the_identity_alone(cls: type[Any]) -> None:
    model = _chat_model(cls)
    for name in CHAT_MODEL_FIELDS_EXCLUDED:
        if name in cls.model_fields:
            # An SDK client is replaced by none (the backend re-targets the ones it finds).
            other = model.model_copy(update={name: None if "client" in name else "changed"})
            assert backend_identity(ChatModelBackend(other)) == backend_identity(ChatModelBackend(model)), name


def test_two_servers_and_two_providers_are_two_identities() -> None:
    a = ChatModelBackend(_chat_openai())
    b = ChatModelBackend(
        langchain_openai.ChatOpenAI(model="gpt-4o-mini", api_key=SECRET, base_url="http://127.0.0.1:10/v1")
    )
    assert backend_identity(a)["server"] == "http://127.0.0.1:9/v1"
    assert backend_identity(a) != backend_identity(b)
    azure = langchain_openai.AzureChatOpenAI(
        model="gpt-4o-mini", api_key=SECRET, azure_endpoint="http://127.0.0.1:9", api_version="2024-10-21"
    )
    assert backend_identity(ChatModelBackend(azure))["provider"] != backend_identity(a)["provider"]


def test_no_credential_reaches_an_identity() -> None:
    """Keys, tokens, credential headers and URL user info never appear in
    an identity (it is stored with every job and cassette)."""
    backends = [
        OpenAIBackend(
            "judge",
            api_key=SECRET,
            base_url="http://user:pw-secret-42@127.0.0.1:9/v1",
            default_headers={"Authorization": f"Bearer {SECRET}", "X-Route": "a"},
        ),
        TGIBackend("http://user:pw-secret-42@127.0.0.1:9", token=SECRET, headers={"X-Api-Key": SECRET}),
        ChatModelBackend(
            langchain_openai.ChatOpenAI(
                model="gpt-4o-mini",
                api_key=SECRET,
                base_url="http://user:pw-secret-42@127.0.0.1:9/v1",
                default_headers={"api-key": SECRET, "X-Route": "a"},
                default_query={"token": SECRET},
            )
        ),
    ]
    for backend in backends:
        text = canonical_json(backend_identity(backend))
        assert SECRET not in text and "pw-secret-42" not in text, text
        assert "X-Route" in text or isinstance(backend, TGIBackend)


# ---------------------------------------------------------------- judge options

# Judge options that cannot change a verdict, each with why.
JUDGE_OPTIONS_EXCLUDED = {"max_concurrency": "how many criteria run at once"}
LEVELS = {1: "bad", 2: "weak", 3: "ok", 4: "good", 5: "great"}
CRITERIA = [Criterion(name="accuracy", rubric=Rubric(criterion="accuracy", levels=LEVELS))]
MODEL_JUDGES = sorted(
    (c for c in vars(judges).values() if inspect.isclass(c) and issubclass(c, ModelJudge) and c is not ModelJudge),
    key=lambda c: c.__name__,
)
REQUIRED: dict[str, Any] = {"criteria": CRITERIA, "criterion": "Is the answer polite?"}


def _other_option(cls: type[Any], name: str, default: Any, annotation: object) -> Any:
    table: dict[str, Callable[[], Any]] = {
        "backend": lambda: ScriptedBackend(lambda req: "[RESULT] 3", model="another"),
        "template": lambda: cls(SCRIPTED, **_required(cls)).template.model_copy(update={"version": 99}),
        "scale": lambda: (2, 7),
        "swap": lambda: SwapPolicy(mode="single"),
        "mode": lambda: "turn",
        "criteria": lambda: [*CRITERIA, Criterion(name="style", rubric=Rubric(criterion="style", levels=LEVELS))],
        "criterion": lambda: "Is the answer short?",
        "choices": lambda: ["good", "bad"],
        "choice_scores": lambda: {"yes": 1.0, "no": 0.25},
        "examples": lambda: [{"instruction": "q", "response": "r", "verdict": "yes"}],
        "structured": lambda: False,
    }
    return table[name]() if name in table else _changed(REQUIRED.get(name, default), annotation)


def _required(cls: type[Any]) -> dict[str, Any]:
    return {p.name: REQUIRED[p.name] for p in _params(cls) if p.default is p.empty}


def _judge(cls: type[Any], **options: Any) -> Any:
    args = {**_required(cls), **options}
    backend = args.pop("backend", SCRIPTED)
    if "criterion" in args:  # the sentence judge takes its criterion first
        return cls(args.pop("criterion"), backend, **args)
    return cls(backend, **args)


def _hash(judge: Any) -> str:
    return config_hash(fingerprint_for(judge, None))


def test_judge_option_exclusions_name_real_options() -> None:
    options = {p.name for cls in MODEL_JUDGES for p in _params(cls)}
    assert set(JUDGE_OPTIONS_EXCLUDED) <= options


@pytest.mark.parametrize(
    ("cls", "name"),
    [(c, p.name) for c in MODEL_JUDGES for p in _params(c) if p.name not in JUDGE_OPTIONS_EXCLUDED],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_every_judge_option_changes_the_config_hash(cls: type[Any], name: str) -> None:
    param = next(p for p in _params(cls) if p.name == name)
    if name == "choices":  # a sentence judge's choices need their own scores
        changed = _judge(cls, choices=["good", "bad"], choice_scores={"good": 1.0, "bad": 0.0})
    else:
        changed = _judge(cls, **{name: _other_option(cls, name, param.default, param.annotation)})
    assert _hash(changed) != _hash(_judge(cls))


def test_excluded_judge_options_leave_the_config_hash_alone() -> None:
    judge = judges.RubricJudge(SCRIPTED, criteria=CRITERIA)
    assert _hash(judges.RubricJudge(SCRIPTED, criteria=CRITERIA, max_concurrency=2)) == _hash(judge)


def test_transformers_backend_is_keyed_by_its_folder_not_its_batching(tmp_path: Path) -> None:
    """The in-process backend: its resolved folder is its server; batching and the
    prefix cache change speed only. (``device`` also sets the dtype: keyed, but
    there is only a CPU to show it on here.)"""
    pytest.importorskip("transformers")
    from judgegraph.backends import TransformersBackend
    from judgegraph.tiny_model import build_tiny_model

    corpus = [f"{i} plus {i} is {2 * i}" for i in range(200)]
    a = build_tiny_model(tmp_path / "a", hidden_size=32, num_layers=1, num_heads=1, vocab_size=300, corpus=corpus)
    b = shutil.copytree(a, tmp_path / "b")
    names = {p.name for p in _params(TransformersBackend)}
    assert set(TransformersBackend.IDENTITY_EXCLUDED) <= names, "stale entries in IDENTITY_EXCLUDED"
    assert names - set(TransformersBackend.IDENTITY_EXCLUDED) == {"model_path", "device"}
    base = backend_identity(TransformersBackend(a, device="cpu"))
    assert backend_identity(TransformersBackend(b, device="cpu")) != base
    from judgegraph.types import Pricing

    others: dict[str, Any] = {
        "max_batch_size": 2,
        "batch_wait_s": 0.5,
        "max_padding": None,
        "prefix_cache": False,
        "pricing": Pricing(input_per_mtok=1.0, output_per_mtok=2.0),
    }
    for name in TransformersBackend.IDENTITY_EXCLUDED:
        assert backend_identity(TransformersBackend(a, device="cpu", **{name: others[name]})) == base, name
