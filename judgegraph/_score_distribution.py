"""The probability of each admissible verdict value, on any scale.

A score such as "10" is more than one token for most tokenizers (digits are
split), so the top-k alternatives of the score's first token cannot tell 1
from 10. Two ways round that:

- **exact, in-process** (a backend that scores continuations, e.g.
  ``TransformersBackend``): each candidate value's full token sequence is
  scored after the judge's own output up to the value, times the probability
  that the number ends there (the next token does not start with a digit).
  What is left out: other, non-canonical tokenisations of the same digits, and
  a decimal point after the value (a "7.5" would be rejected by the parser
  anyway) is counted as the number ending.
- **top-k, over an API** (logprobs of the generated tokens only): the value's
  first token's alternatives give each value's first piece; a continuation is
  known only after the piece the model actually wrote. So when the model wrote
  "8" on a 1-10 scale, the mass of "1" is read as the score 1 (its possible
  "10" continuation was never observed), and after a written "1" the next
  token's alternatives split it into 1 and 10. Mass outside the top-k is
  unseen; the distribution is renormalised over what was seen.

This module reads token logprobs only; the exact path, which calls the
backend, is ``judgegraph.judges._distribution``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ._templates import ParserKind
from .types import TokenLogprob

__all__ = [
    "DistributionMethod",
    "ScoreDistributions",
    "pair_winner_distribution",
    "probability",
    "second_value_offset",
    "topk_distribution",
    "unusable_logprob",
]

DistributionMethod = Literal["exact", "top-k"]
_DIGIT_START = re.compile(r"\d")
# A log probability is at most 0; servers round, so a hair above 0 is read as 0.
_LOGPROB_SLACK = 1e-4


def probability(logprob: float) -> float:
    """``exp(logprob)``, for a number a server sent as a log probability.

    Raises ``ValueError`` (naming the number) for one no log probability can
    be: nan, or above 0 beyond rounding (+800 would overflow ``math.exp``).
    Very negative numbers, down to ``-inf``, are probabilities of about 0."""
    if not logprob <= _LOGPROB_SLACK:  # nan fails every comparison
        raise ValueError(f"logprob {logprob!r} is not a log probability (it must be a number <= 0)")
    return min(1.0, math.exp(logprob))


def unusable_logprob(tokens: Sequence[TokenLogprob] | None) -> str | None:
    """Why the logprobs of an output cannot give a distribution (the first
    number no log probability can be, and where), or None when they can."""
    for i, tok in enumerate(tokens or ()):
        for text, lp in ((tok.token, tok.logprob), *tok.top):
            try:
                probability(lp)
            except ValueError as exc:
                return f"token {i} ({text!r}): {exc}"
    return None


@dataclass(frozen=True, slots=True)
class ScoreDistributions:
    """``first``: the verdict value (the score, the choice, or score A of a
    pair); ``second``: score B of a pair. ``method`` says how they were read."""

    first: dict[int | str, float] | None = None
    second: dict[int | str, float] | None = None
    method: DistributionMethod | None = None
    # Why no distribution was read although the backend sent logprobs.
    note: str | None = None


def _normalised(mass: dict[int | str, float]) -> dict[int | str, float] | None:
    total = math.fsum(mass.values())
    if total <= 0 or not math.isfinite(total):
        return None
    return {k: v / total for k, v in sorted(mass.items(), key=lambda kv: (str(type(kv[0])), kv[0]))}


def _choice_of(token: str, kind: ParserKind) -> str | None:
    t = token.strip().strip('"').upper()
    if t in ("A", "B"):
        return t
    if kind == "choice" and t and "TIE".startswith(t):
        return "tie"
    return None


def _token_at(tokens: Sequence[TokenLogprob], offset: int) -> int | None:
    """Index of the token holding character ``offset`` of the output (a
    whitespace-only token just before it counts only if nothing else does)."""
    pos = 0
    found: int | None = None
    for i, tok in enumerate(tokens):
        end = pos + len(tok.token)
        if pos <= offset < end or (offset == end and not tok.token.strip()):
            found = i
            if tok.token.strip():
                break
        pos = end
    if found is not None and not tokens[found].token.strip() and found + 1 < len(tokens):
        found += 1  # the value starts in the next token
    return found


def _ends_number(tokens: Sequence[TokenLogprob], i: int) -> float:
    """P(the token after ``tokens[i]`` does not continue a number), from the
    next position's alternatives; 1 at the end of the output."""
    if i + 1 >= len(tokens):
        return 1.0
    nxt = tokens[i + 1]
    alts = nxt.top or ((nxt.token, nxt.logprob),)
    digit = math.fsum(probability(lp) for text, lp in alts if _DIGIT_START.match(text))
    return max(0.0, 1.0 - digit)


