"""Score distributions on scales whose values span several tokens ("10").

The top-k reader works on the token logprobs an API returns; the exact one
(TransformersBackend) scores every candidate's full token sequence and is
checked here against a brute-force sum over the tiny model's own logits.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from judgegraph import Message, PointwiseJudge, Status
from judgegraph._parsing import parse_output
from judgegraph._score_distribution import pair_winner_distribution, second_value_offset, topk_distribution
from judgegraph.backends import GenerateRequest
from judgegraph.types import TokenLogprob


def _lp(p: float) -> float:
    return math.log(p)


def _tokens(*rows: tuple[str, float, tuple[tuple[str, float], ...]]) -> list[TokenLogprob]:
    return [TokenLogprob(t, _lp(p), tuple((a, _lp(q)) for a, q in alts)) for t, p, alts in rows]


def test_a_written_ten_splits_the_mass_of_its_first_digit() -> None:
    # "[RESULT] 10": the model wrote "1" then "0"; after "1", P("0") = 0.75.
    text = "Good. [RESULT] 10"
    toks = _tokens(
        ("Good. [RESULT]", 1.0, ()),
        (" ", 1.0, ()),
        ("1", 0.6, (("1", 0.6), ("9", 0.3), ("8", 0.1))),
        ("0", 0.75, (("0", 0.75), ("<|im_end|>", 0.2), ("5", 0.05))),
    )
    parsed = parse_output(text, kind="score", scale=(1, 10))
    dist = topk_distribution(toks, parsed.offset, kind="score", scale=(1, 10))
    assert dist is not None
    # 10: 0.6 * 0.75 (then the output ends); 1: 0.6 * P(no digit after "1") = 0.6 * 0.2;
    # "15" is off the scale and dropped; 9 and 8 are taken as whole.
    raw = {10: 0.6 * 0.75, 1: 0.6 * 0.2, 9: 0.3, 8: 0.1}
    total = sum(raw.values())
    assert dist == pytest.approx({k: v / total for k, v in raw.items()})
    assert max(dist, key=lambda k: dist[k]) == 10


def test_a_written_single_digit_reads_an_unwritten_one_as_the_score_one() -> None:
    text = "[RESULT] 8"
    toks = _tokens(("[RESULT]", 1.0, ()), (" 8", 0.7, ((" 8", 0.7), (" 1", 0.2), (" 7", 0.1))))
    parsed = parse_output(text, kind="score", scale=(1, 10))
    dist = topk_distribution(toks, parsed.offset, kind="score", scale=(1, 10))
    # Whether " 1" would have gone on to "10" was never observed: it counts as 1.
    assert dist == pytest.approx({1: 0.2, 7: 0.1, 8: 0.7})


def test_one_token_values_of_an_api_tokenizer_are_read_directly() -> None:
    # tiktoken-style vocabularies hold "10" as one token.
    text = "[RESULT] 10"
    toks = _tokens(("[RESULT]", 1.0, ()), (" 10", 0.5, ((" 10", 0.5), (" 9", 0.4), (" 1", 0.1))))
    dist = topk_distribution(toks, parse_output(text, kind="score", scale=(1, 10)).offset, kind="score", scale=(1, 10))
    assert dist == pytest.approx({1: 0.1, 9: 0.4, 10: 0.5})


def test_a_pair_of_scores_gets_both_distributions_and_a_winner_probability() -> None:
    text = "[SCORES] 9 10"
    toks = _tokens(
        ("[SCORES]", 1.0, ()),
        (" 9", 0.8, ((" 9", 0.8), (" 8", 0.2))),
        (" 1", 0.9, ((" 1", 0.9), (" 9", 0.1))),
        ("0", 1.0, (("0", 1.0),)),
    )
    parsed = parse_output(text, kind="two_scores", scale=(1, 10))
    assert parsed.value == (9, 10)
    second_at = second_value_offset(text, parsed.offset or 0)
    assert second_at is not None and text[second_at:] == "10"
    a = topk_distribution(toks, parsed.offset, kind="two_scores", scale=(1, 10))
    b = topk_distribution(toks, second_at, kind="two_scores", scale=(1, 10))
    assert a == pytest.approx({8: 0.2, 9: 0.8})
    assert b == pytest.approx({9: 0.1, 10: 0.9})
    assert a is not None and b is not None
    winner, ea, eb = pair_winner_distribution(a, b)
    assert winner["B"] == pytest.approx(0.9 + 0.2 * 0.1)  # b=10 beats all; b=9 beats a=8
    assert winner["tie"] == pytest.approx(0.8 * 0.1)
    assert winner["A"] == pytest.approx(0.0)
    assert ea == pytest.approx(8.8) and eb == pytest.approx(9.9)


def test_no_admissible_alternative_gives_no_distribution() -> None:
    toks = _tokens(("[RESULT]", 1.0, ()), (" x", 1.0, ((" x", 1.0),)))
    assert topk_distribution(toks, 8, kind="score", scale=(1, 10)) is None
    assert topk_distribution(None, 0, kind="score", scale=(1, 10)) is None


# ------------------------------------------------------------ exact, in-process


@pytest.fixture(scope="module")
def tiny_backend(tiny_model: Path):  # type: ignore[no-untyped-def]
    from judgegraph import TransformersBackend

    return TransformersBackend(tiny_model)


async def test_exact_value_logprobs_match_a_brute_force_over_the_logits(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    import torch

    b = tiny_backend
    req = GenerateRequest((Message(role="user", content="grade 12 on 1-10"),), max_tokens=4)
    prefix = "Fine. [RESULT] "
    values = [str(v) for v in range(1, 11)]
    got = await b.avalue_logprobs(req, prefix, values)
    context = b._prompt(req) + prefix
    digit_start = [i for i in range(len(b.tokenizer)) if b.tokenizer.decode([i])[:1].isdigit()]
    for v, lp in zip(values, got, strict=True):
        # Brute force: full forward over prompt + value, no cache.
        ids = b.tokenizer(context + v)["input_ids"]
        n_ctx = len(b.tokenizer(context)["input_ids"])
        with torch.inference_mode():
            logits = b._model(input_ids=torch.tensor([ids])).logits[0].float().log_softmax(-1)
        want = sum(float(logits[j - 1, ids[j]]) for j in range(n_ctx, len(ids)))
        want += math.log(1 - float(logits[-1].exp()[digit_start].sum()))
        # Two paths to one float32 number (the backend's cached context vs. a full forward
        # here): they differ by under 1e-6 (4.6e-7 measured, 9.7e-7 with ATEN_CPU_CAPABILITY=
        # default, on log-probs near -6); 1e-4 leaves two orders of magnitude for other kernels.
        assert lp == pytest.approx(want, abs=1e-4), v
    # A distribution over the whole scale: "1" and "10" are told apart.
    assert got[0] != got[9]


async def test_a_ten_point_judge_on_the_format_model_gets_an_exact_distribution(format_model: Path) -> None:
    from judgegraph import TransformersBackend

    backend = TransformersBackend(format_model)
    judge = PointwiseJudge(backend, scale=(1, 10), max_tokens=16)
    results = await judge.ajudge_many(
        [{"instruction": f"question {q}", "response": f"answer {a}"} for q, a in [(12, 3), (5, 5)]]
    )
    for r in results:
        assert not isinstance(r, Exception)
        assert r.status is Status.OK, (r.reason, r.raw_text)
        assert r.distribution is not None and set(r.distribution) == set(range(1, 11))  # every value scored
        assert math.fsum(r.distribution.values()) == pytest.approx(1.0)
        assert r.expected_score == pytest.approx(sum(k * p for k, p in r.distribution.items()))
        assert r.confidence == pytest.approx(r.distribution[r.score])


async def test_a_pair_of_scores_is_scored_exactly_in_process(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    from judgegraph.judges._distribution import adistributions

    req = GenerateRequest((Message(role="user", content="score both"),), logprobs=True, top_logprobs=5)
    raw = "Both fine. [SCORES] 8 10"
    parsed = parse_output(raw, kind="two_scores", scale=(1, 10))
    got = await adistributions(
        tiny_backend, req, raw, None, parsed.offset, kind="two_scores", scale=(1, 10), structured=False
    )
    assert got.method == "exact" and got.first is not None and got.second is not None
    for dist in (got.first, got.second):
        assert set(dist) == set(range(1, 11)) and math.fsum(dist.values()) == pytest.approx(1.0)
    # Score B is read after the written "8 ": its context differs from A's.
    direct = await tiny_backend.avalue_logprobs(req, "Both fine. [SCORES] 8 ", [str(v) for v in range(1, 11)])
    total = math.fsum(math.exp(x) for x in direct)
    assert got.second == pytest.approx({v: math.exp(x) / total for v, x in zip(range(1, 11), direct, strict=True)})
    assert got.first != pytest.approx(got.second)
    # Without logprobs requested the judge asked for nothing: no distribution work.
    plain = GenerateRequest(req.messages)
    none = await adistributions(tiny_backend, plain, raw, None, parsed.offset, kind="two_scores", scale=(1, 10))
    assert none.first is None and none.method is None
