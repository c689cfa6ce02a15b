"""Deterministic trajectory matching: an agent's tool calls against a reference run.

Match modes (those of LangChain's ``agentevals``, in our own code):

- ``strict``: the same steps in the same order. Message roles line up one to
  one (system messages are configuration, not steps, and are skipped), and
  each assistant step makes the same tool calls in the same order.
- ``unordered``: the same tool calls, in any order, as many of each.
- ``subset``: the run makes no call the reference lacks (it may make fewer).
- ``superset``: the run makes at least every call of the reference (it may make more).

Two calls match when their names are equal and their arguments match under
``args``: ``exact``, ``ignore``, ``subset`` (the run's arguments are a part of
the reference's) or ``superset`` (the run's include the reference's);
``args_overrides`` sets another mode, or a list of (dotted) keys to compare,
per tool name. Unordered matching is a maximum bipartite matching, so the
verdict does not depend on the order calls are tried in (a greedy first fit
can miss a match when arguments are compared loosely).

The verdict is a :class:`PointwiseScore` on the scale 0-1: 1 when the run
matches. Its rationale says what matched or the first thing that did not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from judgegraph.types import Message, PointwiseScore, Provenance, Status, ToolCall

from ._base import Judge
from ._contract import Context
from ._trajectory_inputs import TrajectoryMatchInput

__all__ = ["ArgsMode", "MatchMode", "TrajectoryMatchJudge", "match_trajectory"]

MatchMode = Literal["strict", "unordered", "subset", "superset"]
ArgsMode = Literal["exact", "ignore", "subset", "superset"]
ArgsOverride = ArgsMode | Sequence[str]
_ARGS_MODES = ("exact", "ignore", "subset", "superset")


def _dig(args: Mapping[str, Any], path: str) -> Any:
    current: Any = args
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _MISSING
        current = current[part]
    return current


_MISSING = object()


def _args_matcher(mode: ArgsOverride) -> Callable[[Mapping[str, Any], Mapping[str, Any]], bool]:
    if isinstance(mode, str):
        if mode == "exact":
            return lambda out, ref: dict(out) == dict(ref)
        if mode == "ignore":
            return lambda out, ref: True
        if mode == "subset":
            return lambda out, ref: all(k in ref and ref[k] == v for k, v in out.items())
        return lambda out, ref: all(k in out and out[k] == v for k, v in ref.items())
    keys = list(mode)
    return lambda out, ref: all(_dig(out, k) == _dig(ref, k) for k in keys)


def _describe(call: ToolCall) -> str:
    return f"{call.name}({call.args})" if call.error is None else f"{call.name}(<{call.error}>)"


class _Matcher:
    def __init__(self, args: ArgsMode, overrides: Mapping[str, ArgsOverride]) -> None:
        if args not in _ARGS_MODES:
            raise ValueError(f"args must be one of {', '.join(_ARGS_MODES)}, got {args!r}")
        for tool, mode in overrides.items():
            if isinstance(mode, str) and mode not in _ARGS_MODES:
                raise ValueError(f"args_overrides[{tool!r}] must be an args mode or a list of keys, got {mode!r}")
        self._default = _args_matcher(args)
        self._per_tool = {tool: _args_matcher(mode) for tool, mode in overrides.items()}

    def __call__(self, out: ToolCall, ref: ToolCall) -> bool:
        if out.name != ref.name or (out.error is not None) != (ref.error is not None):
            return False
        return self._per_tool.get(ref.name, self._default)(out.args, ref.args)


def _pairs(run: Sequence[ToolCall], ref: Sequence[ToolCall], same: _Matcher) -> dict[int, int]:
    """A maximum matching run call -> reference call (Kuhn's augmenting paths)."""
    owner: dict[int, int] = {}  # reference index -> run index

    def place(i: int, seen: set[int]) -> bool:
        for j, r in enumerate(ref):
            if j in seen or not same(run[i], r):
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(run)):
        place(i, set())
    return {i: j for j, i in owner.items()}


def _calls(messages: Sequence[Message]) -> list[ToolCall]:
    return [c for m in messages if m.role == "assistant" for c in m.tool_calls]


