"""Judges as LangSmith evaluators: per-run ones for ``evaluate``/``aevaluate``
and comparative ones for pairwise experiments.

Nothing here talks to LangSmith: the functions only take what LangSmith hands
an evaluator and return the shapes it records. A judge's verdict becomes
:class:`~judgegraph.types.EvaluatorResult` (the openevals shape); a failed
verdict scores None, so a run the judge could not read is never counted as a
bad one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from judgegraph.judges import Judge, run_sync
from judgegraph.types import EvaluatorResult, PairwiseInput, PairwiseVerdict, Status

from ._fields import FieldSource, resolve_fields

__all__ = ["as_async_evaluator", "as_comparative_evaluator", "as_evaluator", "offline_client"]

# When no mapping is given: the request from the example's inputs, the answer
# from the run's outputs, the reference (if any) from the example's outputs.
_DEFAULTS: dict[str, FieldSource] = {
    "instruction": "inputs",
    "response": "outputs",
    "reference": "reference_outputs",
}
_OPTIONAL = frozenset({"reference", "context", "rubric"})


def offline_client() -> Any:
    """A ``langsmith.Client`` for ``evaluate(..., upload_runs=False, client=offline_client())``.

    A plain ``Client()`` asks the endpoint for its ``/info`` even when nothing
    is uploaded; this one is given that answer up front, so the process sends
    nothing at all.
    """
    from langsmith import Client
    from langsmith.schemas import LangSmithInfo

    return Client(info=LangSmithInfo())


def _mapping(judge: Judge[Any, Any], inputs: Mapping[str, FieldSource] | None) -> dict[str, FieldSource]:
    if inputs is not None:
        unknown = set(inputs) - set(judge.input_model.model_fields)
        if unknown:
            fields = sorted(judge.input_model.model_fields)
            raise ValueError(f"inputs names {sorted(unknown)}, not fields of {judge.input_model.__name__} {fields}")
        return dict(inputs)
    fields = judge.input_model.model_fields
    if "response" not in fields:
        raise ValueError(f"{judge.input_model.__name__} has no default mapping: pass inputs={{field: path}}")
    return {k: v for k, v in _DEFAULTS.items() if k in fields}


def _result(verdict: Any, key: str) -> EvaluatorResult:
    to = getattr(verdict, "to_evaluator_result", None)
    if to is None:
        raise TypeError(f"a {type(verdict).__name__} has no evaluator shape")
    out: EvaluatorResult = to(key)
    return out


def as_async_evaluator(
    judge: Judge[Any, Any],
    *,
    inputs: Mapping[str, FieldSource] | None = None,
    key: str | None = None,
    context: Any = None,
) -> Callable[..., Awaitable[EvaluatorResult]]:
    """An async evaluator for ``langsmith.aevaluate`` (or openevals-style use).

    ``inputs`` maps the judge's input fields to ``inputs.x`` / ``outputs.x`` /
    ``reference_outputs.x`` paths or functions of those three dicts; a bare
    root stands for its only value. The default maps instruction, response
    and reference to the three roots. ``key`` names the feedback (default:
    the judge's name); ``context`` is the judge's runtime context (its backend).
    """
    mapping = _mapping(judge, inputs)
    name = key or judge.name

    async def evaluator(
        inputs: dict[str, Any] | None = None,
        outputs: dict[str, Any] | None = None,
        reference_outputs: dict[str, Any] | None = None,
    ) -> EvaluatorResult:
        args = {"inputs": inputs or {}, "outputs": outputs or {}, "reference_outputs": reference_outputs or {}}
        verdict = await judge.ajudge(resolve_fields(args, mapping, optional=_OPTIONAL), context=context)
        return _result(verdict, name)

    evaluator.__name__ = name
    return evaluator


def as_evaluator(
    judge: Judge[Any, Any],
    *,
    inputs: Mapping[str, FieldSource] | None = None,
    key: str | None = None,
    context: Any = None,
) -> Callable[..., EvaluatorResult]:
    """A sync evaluator for ``langsmith.evaluate``; see :func:`as_async_evaluator`."""
    inner = as_async_evaluator(judge, inputs=inputs, key=key, context=context)

    def evaluator(
        inputs: dict[str, Any] | None = None,
        outputs: dict[str, Any] | None = None,
        reference_outputs: dict[str, Any] | None = None,
    ) -> EvaluatorResult:
        return run_sync(inner(inputs=inputs, outputs=outputs, reference_outputs=reference_outputs))

    evaluator.__name__ = inner.__name__
    return evaluator


def as_comparative_evaluator(
    judge: Judge[Any, Any],
    *,
    inputs: Mapping[str, FieldSource] | None = None,
    key: str = "preference",
    context: Any = None,
) -> Callable[[Sequence[Any], Any], dict[str, Any]]:
    """A comparative evaluator for LangSmith pairwise experiments
    (``evaluate((experiment_a, experiment_b), evaluators=[...])``).

    It takes two runs and their example and returns the
    ``ComparisonEvaluationResult`` shape: ``scores`` maps each run id to 1.0
    (preferred), 0.0, or 0.5 for a tie. Use a swap-debiased pairwise judge
    (``PairwiseJudge`` judges both orders by default), so neither run wins by
    coming first. A failed verdict scores both runs None. ``inputs`` maps
    ``instruction`` and ``reference`` from the example (``inputs.x``,
    ``reference_outputs.x``) and ``response`` from each run (``outputs.x``).
    """
    if judge.input_model is not PairwiseInput:
        raise ValueError(f"a comparative evaluator needs a pairwise judge, got one for {judge.input_model.__name__}")
    mapping = dict(inputs) if inputs is not None else dict(_DEFAULTS)
    if "response" not in mapping:
        raise ValueError("inputs must map 'response' (read from each run's outputs)")
    response = mapping.pop("response")

    async def compare(runs: Sequence[Any], example: Any) -> dict[str, Any]:
        if len(runs) != 2:
            raise ValueError(f"a pairwise judge compares two runs, got {len(runs)}")
        shared = {"inputs": example.inputs or {}, "reference_outputs": example.outputs or {}}
        answers = [
            resolve_fields({**shared, "outputs": run.outputs or {}}, {"response": response})["response"] for run in runs
        ]
        fields = resolve_fields({**shared, "outputs": {}}, mapping, optional=_OPTIONAL)
        verdict: PairwiseVerdict = await judge.ajudge(
            {**fields, "response_a": answers[0], "response_b": answers[1]}, context=context
        )
        a, b = (str(run.id) for run in runs)
        if verdict.status is not Status.OK or verdict.winner is None:
            scores: dict[str, float | None] = {a: None, b: None}
            comment = f"[{verdict.status.value}] {verdict.reason}"
        else:
            pa = {"A": 1.0, "B": 0.0, "tie": 0.5}[verdict.winner]
            scores = {a: pa, b: 1.0 - pa}
            flag = " (the two answer orders disagreed)" if verdict.inconsistent else ""
            comment = (verdict.rationale or f"winner: {verdict.winner}") + flag
        return {"key": key, "scores": scores, "comment": comment}

    def evaluator(runs: Sequence[Any], example: Any) -> dict[str, Any]:
        return run_sync(compare(runs, example))

    evaluator.__name__ = key
    return evaluator
