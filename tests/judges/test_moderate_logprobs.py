"""No logprob a server sends can crash the distribution code (issue 26, item 1).

A log probability is at most 0. A server that sends +800, +inf, nan or any
other number no log probability can be must not turn a verdict whose text
parsed into an exception: the verdict is kept, its distribution is refused,
and the provenance says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import OpenAIBackend, PointwiseJudge, Status
from judgegraph._score_distribution import probability, topk_distribution, unusable_logprob
from judgegraph.backends import GenerateRequest
from judgegraph.judges._distribution import adistributions
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import Message, TokenLogprob

ITEM = {"instruction": "What is 2+2?", "response": "4"}
TEXT = "Right. [RESULT] 5"


class _BadLogprobs(LoopbackServer):
    """A loopback server whose chat completions carry the given logprob on the
    score token and on its first alternative (the server's numbers, verbatim)."""

    def __init__(self, value: float) -> None:
        super().__init__(lambda req: Reply(TEXT, token_probs={"5": 0.8, "4": 0.2}))
        self.value = value

    def _body(self, req: LoopbackRequest, reply: Reply) -> Any:
        body = super()._body(req, reply)
        content = (body["choices"][0].get("logprobs") or {}).get("content") or []
        for tok in content:
            if tok["token"].strip() == "5":
                tok["logprob"] = self.value
                tok["top_logprobs"][0]["logprob"] = self.value
        return body


@pytest.mark.timing
@pytest.mark.parametrize("value", [800.0, -1e308, math.nan, math.inf, -math.inf])
async def test_a_logprob_no_probability_has_keeps_the_parsed_verdict(value: float) -> None:
    with _BadLogprobs(value) as server:
        backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="x", structured_output=False)
        verdict = await PointwiseJudge(backend).ajudge(ITEM)
    assert verdict.status is Status.OK and verdict.score == 5  # the text parsed: the verdict stands
    assert verdict.provenance is not None
    if value <= 0:  # -1e308 and -inf are log probabilities (of ~0): the distribution is read
        assert verdict.distribution is not None and verdict.provenance.notes == ()
        assert verdict.distribution.get(5, 0.0) == pytest.approx(0.0, abs=1e-12)  # exp(-1e308) is 0
    else:
        assert verdict.distribution is None and verdict.expected_score is None
        (note,) = verdict.provenance.notes
        assert "distribution" in note and "logprob" in note and repr(value) in note


# Every float a JSON decoder can yield, the awkward ones weighted up.
_ANY_FLOAT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([709.0, 709.8, 710.0, 800.0, 1e308, -1e308, 5e-324, -5e-324, 0.0, -0.0]),
    st.floats(min_value=-50, max_value=0),
)
_TOKENS = st.sampled_from([" ", "Right", ".", " [RESULT]", " 5", " 1", "0", " 10", "4", " A", " B", "tie", "\n"])


@st.composite
def _outputs(draw: st.DrawFn) -> tuple[list[TokenLogprob], int]:
    n = draw(st.integers(min_value=1, max_value=6))
    tokens = []
    for _ in range(n):
        alts = draw(st.lists(st.tuples(_TOKENS, _ANY_FLOAT), max_size=5))
        tokens.append(TokenLogprob(draw(_TOKENS), draw(_ANY_FLOAT), tuple(alts)))
    text_len = sum(len(t.token) for t in tokens)
    return tokens, draw(st.integers(min_value=0, max_value=text_len))


@settings(max_examples=100)
@given(
    out=_outputs(),
    kind=st.sampled_from(["score", "two_scores", "choice", "choice_no_tie"]),
    hi=st.sampled_from([5, 10]),
)
def test_any_server_numbers_give_a_distribution_or_a_reason_never_an_exception(
    out: tuple[list[TokenLogprob], int], kind: Any, hi: int
) -> None:
    tokens, offset = out
    why = unusable_logprob(tokens)
    dist = topk_distribution(tokens, offset, kind=kind, scale=(1, hi))
    if dist is not None:
        # A distribution, whenever there is one, is a distribution.
        assert all(math.isfinite(p) and 0 <= p <= 1 for p in dist.values())
        assert math.fsum(dist.values()) == pytest.approx(1.0, abs=1e-9)  # renormalised: rounding only
    bad = [lp for t in tokens for lp in (t.logprob, *(a for _, a in t.top)) if not (lp <= 1e-4)]
    assert (why is None) == (not bad)
    if why is not None:
        assert dist is None and repr(bad[0]) in why


@settings(max_examples=100)
@given(lp=_ANY_FLOAT)
def test_probability_is_a_probability_or_a_clear_refusal(lp: float) -> None:
    try:
        p = probability(lp)
    except ValueError as exc:
        assert not lp <= 1e-4 and repr(lp) in str(exc)
    else:
        assert 0.0 <= p <= 1.0


class _Scorer:
    """A backend that scores continuations (as TransformersBackend does) with
    whatever numbers it is given."""

    def __init__(self, lps: list[float]) -> None:
        self.lps = lps

    async def avalue_logprobs(self, request: GenerateRequest, prefix: str, values: Sequence[str]) -> list[float]:
        return [self.lps[i % len(self.lps)] for i in range(len(values))]


@settings(max_examples=60)
@given(lps=st.lists(_ANY_FLOAT, min_size=1, max_size=5), out=_outputs())
async def test_the_exact_path_with_any_numbers_falls_back_or_reads_a_distribution(
    lps: list[float], out: tuple[list[TokenLogprob], int]
) -> None:
    tokens, _ = out
    raw = "".join(t.token for t in tokens) + " 3"
    request = GenerateRequest(messages=(Message(role="user", content="q"),), logprobs=True)
    dists = await adistributions(_Scorer(lps), request, raw, tokens, len(raw) - 1, kind="score", scale=(1, 5))
    for dist in (dists.first, dists.second):
        if dist is not None:
            assert all(math.isfinite(p) and 0 <= p <= 1 for p in dist.values())
            assert math.fsum(dist.values()) == pytest.approx(1.0, abs=1e-9)  # renormalised: rounding only
    if dists.method == "exact":  # read from the scorer's numbers: only when all were log probabilities
        assert all(lp <= 1e-4 for lp in lps)
    elif dists.method is None and dists.first is None and unusable_logprob(tokens) is not None:
        assert dists.note is not None and "logprob" in dists.note
