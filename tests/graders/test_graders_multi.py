"""multi graders: the documented shape combines its graders' scores by its
formula; the formula evaluator runs arithmetic only, refusing any other AST
node by name (never eval)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgegraph import OpenAIBackend, Status
from judgegraph.graders import FormulaError, GraderConfigError, MultiGrader, compile_formula, create_grader
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply


def _check(field: str, operation: str = "eq") -> dict[str, Any]:
    return {
        "type": "string_check",
        "name": f"{field}_grader",
        "input": f"{{{{sample.output_json.{field}}}}}",
        "reference": f"{{{{item.{field}}}}}",
        "operation": operation,
    }


MULTI: dict[str, Any] = {
    "type": "multi",
    "name": "contact",
    "graders": {"name": _check("name", "ilike"), "email": _check("email"), "phone": _check("phone")},
    "calculate_output": "(0.5 * name + 0.5 * email + phone) / 2",
}
ITEM = {"name": "Ada Lovelace", "email": "ada@example.com", "phone": "555-0100"}


def _sample(**fields: str) -> dict[str, Any]:
    import json

    return {"output_text": json.dumps(fields)}


async def test_multi_combines_its_graders_by_the_formula() -> None:
    grader = create_grader(MULTI)
    assert isinstance(grader, MultiGrader)
    r = await grader.ajudge({"item": ITEM, "sample": _sample(name="ADA LOVELACE", email="ada@example.com", phone="x")})
    assert r.status is Status.OK
    assert r.score == pytest.approx((0.5 + 0.5 + 0.0) / 2)
    assert {k: s.score for k, s in r.sub_results.items()} == {"name": 1.0, "email": 1.0, "phone": 0.0}
    assert r.sub_results["email"].grader == "email_grader" and r.passed is None


async def test_a_failed_grader_fails_the_multi_grade() -> None:
    grader = create_grader({**MULTI, "graders": {**MULTI["graders"], "phone": _PY}}, allow_python=True)
    r = await grader.ajudge({"item": ITEM, "sample": _sample(name="Ada Lovelace", email="a", phone="b")})
    assert r.status is Status.ERROR and r.score is None
    assert "phone: [error] grade raised ZeroDivisionError" in (r.reason or "")
    assert r.sub_results["name"].score == 1.0


_PY = {"type": "python", "source": "def grade(sample, item):\n    return 1 / 0\n"}


async def test_a_formula_with_no_finite_value_is_a_failed_grade() -> None:
    grader = create_grader({**MULTI, "calculate_output": "name / phone"})
    r = await grader.ajudge({"item": ITEM, "sample": _sample(name="Ada Lovelace", email="a", phone="b")})
    assert r.status is Status.ERROR and r.score is None and "float division by zero" in (r.reason or "")


@pytest.mark.parametrize(
    ("formula", "named"),
    [
        ("name + mail", r"'mail' is not one of the graders \(email, name, phone\)"),
        ("__import__('os').system('true')", r"'Attribute' is not an allowed function"),
        ("name.real", r"Attribute is not allowed"),
        ("[name][0]", r"Subscript is not allowed"),
        ("name if email else phone", r"IfExp is not allowed"),
        ("name > email", r"Compare is not allowed"),
        ("'1' + name", r"'1' is not allowed \(numbers only\)"),
        ("max(name, key=email)", r"max\(\) takes plain arguments only"),
        ("sqrt(name, email)", r"sqrt\(\) takes 1 argument"),
        ("name // email", r"FloorDiv is not allowed"),
        ("(lambda: 1)()", r"'Lambda' is not an allowed function"),
        ("name +", r"is not a formula"),
    ],
)
def test_formulas_outside_the_whitelist_are_refused_at_load(formula: str, named: str) -> None:
    with pytest.raises(GraderConfigError, match="contact: calculate_output.*" + named):
        create_grader({**MULTI, "calculate_output": formula})


def test_openai_power_binds_tighter_than_times_and_the_functions() -> None:
    assert compile_formula("2 * a ^ 2 + 1", {"a"})({"a": 3.0}) == 19.0  # not 2 * 3 XOR 3, nor (2 * 3) ^ 2 + 1
    f = compile_formula(
        "2 ^ a + max(a, b, 0.25) - abs(-b) + floor(1.5) + ceil(0.2) + sqrt(4) + log(exp(1))", {"a", "b"}
    )
    assert f({"a": 3.0, "b": 0.5}) == pytest.approx(8 + 3 - 0.5 + 1 + 1 + 2 + 1)
    with pytest.raises(FormulaError, match="math domain error"):
        compile_formula("(0 - a) ^ 0.5", {"a"})({"a": 8.0})
    with pytest.raises(FormulaError, match="no score for"):
        compile_formula("a", {"a"})({})


NAMES = ("a", "b", "c")
_leaf = st.one_of(st.sampled_from(NAMES), st.integers(0, 9).map(str), st.sampled_from(["0.5", "1.25"]))


def _expr(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*", "/"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        children.map(lambda x: f"-{x}"),
        st.tuples(st.sampled_from(["min", "max"]), children, children).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        children.map(lambda x: f"abs({x})"),
    )


FORMULAS = st.recursive(_leaf, _expr, max_leaves=12)
SCORES = st.fixed_dictionaries({n: st.floats(0, 1) for n in NAMES})


@given(FORMULAS, SCORES)
def test_allowed_formulas_compute_what_python_would(formula: str, scores: dict[str, float]) -> None:
    f = compile_formula(formula, set(NAMES))
    try:
        # The reference: Python's own arithmetic on the same text (a test-only oracle).
        want = float(eval(formula, {"__builtins__": {}, "min": min, "max": max, "abs": abs}, dict(scores)))
    except ZeroDivisionError:
        with pytest.raises(FormulaError):
            f(scores)
        return
    if not math.isfinite(want):
        with pytest.raises(FormulaError):
            f(scores)
        return
    assert f(scores) == pytest.approx(want, rel=1e-9, abs=1e-12)


_FORBIDDEN = st.sampled_from(
    [
        "a.__class__",
        "a[0]",
        "(a, b)",
        "[a]",
        "{a: b}",
        "{a}",
        "a < b",
        "a and b",
        "not a",
        "a if b else c",
        "lambda: a",
        "'x'",
        "True",
        "None",
        "open('f')",
        "getattr(a, 'x')",
        "a // b",
        "a % b",
        "a << b",
        "a @ b",
        "~a",
        "[x for x in a]",
        "(x := a)",
        "f'{a}'",
        "d",
        "min(*a)",
    ]
)


@given(FORMULAS, _FORBIDDEN, st.booleans())
def test_any_forbidden_node_anywhere_is_refused(formula: str, bad: str, left: bool) -> None:
    text = f"({bad}) + {formula}" if left else f"{formula} * max(a, ({bad}))"
    with pytest.raises(FormulaError):
        compile_formula(text, set(NAMES))


SEEN: list[LoopbackRequest] = []


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    def reply(req: LoopbackRequest) -> Reply:
        SEEN.append(req)
        return Reply("Good. [RESULT] 8")

    with LoopbackServer(reply) as s:
        yield s


async def test_a_multi_grader_with_a_model_grader_runs_it_on_the_backend(server: LoopbackServer) -> None:
    score_model = {
        "type": "score_model",
        "name": "quality",
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "Grade this from 0 to 10: {{sample.output_text}}"}],
        "range": [0, 10],
    }
    config = {
        "type": "multi",
        "graders": {"exact": _check_text(), "quality": score_model},
        "calculate_output": "0.5 * exact + 0.5 * quality / 10",
    }
    backend = OpenAIBackend("gpt-4o", base_url=server.url + "/v1", api_key="x", structured_output=False)
    grader = create_grader(config, backend=backend)
    r = await grader.ajudge({"item": {"answer": "Paris"}, "sample": {"output_text": "Paris"}})
    assert r.status is Status.OK, r.reason
    assert r.score == pytest.approx(0.5 + 0.5 * 0.8)
    assert r.sub_results["quality"].provenance is not None
    # A backend given per call reaches the model grader, and only it.
    SEEN.clear()
    r = await create_grader(config, backend=backend).ajudge(
        {"item": {"answer": "Rome"}, "sample": {"output_text": "Paris"}}, backend=backend
    )
    assert r.score == pytest.approx(0.4) and len(SEEN) == 1


def _check_text() -> dict[str, Any]:
    return {
        "type": "string_check",
        "input": "{{sample.output_text}}",
        "reference": "{{item.answer}}",
        "operation": "eq",
    }


async def test_a_multi_grader_without_model_graders_takes_no_backend(server: LoopbackServer) -> None:
    backend = OpenAIBackend("gpt-4o", base_url=server.url + "/v1", api_key="x")
    grader = create_grader(MULTI)
    with pytest.raises(TypeError, match="takes no backend="):
        await grader.ajudge({"item": ITEM, "sample": _sample(name="x", email="y", phone="z")}, backend=backend)
