"""The ``judged`` fixture's object: assertions that judge, check, and report."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from judgegraph.judges import check_threshold
from judgegraph.types import Rubric

from ._cassette import CassetteJudge, CassetteMissError, Judging
from ._checks import Check, check_not_worse, check_scores, clip
from ._report import Row
from ._settings import JudgeSettings

__all__ = ["JudgeAssertionError", "JudgeAssertions", "JudgeUsageError", "sync_bridge"]

T = TypeVar("T")
Kind = Literal["pointwise", "pairwise"]


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def sync_bridge(coro: Coroutine[Any, Any, T]) -> T:
    """How sync tests run the async judges: the one place to change it.

    One event loop in a daemon thread for the whole process, so the HTTP
    clients a backend keeps per loop stay usable and close on a live loop,
    rather than one loop per call that closes under them."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="judgegraph-sync-bridge", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(coro, _loop).result()


class JudgeAssertionError(AssertionError):
    """A judged assertion failed; the message is the whole explanation."""


class JudgeUsageError(ValueError):
    """A judged assertion was given an argument (or a setting) it cannot use;
    the message names it. Nothing was judged."""


# The judge input's fields, as the assertion arguments they come from.
_ARGUMENTS = {
    "pointwise": {"instruction": "instruction", "response": "response", "reference": "reference", "rubric": "rubric"},
    "pairwise": {
        "instruction": "instruction",
        "response_a": "response",
        "response_b": "baseline",
        "reference": "reference",
    },
}
_AGGREGATES = ("mean", "majority")


@dataclass
class _Attempt:
    """What one assertion got to before it stopped: what its error row shows."""

    kind: str
    call: str
    judge: str = "-"
    threshold: str = "-"


def _field(item: BaseModel, name: str) -> str | None:
    """A text field of the validated input (what was judged, not the raw argument)."""
    value = getattr(item, name, None)
    return value if isinstance(value, str) else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


