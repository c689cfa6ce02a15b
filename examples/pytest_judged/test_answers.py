"""An app's answers, checked by a judge; CI replays the recorded verdicts."""

import pytest

ANSWERS = {
    "What is the capital of France?": "Paris is the capital of France.",
    "What is 12 times 3?": "12 times 3 is 36.",
}


def answer(question: str) -> str:
    """Stands in for your app: a chain, an agent, a graph."""
    return ANSWERS[question]


def test_capital_is_right(judged):
    q = "What is the capital of France?"
    judged.assert_score(q, answer(q), reference="Paris")


@pytest.mark.judge(threshold=5, repeats=3, aggregate="majority")
def test_arithmetic_is_excellent(judged):
    q = "What is 12 times 3?"
    check = judged.assert_score(q, answer(q))
    assert check.value is not None  # the mean of the three scores


def test_new_answer_not_worse_than_baseline(judged):
    q = "What is the capital of France?"
    judged.assert_not_worse(q, answer(q), baseline="I believe it is Lyon.")


@pytest.mark.asyncio
async def test_async_app(judged):
    q = "What is 12 times 3?"
    await judged.aassert_score(q, answer(q))
