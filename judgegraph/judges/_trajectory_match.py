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
can miss a match when arguments are compared loosely). Identical calls are
matched as one group with a count (a maximum flow, computed iteratively), so
an agent that repeats a call thousands of times is matched in polynomial time.

The verdict is a :class:`PointwiseScore` on the scale 0-1: 1 when the run
matches. Its rationale says what matched or the first thing that did not.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
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
        self._exact = {tool for tool, mode in overrides.items() if mode == "exact"}
        self._loose = {tool for tool, mode in overrides.items() if mode != "exact"}
        self._default_exact = args == "exact"

    def exact(self, tool: str) -> bool:
        """Whether ``tool``'s calls match only on equal arguments (so only calls with equal keys can match)."""
        return tool in self._exact or (self._default_exact and tool not in self._loose)

    def __call__(self, out: ToolCall, ref: ToolCall) -> bool:
        if out.name != ref.name or (out.error is not None) != (ref.error is not None):
            return False
        return self._per_tool.get(ref.name, self._default)(out.args, ref.args)


class _NotJson(Exception):
    pass


def _json_key(value: Any) -> Hashable:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return ("number", float(value))
    if isinstance(value, list | tuple):
        return ("list", tuple(_json_key(v) for v in value))
    if isinstance(value, Mapping):
        return ("dict", frozenset((_json_key(k), _json_key(v)) for k, v in value.items()))
    raise _NotJson


def _key(value: Any) -> Hashable | None:
    """A hashable stand-in for a JSON-like value, equal for any two values
    that compare equal (``1``, ``1.0`` and ``True`` share one; a list and a
    tuple too): only a filter, equality is still checked. None when the
    value is not JSON-like (then it is compared with everything)."""
    try:
        return ("json", _json_key(value))
    except (_NotJson, OverflowError, RecursionError):  # an int past float range, nesting past the stack
        return None


def _groups(calls: Sequence[ToolCall]) -> tuple[list[ToolCall], list[list[int]]]:
    """Identical calls (name, arguments, error) as one group each: a
    representative and the indices of its members, in order. Members of a
    group match exactly the same calls, so a run repeating one call a
    thousand times is one node of the matching, not a thousand."""
    reps: list[ToolCall] = []
    members: list[list[int]] = []
    buckets: dict[tuple[str, str | None, Hashable], list[int]] = {}
    for i, call in enumerate(calls):
        bucket = buckets.setdefault((call.name, call.error, _key(call.args)), [])
        # The key only narrows the search: equal keys with unequal arguments stay apart.
        found = next((g for g in bucket if reps[g].args == call.args), None)
        if found is None:
            found = len(reps)
            bucket.append(found)
            reps.append(call)
            members.append([])
        members[found].append(i)
    return reps, members


class _Flow:
    """Maximum flow by Dinic's algorithm, iterative (no recursion depth to run out of)."""

    def __init__(self, size: int) -> None:
        self.adj: list[list[int]] = [[] for _ in range(size)]
        self.to: list[int] = []
        self.cap: list[int] = []

    def edge(self, u: int, v: int, cap: int) -> int:
        """Add u -> v with capacity ``cap``; its index (the flow on it is ``cap[index ^ 1]``)."""
        for a, b, c in ((u, v, cap), (v, u, 0)):
            self.adj[a].append(len(self.to))
            self.to.append(b)
            self.cap.append(c)
        return len(self.to) - 2

    def _levels(self, s: int, t: int) -> list[int] | None:
        level = [-1] * len(self.adj)
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.adj[u]:
                v = self.to[e]
                if self.cap[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level if level[t] >= 0 else None

    def _augment(self, s: int, t: int, level: list[int], nxt: list[int]) -> int:
        """One shortest augmenting path in the level graph, pushed; 0 when none is left."""
        path: list[int] = []
        u = s
        while u != t:
            edges = self.adj[u]
            while nxt[u] < len(edges):
                e = edges[nxt[u]]
                if self.cap[e] > 0 and level[self.to[e]] == level[u] + 1:
                    break
                nxt[u] += 1
            else:  # a dead end: step back and skip the edge that led here
                if not path:
                    return 0
                level[u] = -1
                u = self.to[path.pop() ^ 1]
                nxt[u] += 1
                continue
            path.append(e)
            u = self.to[e]
        push = min(self.cap[e] for e in path)
        for e in path:
            self.cap[e] -= push
            self.cap[e ^ 1] += push
        return push

    def run(self, s: int, t: int) -> int:
        total = 0
        while (level := self._levels(s, t)) is not None:
            nxt = [0] * len(self.adj)
            while pushed := self._augment(s, t, level, nxt):
                total += pushed
        return total


def _matched(run: Sequence[ToolCall], ref: Sequence[ToolCall], same: _Matcher) -> tuple[set[int], set[int]]:
    """The run calls and reference calls a maximum one-to-one matching pairs.

    A maximum bipartite matching between multisets: identical calls are
    grouped, and the matching is a maximum flow from run groups (capacity:
    their size) to reference groups (likewise). Polynomial and iterative."""
    out_reps, out_members = _groups(run)
    ref_reps, ref_members = _groups(ref)
    n_out, n_ref = len(out_reps), len(ref_reps)
    s, t = 0, n_out + n_ref + 1
    flow = _Flow(t + 1)
    sources = [flow.edge(s, 1 + g, len(out_members[g])) for g in range(n_out)]
    sinks = [flow.edge(1 + n_out + h, t, len(ref_members[h])) for h in range(n_ref)]
    # Which reference groups each run group is compared with: those of its
    # tool; for a tool matched on exact arguments, only those with an equal
    # key (and any whose arguments have none), so distinct calls cost no
    # comparisons with each other.
    by_name: dict[str, list[int]] = {}
    by_key: dict[tuple[str, Hashable], list[int]] = {}
    unkeyed: dict[str, list[int]] = {}
    for h, r in enumerate(ref_reps):
        by_name.setdefault(r.name, []).append(h)
        key = _key(r.args)
        (by_key.setdefault((r.name, key), []) if key is not None else unkeyed.setdefault(r.name, [])).append(h)
    for g, c in enumerate(out_reps):
        key = _key(c.args) if same.exact(c.name) else None
        found = by_name.get(c.name, []) if key is None else [*by_key.get((c.name, key), ()), *unkeyed.get(c.name, ())]
        for h in found:
            if same(c, ref_reps[h]):
                flow.edge(1 + g, 1 + n_out + h, min(len(out_members[g]), len(ref_members[h])))
    flow.run(s, t)
    # Members of a group are interchangeable: the first ones count as matched.
    out = {i for g, e in enumerate(sources) for i in out_members[g][: flow.cap[e ^ 1]]}
    back = {j for h, e in enumerate(sinks) for j in ref_members[h][: flow.cap[e ^ 1]]}
    return out, back


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
    paired, taken = _matched(out, ref, same)
    extra = [_describe(c) for i, c in enumerate(out) if i not in paired]
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
        return True, f"{len(paired)} of the run's {len(out)} tool call(s) match the reference's {len(ref)} ({mode})"
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
