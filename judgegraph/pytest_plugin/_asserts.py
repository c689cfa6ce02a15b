"""The ``judged`` fixture's object: assertions that judge, check, and report."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from judgegraph.types import Rubric

from ._cassette import CassetteJudge, CassetteMissError, Judging
from ._checks import Check, check_not_worse, check_scores, clip
from ._report import Row
from ._settings import JudgeSettings

__all__ = ["JudgeAssertionError", "JudgeAssertions", "sync_bridge"]

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
    ) -> None:
        self.test = test
        self.settings = settings
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
        (argument, else marker, else command line, else ini)."""
        __tracebackhide__ = True
        limit = threshold if threshold is not None else self.settings.threshold
        if limit is None:
            raise ValueError(
                "no threshold: pass threshold=, use @pytest.mark.judge(threshold=...), "
                "--judge-threshold or judge_threshold in the ini file"
            )
        item = {"instruction": instruction, "response": response, "reference": reference, "rubric": rubric}
        what = f"\n  instruction: {clip(instruction)}\n  response: {clip(response)}"
        agg = aggregate or self.settings.aggregate
        judge, judging = await self._judge("pointwise", item, repeats)
        check = check_scores(judging.verdicts, threshold=limit, aggregate=agg, what=what)
        return self._finish(judge, "score", judging, check)

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
        answer orders (a disagreement is a tie), ``response`` as answer A."""
        __tracebackhide__ = True
        item = {"instruction": instruction, "response_a": response, "response_b": baseline, "reference": reference}
        what = f"\n  instruction: {clip(instruction)}\n  new: {clip(response)}\n  baseline: {clip(baseline)}"
        agg = aggregate or self.settings.aggregate
        judge, judging = await self._judge("pairwise", item, repeats)
        check = check_not_worse(judging.verdicts, aggregate=agg, what=what)
        return self._finish(judge, "not_worse", judging, check)

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

    async def _judge(self, kind: Kind, item: dict[str, Any], repeats: int | None) -> tuple[CassetteJudge, Judging]:
        judge = self._judge_for(kind)
        k = repeats or self.settings.repeats
        if k < 1:
            raise ValueError(f"repeats must be at least 1, got {k}")
        value = {f: v for f, v in item.items() if v is not None}
        try:
            return judge, await judge.ajudge_repeated(value, repeats=k)
        except CassetteMissError:
            threshold = "" if kind == "pairwise" else f">= {self.settings.threshold:g}"
            self._report(Row(self.test, judge.name, kind, "-", threshold, "missing", "", 0.0, "replay"))
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
