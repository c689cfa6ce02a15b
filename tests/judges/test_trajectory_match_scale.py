"""Unordered, subset and superset trajectory matching on long runs of repeated calls.

The matcher was a recursive augmenting-path search over every pair of calls:
cubic on repeated identical calls, and a RecursionError near 1,000 of them.
The class: matching is a maximum bipartite (multiset) matching; its verdict
equals a brute-force matcher's on small random trajectories with repeats, in
every mode and argument mode, and a long run completes.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from functools import cache
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph.judges import TrajectoryMatchJudge, match_trajectory
from judgegraph.types import Message, ToolCall


def _run(calls: Sequence[ToolCall], *, per_step: int = 3) -> list[Message]:
    """A run with ``calls`` spread over assistant steps (several per step)."""
    out = [Message(role="user", content="go")]
    for k in range(0, len(calls), per_step):
        out.append(Message(role="assistant", content="", tool_calls=tuple(calls[k : k + per_step])))
    out.append(Message(role="assistant", content="done"))
    return out


async def test_two_thousand_repeated_calls_are_matched_without_recursion() -> None:
    same = [ToolCall(name="search", args={"q": "cats"}) for _ in range(2000)]
    mixed = [*same, *(ToolCall(name="fetch", args={"page": i % 7}) for i in range(300))]
    judge = TrajectoryMatchJudge(mode="unordered")
    verdict = await judge.ajudge({"messages": _run(mixed), "reference_trajectory": _run(mixed[::-1])})
    assert verdict.score == 1, verdict.rationale
    for mode in ("unordered", "subset", "superset"):
        ok, why = match_trajectory(_run(same[:1999]), _run(same), mode=mode, args="superset")  # type: ignore[arg-type]
        assert ok is (mode == "subset"), why
    ok, why = match_trajectory(_run(same), _run(same[:1999]), mode="unordered")
    assert not ok and why.count("search(") == 1  # the one extra call, named once
    # Two thousand distinct calls, matched on exact arguments, in reverse order.
    distinct = [ToolCall(name="search", args={"q": i, "page": [i, {"n": 1.0}]}) for i in range(2000)]
    ok, why = match_trajectory(_run(distinct), _run(distinct[::-1]), mode="unordered")
    assert ok, why


# ---------------------------------------------------------------- the class

_VALUES = st.sampled_from([0, 1, "a", [1], {"k": 1.0}])
_ARGS = st.dictionaries(st.sampled_from(["q", "lang", "n"]), _VALUES, max_size=2)
_CALL = st.builds(
    ToolCall,
    name=st.sampled_from(["search", "fetch"]),
    args=_ARGS,
    error=st.sampled_from([None, None, None, "arguments are not valid JSON: '{'"]),
)
# Values equal to 0 and 1 in other types (Decimal is not JSON at all).
_EQUALS: dict[int, list[Any]] = {0: [0.0, False, Decimal(0)], 1: [1.0, True, Decimal(1)]}


@st.composite
def _palette(draw: st.DrawFn) -> list[ToolCall]:
    """Two calls and their twins: the same call with its numbers written in
    other types (``1``, ``1.0``, ``True``, ``Decimal(1)``), which compare equal."""
    base = draw(st.lists(_CALL, min_size=2, max_size=2))

    def twin(v: Any) -> Any:
        return draw(st.sampled_from(_EQUALS[v])) if type(v) is int else v

    return [*base, *(c.model_copy(update={"args": {k: twin(v) for k, v in c.args.items()}}) for c in base)]


# Few distinct calls, drawn with repeats, so identical calls are common.
_CALLS = st.lists(st.sampled_from([0, 1, 2, 3]), max_size=7)
_PALETTE = _palette()
_ARGS_MODES = st.sampled_from(["exact", "exact", "ignore", "subset", "superset"])  # exact is the default
_OVERRIDES = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"search": st.one_of(_ARGS_MODES, st.lists(st.sampled_from(["q", "lang"]), max_size=2))}),
)


def _same(out: ToolCall, ref: ToolCall, args: str, overrides: dict[str, Any]) -> bool:
    """Two calls match, written out again from the documented rules."""
    if out.name != ref.name or (out.error is None) != (ref.error is None):
        return False
    mode = overrides.get(ref.name, args)
    a, r = out.args, ref.args
    if not isinstance(mode, str):
        return all(a.get(k, "<missing>") == r.get(k, "<missing>") for k in mode)
    return {
        "exact": a == r,
        "ignore": True,
        "subset": all(k in r and r[k] == v for k, v in a.items()),
        "superset": all(k in a and a[k] == v for k, v in r.items()),
    }[mode]


def _brute_force(out: Sequence[ToolCall], ref: Sequence[ToolCall], args: str, overrides: dict[str, Any]) -> int:
    """The largest number of run calls paired one to one with reference calls, by trying every pairing."""

    @cache
    def best(i: int, used: frozenset[int]) -> int:
        if i == len(out):
            return 0
        skip = best(i + 1, used)
        takes = [
            1 + best(i + 1, used | {j})
            for j in range(len(ref))
            if j not in used and _same(out[i], ref[j], args, overrides)
        ]
        return max([skip, *takes])

    return best(0, frozenset())


def _reference_for(run_ix: list[int]) -> st.SearchStrategy[list[int]]:
    """A reference: drawn on its own, or the run's calls with some swapped
    for their twins, reordered or cut short (the near misses a matcher gets wrong)."""
    twinned = st.lists(st.booleans(), min_size=len(run_ix), max_size=len(run_ix)).map(
        lambda flips: [i ^ 2 if f else i for i, f in zip(run_ix, flips, strict=True)]
    )
    return st.one_of(_CALLS, twinned, twinned.map(lambda xs: xs[::-1]), twinned.map(lambda xs: xs[1:]))


@settings(max_examples=100)
@given(
    palette=_PALETTE,
    run_ix=_CALLS,
    args=_ARGS_MODES,
    overrides=_OVERRIDES,
    per_step=st.integers(1, 3),
    data=st.data(),
)
def test_matching_agrees_with_brute_force_in_every_mode(
    palette: list[ToolCall],
    run_ix: list[int],
    args: str,
    overrides: dict[str, Any],
    per_step: int,
    data: st.DataObject,
) -> None:
    ref_ix = data.draw(_reference_for(run_ix), label="reference")
    out = [palette[i] for i in run_ix]
    ref = [palette[i] for i in ref_ix]
    matched = _brute_force(out, ref, args, overrides)
    expected = {
        "unordered": matched == len(out) == len(ref),
        "subset": matched == len(out),
        "superset": matched == len(ref),
    }
    for mode, want in expected.items():
        ok, why = match_trajectory(
            _run(out, per_step=per_step),
            _run(ref, per_step=per_step),
            mode=mode,  # type: ignore[arg-type]
            args=args,  # type: ignore[arg-type]
            args_overrides=overrides,
        )
        assert ok is want, (mode, why)
        if ok:
            assert why.startswith(f"{matched} of the run's {len(out)} tool call(s)")
        else:
            # What is named as extra or missing is as many calls as the matching leaves out.
            extra, missing = len(out) - matched, len(ref) - matched
            named = why.count("search(") + why.count("fetch(")
            counted = (extra if mode in ("unordered", "subset") else 0) + (
                missing if mode in ("unordered", "superset") else 0
            )
            assert named == counted, (mode, why)


@settings(max_examples=60)
@given(
    values=st.lists(st.tuples(st.sampled_from(["q", "n"]), st.sampled_from([0, 1]), st.integers(0, 2)), max_size=6),
    data=st.data(),
)
def test_equal_arguments_in_other_types_match_exactly(values: list[tuple[str, int, int]], data: st.DataObject) -> None:
    """``{"q": 1}`` and ``{"q": True}``, ``1.0`` or ``Decimal(1)`` are equal
    arguments: in exact mode each run call finds its twin, in any order."""
    run = [ToolCall(name="search", args={key: v, "page": page}) for key, v, page in values]
    twins = [
        c.model_copy(update={"args": {k: data.draw(st.sampled_from(_EQUALS.get(a, [a]))) for k, a in c.args.items()}})
        for c in run
    ]
    ref = data.draw(st.permutations(twins))
    ok, why = match_trajectory(_run(run), _run(ref), mode="unordered")
    assert ok, why
