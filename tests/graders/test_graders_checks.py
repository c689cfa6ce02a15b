"""The graders that call no model: string_check, text_similarity (each
metric that needs no network), python (only with the opt-in), from configs
shaped like OpenAI's documented examples."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgegraph import Status
from judgegraph.graders import GraderConfigError, create_grader, similarity_score, string_check

ANSWER = "Paris is the capital of France, of course."
REFERENCE = "Paris is the capital of France."


def _row(output: str, **item: Any) -> dict[str, Any]:
    return {"item": item, "sample": {"output_text": output}}


@pytest.mark.parametrize(
    ("operation", "output", "reference", "score"),
    [
        ("eq", "positive", "positive", 1.0),
        ("eq", "Positive", "positive", 0.0),
        ("ne", "negative", "positive", 1.0),
        ("like", "I think it is positive.", "positive", 1.0),
        ("like", "POSITIVE", "positive", 0.0),
        ("ilike", "POSITIVE overall", "positive", 1.0),
        ("ilike", "negative", "positive", 0.0),
    ],
)
async def test_string_check(operation: str, output: str, reference: str, score: float) -> None:
    grader = create_grader(
        {
            "type": "string_check",
            "name": "label",
            "input": "{{ sample.output_text }}",
            "reference": "{{ item.label }}",
            "operation": operation,
        }
    )
    r = await grader.ajudge(_row(output, label=reference))
    assert r.status is Status.OK
    assert (r.score, r.passed, r.pass_threshold, r.type) == (score, score == 1.0, 1.0, "string_check")


@given(st.text(max_size=20), st.text(max_size=20))
def test_eq_and_ne_are_complements_and_like_widens_eq(a: str, b: str) -> None:
    assert string_check("eq", a, b) != string_check("ne", a, b)
    assert not string_check("eq", a, b) or string_check("like", a, b)
    assert not string_check("like", a, b) or string_check("ilike", a, b)


METRICS = [
    ("fuzzy_match", "rapidfuzz"),
    ("bleu", "sacrebleu"),
    ("gleu", "nltk"),
    *((f"rouge_{n}", "rouge_score") for n in "12345l"),
]


@pytest.mark.parametrize(("metric", "module"), METRICS)
async def test_text_similarity_metric(metric: str, module: str) -> None:
    pytest.importorskip(module)
    config = {
        "type": "text_similarity",
        "name": "similar",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference_answer}}",
        "evaluation_metric": metric,
        "pass_threshold": 0.99,
    }
    grader = create_grader(config)
    same = await grader.ajudge(_row(REFERENCE, reference_answer=REFERENCE))
    other = await grader.ajudge(_row(ANSWER, reference_answer=REFERENCE))
    unrelated = await grader.ajudge(_row("zzz qqq", reference_answer=REFERENCE))
    assert same.status is other.status is unrelated.status is Status.OK
    assert same.score == pytest.approx(1.0) and same.passed is True
    assert other.score is not None and unrelated.score is not None
    assert 0.0 <= unrelated.score < other.score < 1.0
    assert other.passed is False
    assert unrelated.score == pytest.approx(0.0, abs=0.2)


def test_fuzzy_match_is_rapidfuzz_ratio() -> None:
    fuzz = pytest.importorskip("rapidfuzz.fuzz")
    assert similarity_score("fuzzy_match", ANSWER, REFERENCE) == pytest.approx(fuzz.ratio(ANSWER, REFERENCE) / 100)


def test_meteor_without_wordnet_is_refused_by_name() -> None:
    pytest.importorskip("nltk")
    from nltk.corpus import wordnet

    try:
        wordnet.ensure_loaded()
    except LookupError:
        pass
    else:
        pytest.skip("WordNet data is installed here")
    config = {"type": "text_similarity", "input": "a", "reference": "b", "evaluation_metric": "meteor"}
    with pytest.raises(GraderConfigError, match="evaluation_metric: meteor needs NLTK's WordNet"):
        create_grader(config)


async def test_cosine_needs_an_embedding_function_and_uses_it() -> None:
    config = {
        "type": "text_similarity",
        "name": "cos",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference}}",
        "evaluation_metric": "cosine",
        "pass_threshold": 0.5,
    }
    with pytest.raises(GraderConfigError, match="cos: evaluation_metric: cosine needs embeddings; pass embed="):
        create_grader(config)

    def embed(texts: list[str]) -> list[list[float]]:  # letters a and b counted: a toy embedding
        return [[t.count("a"), t.count("b")] for t in texts]

    async def aembed(texts: list[str]) -> list[list[float]]:
        return embed(texts)

    for fn in (embed, aembed):
        grader = create_grader(config, embed=fn)
        r = await grader.ajudge(_row("aa", reference="a"))
        assert (r.score, r.passed) == (pytest.approx(1.0), True)
        r = await grader.ajudge(_row("a", reference="b"))
        assert (r.score, r.passed) == (pytest.approx(0.0), False)
        r = await grader.ajudge(_row("zz", reference="b"))  # a zero vector: no cosine, and no made-up score
        assert r.status is Status.ERROR and r.score is None and "zero" in (r.reason or "")


PYTHON = {
    "type": "python",
    "name": "closeness",
    "source": (
        "import difflib\n\n"
        "def grade(sample, item) -> float:\n"
        "    output_text = sample['output_text']\n"
        "    reference_answer = item['reference_answer']\n"
        "    return difflib.SequenceMatcher(None, output_text, reference_answer).ratio()\n"
    ),
    "pass_threshold": 0.8,
}


def test_python_grader_is_refused_without_the_opt_in() -> None:
    with pytest.raises(GraderConfigError, match=r"closeness: a python grader runs the code .* allow_python=True"):
        create_grader(PYTHON)
    multi = {"type": "multi", "graders": {"p": PYTHON}, "calculate_output": "p"}
    with pytest.raises(GraderConfigError, match="allow_python=True"):
        create_grader(multi)


async def test_python_grader_runs_with_the_opt_in() -> None:
    grader = create_grader(PYTHON, allow_python=True)
    same = await grader.ajudge(_row("Paris", reference_answer="Paris"))
    far = await grader.ajudge(_row("Lyon", reference_answer="Paris"))
    assert (same.score, same.passed) == (1.0, True)
    assert far.score is not None and far.score < 0.8 and far.passed is False


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("    raise KeyError('x')", "grade raised KeyError"),
        ("    return 'high'", "grade returned 'high', not a finite number"),
        ("    return float('nan')", "grade returned nan"),
        ("    return True", "grade returned True"),
    ],
)
async def test_python_grader_failures_are_explicit(body: str, reason: str) -> None:
    config = {"type": "python", "name": "bad", "source": f"def grade(sample, item):\n{body}\n"}
    r = await create_grader(config, allow_python=True).ajudge(_row("x"))
    assert r.status is Status.ERROR and r.score is None and r.passed is None
    assert reason in (r.reason or "")


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("def grade(sample, item)\n    return 1\n", "source: "),
        ("def score(sample, item):\n    return 1\n", "source: defines no grade"),
        ("raise RuntimeError('no')\n", "source: running it raised RuntimeError"),
    ],
)
def test_python_source_problems_are_named(source: str, named: str) -> None:
    with pytest.raises(GraderConfigError, match=named):
        create_grader({"type": "python", "name": "p", "source": source}, allow_python=True)


async def test_the_grader_gets_copies_of_the_item() -> None:
    source = "def grade(sample, item):\n    item['seen'] = True\n    return 1.0\n"
    grader = create_grader({"type": "python", "source": source}, allow_python=True)
    row = _row("x", seen=False)
    await grader.ajudge(row)
    assert row["item"]["seen"] is False


def test_the_metrics_extra_is_named_when_missing() -> None:
    if importlib.util.find_spec("rapidfuzz") is not None:
        pytest.skip("rapidfuzz is installed here")
    config = {"type": "text_similarity", "input": "a", "reference": "b", "evaluation_metric": "fuzzy_match"}
    with pytest.raises(ImportError, match=r"judgegraph\[graders\]"):
        create_grader(config)