def _strict(run: Sequence[Message], ref: Sequence[Message], same: _Matcher) -> tuple[bool, str]:
    steps = [m for m in run if m.role != "system"]
    want = [m for m in ref if m.role != "system"]
    for k, (m, r) in enumerate(zip(steps, want, strict=False), start=1):
        if m.role != r.role:
            return False, f"step {k} is a {m.role} message where the reference has a {r.role} message"
        if len(m.tool_calls) != len(r.tool_calls):
            return False, f"step {k} makes {len(m.tool_calls)} tool call(s), the reference {len(r.tool_calls)}"
        for c, rc in zip(m.tool_calls, r.tool_calls, strict=True):
            if not same(c, rc):
                return False, f"step {k} calls {_describe(c)} where the reference calls {_describe(rc)}"
    if len(steps) != len(want):
        return False, f"the run has {len(steps)} steps, the reference {len(want)} (system messages not counted)"
    return True, f"all {len(steps)} steps match the reference, tool calls in order"


def match_trajectory(
    run: Sequence[Message],
    reference: Sequence[Message],
    *,
    mode: MatchMode,
    args: ArgsMode = "exact",
    args_overrides: Mapping[str, ArgsOverride] | None = None,
) -> tuple[bool, str]:
    """Whether ``run`` matches ``reference`` under ``mode``, and why (pure)."""
    same = _Matcher(args, args_overrides or {})
    if mode == "strict":
        return _strict(run, reference, same)
    out, ref = _calls(run), _calls(reference)
    pairs = _pairs(out, ref, same)
    extra = [_describe(c) for i, c in enumerate(out) if i not in pairs]
    taken = set(pairs.values())
    missing = [_describe(c) for j, c in enumerate(ref) if j not in taken]
    if mode == "unordered":
        ok = not extra and not missing
    elif mode == "subset":
        ok = not extra
    elif mode == "superset":
        ok = not missing
    else:
        raise ValueError(f"mode must be strict, unordered, subset or superset, got {mode!r}")
    problems = []
    if extra and mode in ("unordered", "subset"):
        problems.append("calls the reference does not make: " + ", ".join(extra))
    if missing and mode in ("unordered", "superset"):
        problems.append("reference calls the run does not make: " + ", ".join(missing))
    if ok:
        return True, f"{len(pairs)} of the run's {len(out)} tool call(s) match the reference's {len(ref)} ({mode})"
    return False, "; ".join(problems)


class TrajectoryMatchJudge(Judge[TrajectoryMatchInput, PointwiseScore]):
    """Scores an agent run 1 when its tool calls match a reference trajectory
    under ``mode``, else 0, with the reason. Calls no model; the input needs
    ``reference_trajectory``."""

    input_model = TrajectoryMatchInput

    def __init__(
        self,
        *,
        mode: MatchMode = "strict",
        args: ArgsMode = "exact",
        args_overrides: Mapping[str, ArgsOverride] | None = None,
        name: str | None = None,
    ) -> None:
        if mode not in ("strict", "unordered", "subset", "superset"):
            raise ValueError(f"mode must be strict, unordered, subset or superset, got {mode!r}")
        _Matcher(args, args_overrides or {})  # reject bad modes now, not on the first item
        self.mode, self.args, self.args_overrides = mode, args, dict(args_overrides or {})
        self.name = name or f"trajectory-{mode}-match"

    async def _ajudge_item(self, item: TrajectoryMatchInput, context: Context) -> PointwiseScore:
        started = time.perf_counter()
        ok, why = match_trajectory(
            item.messages, item.reference_trajectory, mode=self.mode, args=self.args, args_overrides=self.args_overrides
        )
        prov = Provenance(
            judge=self.name,
            backend="none",
            model="deterministic",
            template_id=f"trajectory-match-{self.mode}",
            template_version=1,
            latency_s=time.perf_counter() - started,
        )
        return PointwiseScore(
            status=Status.OK, score=int(ok), scale=(0, 1), confidence=1.0, rationale=why, provenance=prov
        )
