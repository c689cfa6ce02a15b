"""The shared prompt head is computed once and reused, without changing outputs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from judgegraph import Message, PairwiseJudge, TransformersBackend
from judgegraph.backends import GenerateRequest
from judgegraph.backends._prefix_cache import PrefixCache, common_prefix

torch = pytest.importorskip("torch")

SYSTEM = "You grade answers with care and explain the grade briefly before you give it. " * 3


def _ask(question: str, *, max_tokens: int = 6) -> GenerateRequest:
    return GenerateRequest(
        messages=(Message(role="system", content=SYSTEM), Message(role="user", content=question)),
        max_tokens=max_tokens,
        logprobs=True,
        top_logprobs=2,
    )


QUESTIONS = ["short", "a somewhat longer question about sums", "what is two plus two " * 4, "why"]


@pytest.fixture(scope="module")
def cached(format_model: Path) -> TransformersBackend:
    return TransformersBackend(format_model, max_batch_size=8, batch_wait_s=0.2, max_padding=None)


@pytest.fixture(scope="module")
def plain(format_model: Path) -> TransformersBackend:
    return TransformersBackend(format_model, max_batch_size=8, batch_wait_s=0.2, max_padding=None, prefix_cache=False)


def _same(a: list[object], b: list[object]) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.text == y.text  # type: ignore[attr-defined]
        assert x.usage == y.usage  # type: ignore[attr-defined]
        for s, t in zip(x.tokens, y.tokens, strict=True):  # type: ignore[attr-defined]
            assert s.token == t.token
            # With and without the cached head are two float32 paths to one log-prob:
            # they differ by about 1e-6 (as the brute-force check in test_score_distribution
            # measures); 1e-4 leaves two orders of magnitude for other CPU kernels.
            assert s.logprob == pytest.approx(t.logprob, abs=1e-4)


@pytest.mark.timing  # gathers concurrent calls into one batch
async def test_a_batch_starts_from_its_shared_head_and_generates_the_same(
    cached: TransformersBackend, plain: TransformersBackend
) -> None:
    assert cached.prefix_cache is not None and plain.prefix_cache is None
    reqs = [_ask(q) for q in QUESTIONS]
    # Counted from here: the backend is the module's, and other tests may have used it first.
    calls, hits, saved = cached.generate_calls, cached.prefix_cache.hits, cached.prefix_cache.tokens_saved
    with_head = await asyncio.gather(*(cached.generate(r) for r in reqs))
    without = await asyncio.gather(*(plain.generate(r) for r in reqs))
    assert cached.generate_calls - calls == 1  # one gathered call, padded between head and question
    _same(list(with_head), list(without))
    assert cached.prefix_cache.hits - hits == len(reqs)
    # The head is at least the system message's tokens, each saved once per prompt.
    system_tokens = len(cached.tokenizer(SYSTEM)["input_ids"])
    assert cached.prefix_cache.tokens_saved - saved >= len(reqs) * system_tokens


@pytest.mark.timing
async def test_one_prompt_at_a_time_reuses_the_head_learnt_from_its_predecessor(format_model: Path) -> None:
    lone = TransformersBackend(format_model, max_batch_size=1, batch_wait_s=0.0)
    plain = TransformersBackend(format_model, max_batch_size=1, batch_wait_s=0.0, prefix_cache=False)
    assert lone.prefix_cache is not None
    outs, ref = [], []
    for q in QUESTIONS:
        outs.append(await lone.generate(_ask(q)))
        ref.append(await plain.generate(_ask(q)))
    _same(outs, ref)
    # The first prompt has no predecessor; every later one starts from the head.
    assert lone.prefix_cache.hits == len(QUESTIONS) - 1


@pytest.mark.timing
async def test_value_logprobs_are_unchanged_by_the_head(
    cached: TransformersBackend, plain: TransformersBackend
) -> None:
    for q in ("Grade this: 4", "Grade this other one: five"):
        a = await cached.avalue_logprobs(_ask(q), "[RESULT] ", ["1", "5", "10"])
        b = await plain.avalue_logprobs(_ask(q), "[RESULT] ", ["1", "5", "10"])
        assert a == pytest.approx(b, abs=1e-4)  # two float32 paths: see _same


@pytest.mark.timing
async def test_a_pairwise_judge_gives_the_same_verdicts(
    cached: TransformersBackend, plain: TransformersBackend
) -> None:
    items = [
        {"instruction": "Add 2 and 2.", "response_a": "4", "response_b": "5"},
        {"instruction": "Name a colour.", "response_a": "blue", "response_b": "a colour"},
        {"instruction": "Say hi.", "response_a": "hi there, friend", "response_b": "hello"},
    ]
    got = await PairwiseJudge(cached, max_tokens=8).ajudge_many(items)
    want = await PairwiseJudge(plain, max_tokens=8).ajudge_many(items)
    assert [(r.status, r.winner, r.raw_text) for r in got] == [(r.status, r.winner, r.raw_text) for r in want]


@pytest.mark.timing
async def test_a_prompt_that_is_all_head_still_gets_an_input_token(cached: TransformersBackend) -> None:
    # The same prompt twice: their common prefix is the whole prompt, but
    # generation needs at least one token of its own to continue from.
    req = _ask("the very same question")
    a, b = await asyncio.gather(cached.generate(req), cached.generate(req))
    assert a.text == b.text
    alone = await cached.generate(req)
    assert alone.text == a.text


def test_common_prefix() -> None:
    assert common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix([[5], [6]]) == 0
    assert common_prefix([[1, 2], [1, 2]]) == 2


def test_the_least_recently_used_head_is_dropped(format_model: Path) -> None:
    backend = TransformersBackend(format_model, prefix_cache=False)
    cache = PrefixCache(backend._model, device="cpu", min_tokens=4, capacity=2)
    heads = [[i] * 6 + [100 + i, 101 + i] for i in range(1, 4)]
    for h in heads:
        n, kv = cache.head_for([h, [*h[:6], 99]])
        assert n == 6 and kv is not None
    assert len(cache._entries) == 2
    assert tuple(heads[0][:6]) not in cache._entries
    # A known head is found again without building it anew.
    n, _ = cache.head_for([[*heads[2][:6], 7, 8]])
    assert n == 6


def test_a_model_whose_cache_cannot_be_repeated_runs_without_it() -> None:
    class Out:
        cache = object()  # no batch_repeat_interleave: a recurrent state, say

    class Model:
        calls = 0

        def forward(self, input_ids: object = None, cache: object = None, use_cache: bool = False) -> Out:
            Model.calls += 1
            return Out()

        __call__ = forward

    cache = PrefixCache(Model(), device="cpu", min_tokens=2)
    assert cache.head_for([[1, 2, 3, 4], [1, 2, 3, 5]]) == (0, None)
    assert not cache.usable and Model.calls == 1
    assert cache.head_for([[1, 2, 3, 4], [1, 2, 3, 5]]) == (0, None)
    assert Model.calls == 1  # not tried again