def _score_mass(tokens: Sequence[TokenLogprob], k: int, scale: tuple[int, int]) -> dict[int | str, float]:
    lo, hi = scale
    values = [str(v) for v in range(lo, hi + 1)]
    mass: dict[int | str, float] = {}
    # Walk down the pieces the model actually wrote: at each step, each
    # alternative either completes a value (and the number ends), or is the
    # written piece and the walk goes on.
    written, carried, i = "", 1.0, k
    if tokens[k].token.strip() in ("-", "+", "\u2212"):
        # A sign written as its own token leads to several levels at once:
        # no per-level mass can be read here (and none is better than a wrong one).
        return mass
    while i < len(tokens) and carried > 0:
        tok = tokens[i]
        alts = tok.top or ((tok.token, tok.logprob),)
        piece = tok.token.lstrip() if i == k else tok.token
        for text, lp in alts:
            cand = written + (text.lstrip() if i == k else text)
            if not cand or not _DIGIT_START.match(cand[-1]):
                continue
            p = carried * probability(lp)
            is_written = text == tok.token
            if cand in values:
                # The written piece's continuation is observed; another
                # piece's is not and is taken to end the number.
                end = _ends_number(tokens, i) if is_written else 1.0
                if p * end > 0:
                    mass[int(cand)] = mass.get(int(cand), 0.0) + p * end
        if not piece or not piece.isdigit():
            break
        written += piece
        carried *= probability(tok.logprob)
        if not any(v.startswith(written) and v != written for v in values):
            break
        i += 1
    return mass


def topk_distribution(
    tokens: Sequence[TokenLogprob] | None,
    offset: int | None,
    *,
    kind: ParserKind,
    scale: tuple[int, int],
) -> dict[int | str, float] | None:
    """Each admissible value's probability from the generated tokens' top-k
    alternatives, starting at character ``offset`` of the output (see the
    module's note on the approximation). None when there is none to read,
    including when the server sent a number no log probability can be (see
    :func:`unusable_logprob` for why)."""
    if not tokens or offset is None or unusable_logprob(tokens) is not None:
        return None
    k = _token_at(tokens, offset)
    if k is None:
        return None
    if kind in ("score", "two_scores"):
        return _normalised(_score_mass(tokens, k, scale))
    tok = tokens[k]
    mass: dict[int | str, float] = {}
    for text, lp in tok.top or ((tok.token, tok.logprob),):
        key = _choice_of(text, kind)
        if key is not None:
            mass[key] = mass.get(key, 0.0) + probability(lp)
    return _normalised(mass)


def second_value_offset(raw: str, offset: int) -> int | None:
    """Where score B starts, given where score A starts (``[SCORES] 8 7``,
    ``A: 8, B: 7``): after A's digits, the next digit."""
    m = re.compile(r"\d+(?:[.,]\d+)?\D*?(?=\d)").match(raw, offset)
    return m.end() if m else None


def pair_winner_distribution(
    a: dict[int | str, float], b: dict[int | str, float]
) -> tuple[dict[str, float], float, float]:
    """P(A), P(B), P(tie) from two score distributions, and the expected scores.

    B's distribution was read after the written A score, so treating the two
    as independent is an approximation (it ignores how B would shift for
    another A)."""
    pa = {int(k): v for k, v in a.items()}
    pb = {int(k): v for k, v in b.items()}
    win_a = math.fsum(p * q for x, p in pa.items() for y, q in pb.items() if x > y)
    win_b = math.fsum(p * q for x, p in pa.items() for y, q in pb.items() if y > x)
    tie = max(0.0, 1.0 - win_a - win_b)
    expected_a = math.fsum(x * p for x, p in pa.items())
    expected_b = math.fsum(y * q for y, q in pb.items())
    return {"A": win_a, "B": win_b, "tie": tie}, expected_a, expected_b
