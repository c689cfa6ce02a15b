"""Judging one prepared row into a store record, and the judge setup both engines share."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from judgegraph.backends import Backend, RateLimitedBackend, RateLimiter
from judgegraph.judges import Judge, JudgeInputError, fingerprint_for  # re-exported for the engines
from judgegraph.types import JudgeResult

from ._spec import PreparedRow
from ._store import ResultRecord

__all__ = ["failure_record", "fingerprint_for", "judge_prepared", "limit_context", "verdict_record"]


def verdict_record(config_hash: str, item_hash: str, verdict: JudgeResult) -> ResultRecord:
    """A judge's result (see :class:`~judgegraph.types.JudgeResult`) as a store record."""
    prov = verdict.provenance
    return ResultRecord(
        config_hash=config_hash,
        item_hash=item_hash,
        status=str(verdict.status.value),
        reason=verdict.reason,
        result=verdict.model_dump_json(),
        cost_usd=prov.cost_usd if prov is not None else None,
        prompt_tokens=prov.usage.prompt_tokens if prov is not None else 0,
        completion_tokens=prov.usage.completion_tokens if prov is not None else 0,
        attempts=prov.attempts if prov is not None else 1,
        finished_at=time.time(),
    )


def failure_record(config_hash: str, item_hash: str, exc: BaseException) -> ResultRecord:
    """A judge that raised instead of returning a failed result: recorded as
    an error with the exception, never as a score."""
    reason = str(exc) if isinstance(exc, JudgeInputError) else f"{type(exc).__name__}: {exc}"
    return ResultRecord(
        config_hash,
        item_hash,
        "error",
        reason,
        json.dumps({"status": "error", "reason": reason}),
        None,
        0,
        0,
        1,
        time.time(),
    )


async def judge_prepared(judge: Judge[Any, Any], prep: PreparedRow, *, context: Any, config_hash: str) -> ResultRecord:
    assert prep.item is not None and prep.item_hash is not None
    try:
        verdict = await judge.ajudge(prep.item, context=context)
    except Exception as exc:
        return failure_record(config_hash, prep.item_hash, exc)
    if not isinstance(verdict, JudgeResult):
        return failure_record(
            config_hash, prep.item_hash, TypeError(f"judge returned a {type(verdict).__name__} without a status")
        )
    return verdict_record(config_hash, prep.item_hash, verdict)


def limit_context(
    judge: Judge[Any, Any], context: Mapping[str, Any] | None, limiter: RateLimiter | None
) -> tuple[dict[str, Any], Judge[Any, Any]]:
    """The context with every backend in it behind the limiter, and the judge
    with the backends it holds itself behind it likewise."""
    ctx = dict(context or {})
    if limiter is None:
        return ctx, judge
    for k, v in list(ctx.items()):
        if isinstance(v, Backend):
            ctx[k] = RateLimitedBackend(v, limiter)
    return ctx, judge.with_backends(lambda b: RateLimitedBackend(b, limiter))
