"""The in-process backend on a tiny model built offline."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from judgegraph import Message, PairwiseJudge, PointwiseJudge, Status, TransformersBackend
from judgegraph._templates import generic_rubric
from judgegraph.backends import GenerateRequest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def backend(format_model: Path) -> TransformersBackend:
    return TransformersBackend(format_model, max_batch_size=8, batch_wait_s=0.02)


@pytest.mark.timing
async def test_score_distribution_matches_the_model_logits(backend: TransformersBackend) -> None:
    judge = PointwiseJudge(backend, max_tokens=12)
    result = await judge.ajudge({"instruction": "Add 2 and 2.", "response": "4"})
    assert result.status is Status.OK, result.reason
    assert result.distribution is not None and result.confidence is not None
    assert result.score == max(result.distribution, key=lambda k: result.distribution[k])  # type: ignore[index]

    # Recompute independently: one forward pass over prompt + output up to the
    # score, softmax at the score position, restricted to the digits 1-5.
    tok = backend.tokenizer
    fields = {"instruction": "Add 2 and 2.", "response": "4", "rubric_text": generic_rubric((1, 5))}
    request = judge.template.render(fields, scale=(1, 5), structured=False)
    msgs = [{"role": m.role, "content": m.content} for m in request]
    prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert result.raw_text is not None
    prefix = result.raw_text[: result.raw_text.rindex(str(result.score))]
    ids = tok(prompt + prefix, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logits = backend._model(ids).logits[0, -1]
    probs = logits.float().softmax(-1)
    digit_ids = {d: tok.convert_tokens_to_ids(str(d)) for d in range(1, 6)}
    mass = {d: float(probs[i]) for d, i in digit_ids.items()}
    total = sum(mass.values())
    expected = {d: p / total for d, p in mass.items()}
    # Two paths to the same probabilities (generation's scores vs. this one forward pass) agree
    # to about 1e-6 in float32; 0.02 is far wider than any kernel's rounding, and still tells a
    # wrong position or a missing renormalisation (each off by far more) apart.
    for d, p in expected.items():
        assert result.distribution.get(d, 0.0) == pytest.approx(p, abs=0.02)


@pytest.mark.timing  # gathers concurrent calls into batches
async def test_concurrent_calls_are_batched(backend: TransformersBackend) -> None:
    before = backend.batches_run
    requests = [
        GenerateRequest(messages=(Message(role="user", content=f"question {i}"),), max_tokens=4) for i in range(6)
    ]
    results = await asyncio.gather(*(backend.generate(r) for r in requests))
    assert len(results) == 6
    assert backend.batches_run - before < 6  # gathered into fewer forward passes
    assert all(r.usage.completion_tokens <= 4 for r in results)


@pytest.fixture(scope="module")
def unsplit(format_model: Path) -> TransformersBackend:
    """Never splits a gathered batch by length: every prompt in it is padded."""
    return TransformersBackend(format_model, max_batch_size=8, batch_wait_s=0.2, max_padding=None)


@pytest.fixture(scope="module")
def split(format_model: Path) -> TransformersBackend:
    return TransformersBackend(format_model, max_batch_size=8, batch_wait_s=0.2, max_padding=0.25)


def _ask(content: str) -> GenerateRequest:
    return GenerateRequest(messages=(Message(role="user", content=content),), max_tokens=6)


@pytest.mark.timing  # gathers concurrent calls into one batch
async def test_batched_output_equals_single_output(unsplit: TransformersBackend) -> None:
    # Left padding in a batch must not change greedy outputs.
    req, long = _ask("short"), _ask("a much longer prompt " * 8)
    alone = await unsplit.generate(req)
    calls = unsplit.generate_calls
    together = await asyncio.gather(unsplit.generate(req), unsplit.generate(long))
    assert unsplit.generate_calls - calls == 1  # one padded call: the padding was exercised
    assert together[0].text == alone.text


@pytest.mark.timing  # gathers concurrent calls into one batch
async def test_mixed_lengths_run_as_separate_calls_in_request_order(split: TransformersBackend) -> None:
    reqs = [_ask("short"), _ask("a much longer prompt " * 8), _ask("tiny"), _ask("a much longer prompt " * 8 + "!")]
    alone = [await split.generate(r) for r in reqs]
    batches, calls = split.batches_run, split.generate_calls
    together = await asyncio.gather(*(split.generate(r) for r in reqs))
    assert split.batches_run - batches == 1  # gathered as one batch ...
    assert split.generate_calls - calls == 2  # ... run as a short call and a long one
    assert [r.text for r in together] == [r.text for r in alone]  # each caller gets its own answer
    assert [r.usage.prompt_tokens for r in together] == [r.usage.prompt_tokens for r in alone]


@pytest.mark.timing
def test_grouping_by_length(split: TransformersBackend, unsplit: TransformersBackend) -> None:
    assert split._groups([10, 100, 11, 10]) == [[0, 3, 2], [1]]
    assert split._groups([50, 52, 49, 51]) == [[2, 0, 3, 1]]  # little padding: one call
    assert split._groups([7]) == [[0]]
    assert unsplit._groups([10, 100, 11]) == [[0, 1, 2]]


def test_negative_max_padding_is_refused(format_model: Path) -> None:
    with pytest.raises(ValueError, match="max_padding"):
        TransformersBackend(format_model, max_padding=-0.1)


@pytest.mark.timing
async def test_pairwise_on_the_tiny_model_reports_status(backend: TransformersBackend) -> None:
    # The tiny model was only taught the pointwise format: pairwise outputs are
    # not verdicts, and the judge must say so rather than invent a winner.
    v = await PairwiseJudge(backend, template="pairwise-choice", max_tokens=8).ajudge(
        {"instruction": "q", "response_a": "x", "response_b": "y"}
    )
    assert v.status is Status.UNPARSED
    assert v.winner is None and v.reason