class JudgeAssertions:
    """Judge-backed assertions for one test. Each returns the :class:`Check`
    when it passes and raises :class:`JudgeAssertionError` when it does not;
    either way it adds a row to the session summary and JUnit properties.
    ``a``-prefixed methods are for async tests."""

    def __init__(
        self,
        *,
        test: str,
        settings: JudgeSettings,
        judge_for: Callable[[Kind], CassetteJudge],
        report: Callable[[Row], None],
        threshold_option: str = "judge_threshold",
    ) -> None:
        self.test = test
        self.settings = settings
        # Where the settings' threshold came from, as an error names it.
        self.threshold_option = threshold_option
        self._judge_for = judge_for
        self._report = report

    # ------------------------------------------------------------ score

    async def aassert_score(
        self,
        instruction: str,
        response: str,
        *,
        reference: str | None = None,
        rubric: Rubric | None = None,
        threshold: float | None = None,
        repeats: int | None = None,
        aggregate: Literal["mean", "majority"] | None = None,
    ) -> Check:
        """Judge ``response`` and assert its score reaches the threshold
        (argument, else marker, else command line, else ini). A bad argument
        raises :class:`JudgeUsageError` naming it, and shows as an error row."""
        __tracebackhide__ = True
        at = _Attempt("score", "assert_score")
        given = {"instruction": instruction, "response": response, "reference": reference, "rubric": rubric}
        return await self._guarded(at, self._score(at, given, threshold, repeats, aggregate))

    async def _score(
        self, at: _Attempt, given: dict[str, Any], threshold: Any, repeats: Any, aggregate: Any
    ) -> tuple[CassetteJudge, Judging, Check]:
        judge = self._judge_for("pointwise")
        at.judge = judge.name
        item = self._item(at, "pointwise", judge, given)
        option = "threshold" if threshold is not None else self.threshold_option
        limit = threshold if threshold is not None else self.settings.threshold
        if limit is None:
            raise JudgeUsageError(
                f"judged.{at.call}: no threshold: pass threshold=, use @pytest.mark.judge(threshold=...), "
                "--judge-threshold or judge_threshold in the ini file"
            )
        try:
            # On the scale this call is judged on: the rubric's, when it has one.
            value = check_threshold(limit, judge=judge, rubric=getattr(item, "rubric", None), option=option)
        except ValueError as exc:
            raise JudgeUsageError(f"judged.{at.call}: {exc}") from None
        at.threshold = f">= {value:g}"
        k, agg = self._repeats(at, repeats), self._aggregate(at, aggregate)
        what = f"\n  instruction: {clip(_field(item, 'instruction'))}\n  response: {clip(_field(item, 'response'))}"
        judging = await self._judge(at, judge, item, k)
        return judge, judging, check_scores(judging.verdicts, threshold=value, aggregate=agg, what=what)

    def assert_score(
        self,
        instruction: str,
        response: str,
        *,
        reference: str | None = None,
        rubric: Rubric | None = None,
        threshold: float | None = None,
        repeats: int | None = None,
        aggregate: Literal["mean", "majority"] | None = None,
    ) -> Check:
        """:meth:`aassert_score` for sync tests."""
        __tracebackhide__ = True
        return sync_bridge(
            self.aassert_score(
                instruction,
                response,
                reference=reference,
                rubric=rubric,
                threshold=threshold,
                repeats=repeats,
                aggregate=aggregate,
            )
        )

    # ------------------------------------------------------------ pairwise

    async def aassert_not_worse(
        self,
        instruction: str,
        response: str,
        *,
        baseline: str,
        reference: str | None = None,
        repeats: int | None = None,
        aggregate: Literal["mean", "majority"] | None = None,
    ) -> Check:
        """Assert ``response`` is not worse than ``baseline``: judged in both
        answer orders (a disagreement is a tie), ``response`` as answer A.
        A bad argument raises :class:`JudgeUsageError` naming it, and shows as an error row."""
        __tracebackhide__ = True
        at = _Attempt("not_worse", "assert_not_worse", threshold="not worse (pref >= 0.5)")
        given = {"instruction": instruction, "response_a": response, "response_b": baseline, "reference": reference}
        return await self._guarded(at, self._not_worse(at, given, repeats, aggregate))

    async def _not_worse(
        self, at: _Attempt, given: dict[str, Any], repeats: Any, aggregate: Any
    ) -> tuple[CassetteJudge, Judging, Check]:
        judge = self._judge_for("pairwise")
        at.judge = judge.name
        item = self._item(at, "pairwise", judge, given)
        k, agg = self._repeats(at, repeats), self._aggregate(at, aggregate)
        what = (
            f"\n  instruction: {clip(_field(item, 'instruction'))}\n  new: {clip(_field(item, 'response_a'))}"
            f"\n  baseline: {clip(_field(item, 'response_b'))}"
        )
        judging = await self._judge(at, judge, item, k)
        return judge, judging, check_not_worse(judging.verdicts, aggregate=agg, what=what)

    def assert_not_worse(
        self,
        instruction: str,
        response: str,
        *,
        baseline: str,
        reference: str | None = None,
        repeats: int | None = None,
        aggregate: Literal["mean", "majority"] | None = None,
    ) -> Check:
        """:meth:`aassert_not_worse` for sync tests."""
        __tracebackhide__ = True
        return sync_bridge(
            self.aassert_not_worse(
                instruction, response, baseline=baseline, reference=reference, repeats=repeats, aggregate=aggregate
            )
        )

    # ------------------------------------------------------------ internals

    async def _guarded(self, at: _Attempt, work: Awaitable[tuple[CassetteJudge, Judging, Check]]) -> Check:
        """Run one assertion. Whatever stops it before a verdict (a bad
        argument or setting, a judge that cannot be built) still leaves the
        test a row in the verdict table, as an error, and is raised."""
        __tracebackhide__ = True
        try:
            judge, judging, check = await work
        except (JudgeAssertionError, CassetteMissError):
            raise  # these have their rows already
        except Exception as exc:
            self._report(Row(self.test, at.judge, at.kind, "-", at.threshold, "error", "", None, "-"))
            if isinstance(exc, ValidationError):  # never a raw pydantic error
                raise JudgeUsageError(f"judged.{at.call}: {exc}") from None
            raise
        return self._finish(judge, at.kind, judging, check)

    def _item(self, at: _Attempt, kind: Kind, judge: CassetteJudge, given: dict[str, Any]) -> BaseModel:
        """The judge's input from the assertion's arguments; JudgeUsageError naming each bad one."""
        names = _ARGUMENTS[kind]
        missing = [names[f] for f in names if f != "reference" and f != "rubric" and given.get(f, "") is None]
        if missing:
            raise JudgeUsageError(f"judged.{at.call}: {', '.join(missing)} must be a string, got None")
        try:
            item: BaseModel = judge.input_model.model_validate({f: v for f, v in given.items() if v is not None})
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                field = str(e["loc"][0]) if e["loc"] else ""
                arg = names.get(field, field or "arguments")
                inner = ".".join(str(p) for p in e["loc"][1:])
                got = f"={_shown(given[field])}" if field in given else ""
                problems.append(f"{arg}{got}{' (at ' + inner + ')' if inner else ''}: {e['msg']}")
            raise JudgeUsageError(f"judged.{at.call}: " + "; ".join(problems)) from None
        return item

    def _repeats(self, at: _Attempt, repeats: Any) -> int:
        k = repeats if repeats is not None else self.settings.repeats
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise JudgeUsageError(f"judged.{at.call}: repeats={_shown(k)}: must be a whole number of at least 1")
        return k

    def _aggregate(self, at: _Attempt, aggregate: Any) -> Literal["mean", "majority"]:
        agg = aggregate if aggregate is not None else self.settings.aggregate
        if agg not in _AGGREGATES:
            raise JudgeUsageError(f"judged.{at.call}: aggregate={_shown(agg)}: must be 'mean' or 'majority'")
        return "mean" if agg == "mean" else "majority"

    async def _judge(self, at: _Attempt, judge: CassetteJudge, item: BaseModel, k: int) -> Judging:
        try:
            return await judge.ajudge_repeated(item, repeats=k)
        except CassetteMissError:
            self._report(Row(self.test, judge.name, at.kind, "-", at.threshold, "missing", "", 0.0, "replay"))
            raise

    def _finish(self, judge: CassetteJudge, kind: str, judging: Judging, check: Check) -> Check:
        __tracebackhide__ = True
        fresh = judging.verdicts[len(judging.verdicts) - judging.fresh :] if judging.fresh else []
        costs = [getattr(getattr(v, "provenance", None), "cost_usd", None) for v in fresh]
        cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
        row = Row(
            self.test, judge.name, kind, check.shown, check.threshold, check.outcome, check.spread, cost, judging.source
        )
        self._report(row)
        if not check.passed:
            raise JudgeAssertionError(f"{check.message}\n  ({judge.name}, {judging.source}, key {judging.key})")
        return check
