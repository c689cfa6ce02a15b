"""Loading OpenAI Evals grader configs: the documented shapes load, from a
dict, a JSON string or a file; every field judgegraph cannot honour is refused
with its name; template references are checked at load and filled per item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgegraph import JudgeInputError
from judgegraph.graders import (
    GraderConfigError,
    GraderInput,
    StringCheckGrader,
    create_grader,
    parse_grader_config,
)

STRING_CHECK: dict[str, Any] = {
    "type": "string_check",
    "name": "Match output to human label",
    "input": "{{ sample.output_text }}",
    "reference": "{{ item.label }}",
    "operation": "eq",
}

SCORE_MODEL: dict[str, Any] = {
    "type": "score_model",
    "name": "Numerical Rating",
    "model": "o4-mini-2025-04-16",
    "input": [
        {"role": "system", "content": "You are an expert grader. Rate the answer from 1 to 7."},
        {"role": "user", "content": "Reference: {{item.reference_answer}}. Model answer: {{sample.output_text}}"},
    ],
    "range": [1, 7],
    "pass_threshold": 5,
    "sampling_params": {"seed": 42, "temperature": 1, "max_completions_tokens": 32768, "reasoning_effort": "medium"},
}


def test_a_config_loads_from_a_dict_a_json_string_and_a_file(tmp_path: Path) -> None:
    path = tmp_path / "grader.json"
    path.write_text(json.dumps(STRING_CHECK))
    for source in (STRING_CHECK, json.dumps(STRING_CHECK), str(path), path):
        grader = create_grader(source)
        assert isinstance(grader, StringCheckGrader)
        assert grader.name == "Match output to human label"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"case_sensitive": True}, "case_sensitive: unsupported field"),
        ({"operation": "regex"}, "operation:"),
        ({"type": "code_check"}, "type: not a grader type"),
    ],
)
def test_string_check_refuses_what_it_cannot_run_by_name(change: dict[str, Any], named: str) -> None:
    with pytest.raises(GraderConfigError, match=named):
        create_grader({**STRING_CHECK, **change})


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"sampling_params": {"top_k": 5}}, r"sampling_params\.top_k: unsupported field"),
        ({"sampling_params": {"top_p": 0.9}}, r"sampling_params\.top_p: not supported"),
        ({"range": [0, 0.5]}, r"range: judgegraph scores on whole numbers"),
        ({"range": [5, 1]}, r"range: must be \[low, high\]"),
        ({"pass_threshold": float("nan")}, r"pass_threshold: must be a finite number"),
        ({"labels": ["a", "b"]}, r"labels: unsupported field"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]},
            r"input\[0\]\.content: part 0 is input_image, which is not supported",
        ),
        ({"input": [{"role": "system", "content": "Grade it."}]}, r"input: needs at least one user message"),
        (
            {"input": [{"role": "user", "content": "{{sample.output_tools}}"}]},
            r"input\[0\]\.content: \{\{sample\.output_tools\}\}: the sample has output_text and output_json only",
        ),
        (
            {"input": [{"role": "user", "content": "{{ row.answer }}"}]},
            r"input\[0\]\.content: \{\{row\.answer\}\} is not a template reference",
        ),
    ],
)
def test_score_model_refuses_what_it_cannot_run_by_name(change: dict[str, Any], named: str) -> None:
    with pytest.raises(GraderConfigError, match=named) as err:
        create_grader({**SCORE_MODEL, **change}, backend="vllm:judge@http://127.0.0.1:9/v1")
    assert str(err.value).startswith("Numerical Rating:")


def test_a_multi_graders_nested_field_is_named_with_its_key() -> None:
    config = {
        "type": "multi",
        "name": "combo",
        "graders": {"exact": {**STRING_CHECK, "weight": 2}},
        "calculate_output": "exact",
    }
    with pytest.raises(GraderConfigError, match=r"combo: graders\.exact\.weight: unsupported field"):
        create_grader(config)


def test_python_image_tag_is_refused_by_name() -> None:
    config = {"type": "python", "name": "py", "source": "def grade(s, i):\n    return 1.0\n", "image_tag": "2025-05-08"}
    with pytest.raises(GraderConfigError, match=r"image_tag: not supported"):
        create_grader(config, allow_python=True)


def test_not_json_and_not_an_object_are_refused(tmp_path: Path) -> None:
    with pytest.raises(GraderConfigError, match="not JSON"):
        parse_grader_config('{"type": ')
    with pytest.raises(GraderConfigError, match="cannot read"):
        parse_grader_config(str(tmp_path / "missing.json"))
    with pytest.raises(GraderConfigError, match="JSON object"):
        parse_grader_config([STRING_CHECK])  # type: ignore[arg-type]


async def test_references_fill_from_item_and_sample_and_a_missing_one_is_named() -> None:
    config = {
        **STRING_CHECK,
        "input": "{{sample.output_json.answer.city}}",
        "reference": "{{ item.cities[1] }}",
    }
    grader = create_grader(config)
    sample = {"output_text": json.dumps({"answer": {"city": "Paris"}})}
    r = await grader.ajudge({"item": {"cities": ["Rome", "Paris"]}, "sample": sample})
    assert (r.score, r.passed) == (1.0, True)
    with pytest.raises(JudgeInputError, match=r"item\.cities\[1\]: the grader refers to it"):
        await grader.ajudge({"item": {"cities": ["Rome"]}, "sample": sample})
    no_json = {"item": {"cities": ["Rome", "Paris"]}, "sample": {"output_text": "Paris"}}
    with pytest.raises(JudgeInputError, match=r"sample\.output_json: the grader refers to it, and the input holds"):
        await grader.ajudge(no_json)


def test_a_sample_that_is_json_gets_output_json() -> None:
    assert GraderInput.model_validate({"sample": {"output_text": '{"a": 1}'}}).sample.output_json == {"a": 1}
    assert GraderInput.model_validate({"sample": {"output_text": "plain"}}).sample.output_json is None


def test_a_row_missing_a_reference_fails_alone_in_a_batch() -> None:
    grader = create_grader(STRING_CHECK)
    rows = [
        {"item": {"label": "yes"}, "sample": {"output_text": "yes"}},
        {"item": {}, "sample": {"output_text": "yes"}},
        {"item": {"label": "yes"}, "sample": {"output_text": "no"}},
    ]
    first, missing, third = grader.judge_many(rows)
    assert isinstance(missing, JudgeInputError) and "item 1: item.label" in str(missing)
    assert not isinstance(first, JudgeInputError) and not isinstance(third, JudgeInputError)
    assert (first.passed, third.passed) == (True, False)


async def test_a_sample_whose_json_gives_a_key_twice_fills_no_output_json() -> None:
    """``{"city": "Rome", "city": "Paris"}`` says two things: a grader that
    refers into it fails naming the reference, never grading the last copy."""
    grader = create_grader({**STRING_CHECK, "input": "{{sample.output_json.answer.city}}", "reference": "Paris"})
    twice = '{"answer": {"city": "Rome", "city": "Paris"}}'
    assert GraderInput.model_validate({"sample": {"output_text": twice}}).sample.output_json is None
    with pytest.raises(JudgeInputError, match=r"sample\.output_json"):
        await grader.ajudge({"item": {}, "sample": {"output_text": twice}})


@given(
    keys=st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=4, unique=True),
    depth=st.integers(0, 3),
    dup=st.integers(0, 3),
)
def test_output_json_is_filled_exactly_when_no_object_repeats_a_key(keys: list[str], depth: int, dup: int) -> None:
    obj = ", ".join(f"{json.dumps(k)}: {n}" for n, k in enumerate(keys))
    repeated = dup < len(keys)
    if repeated:
        obj += f", {json.dumps(keys[dup])}: 99"
    text = "{" + obj + "}"
    for _ in range(depth):
        text = '{"wrap": [' + text + "]}"
    got = GraderInput.model_validate({"sample": {"output_text": text}}).sample.output_json
    assert (got is None) == repeated
    if not repeated:
        assert got == json.loads(text)
