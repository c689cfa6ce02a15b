"""A JSON verdict with a key given twice is ambiguous, and refused.

``{"score": 5, "score": 1}`` used to be read as 1 (Python's json keeps the
last value), while the text parser refuses two verdicts. The class: every
JSON the library reads from a model refuses a duplicate key at any depth, as
unparsed with a reason, for every verdict kind; so do an agent's tool-call
arguments given as JSON text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import JudgeInputError, PointwiseJudge, ScriptedBackend, Status
from judgegraph.judges import ParseError, TrajectoryJudge, parse_output


def test_a_score_given_twice_is_unparsed_not_the_last_one() -> None:
    with pytest.raises(ParseError, match="duplicate key 'score'"):
        parse_output('{"score": 5, "score": 1}', kind="score", scale=(1, 5), structured=True)


async def test_a_structured_judge_marks_a_duplicate_key_verdict_unparsed() -> None:
    backend = ScriptedBackend(lambda r: '{"rationale": "ok", "score": 5, "score": 1}', structured_output=True)
    verdict = await PointwiseJudge(backend, repair=False).ajudge({"instruction": "q", "response": "a"})
    assert verdict.status is Status.UNPARSED and verdict.score is None
    assert "duplicate key 'score'" in (verdict.reason or "")


# ---------------------------------------------------------------- the class

_KINDS: dict[str, dict[str, Any]] = {
    "score": {"score": 3},
    "two_scores": {"score_a": 2, "score_b": 4},
    "choice": {"winner": "A"},
    "label": {"label": "yes"},
}
_KEYS = st.sampled_from(["score", "score_a", "winner", "label", "rationale", "feedback", "x", "note"])
_SCALARS = st.one_of(st.integers(1, 5), st.sampled_from(["A", "yes", "fine", ""]), st.booleans(), st.none())


def _obj(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"


@st.composite
def _with_duplicate(draw: st.DrawFn, kind: str) -> str:
    """A verdict object of ``kind`` with one key written twice in some object
    at some depth: the top level, or an object nested in objects and lists."""
    key = draw(_KEYS)
    first, second = draw(_SCALARS), draw(_SCALARS)
    dup = [(key, json.dumps(first))]
    inner_rest = [(k, json.dumps(v)) for k, v in draw(st.dictionaries(_KEYS, _SCALARS, max_size=2)).items() if k != key]
    where = draw(st.integers(0, len(inner_rest)))
    pairs = [*inner_rest[:where], *dup, *inner_rest[where:], (key, json.dumps(second))]
    text = _obj(pairs)
    for wrap in draw(st.lists(st.sampled_from(["object", "list"]), max_size=3)):
        text = "[" + text + "]" if wrap == "list" else _obj([(draw(_KEYS), text)])
    top = [(k, json.dumps(v)) for k, v in _KINDS[kind].items()]
    if text.startswith("{") and draw(st.booleans()) and not any(k == key for k, _ in top):
        # The duplicate at the top level, beside the verdict.
        return _obj([*top, *pairs[:-1], pairs[-1]])
    return _obj([*top, ("detail", text)])


@settings(max_examples=100)
@given(data=st.data(), kind=st.sampled_from(sorted(_KINDS)), fenced=st.booleans())
def test_a_duplicate_key_at_any_depth_is_refused_for_every_kind(data: st.DataObject, kind: str, fenced: bool) -> None:
    raw = data.draw(_with_duplicate(kind))
    if fenced:
        raw = f"```json\n{raw}\n```"
    with pytest.raises(ParseError, match="duplicate key"):
        parse_output(raw, kind=kind, scale=(1, 5), structured=True, labels=("yes", "no"))  # type: ignore[arg-type]


@settings(max_examples=50)
@given(kind=st.sampled_from(sorted(_KINDS)), extra=st.dictionaries(st.sampled_from(["rationale", "x"]), _SCALARS))
def test_the_same_object_without_a_duplicate_still_parses(kind: str, extra: dict[str, Any]) -> None:
    """The refusal is for the duplicate only: a nested object with distinct keys parses."""
    raw = json.dumps({**_KINDS[kind], "detail": [{"a": 1, "b": {"a": 2}}], **extra})
    assert parse_output(raw, kind=kind, scale=(1, 5), structured=True, labels=("yes", "no")).value  # type: ignore[arg-type]


@settings(max_examples=30)
@given(key=st.sampled_from(["city", "units", "q"]), depth=st.integers(0, 2))
async def test_tool_call_arguments_with_a_duplicate_key_are_refused_by_place(key: str, depth: int) -> None:
    args = f'{{"{key}": "Paris", "{key}": "Rome"}}'
    for _ in range(depth):
        args = f'{{"nested": {args}}}'
    run = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": args}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]
    backend = ScriptedBackend(lambda r: "[RESULT] 5")
    with pytest.raises(JudgeInputError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.arguments: .*duplicate key"):
        await TrajectoryJudge(backend).ajudge({"messages": run})
    assert backend.calls == []
