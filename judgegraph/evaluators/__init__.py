"""Judges as evaluators for LangSmith and openevals-style code.

- :func:`as_evaluator` / :func:`as_async_evaluator`: a judge as a per-run
  evaluator for ``langsmith.evaluate`` / ``aevaluate``, returning the
  openevals :class:`~judgegraph.types.EvaluatorResult` shape.
- :func:`as_comparative_evaluator`: a pairwise judge as a comparative
  evaluator for LangSmith's pairwise experiments.
"""

from judgegraph.types import EvaluatorResult

from ._fields import EvaluatorArgs, FieldSource, resolve_fields
from ._langsmith import as_async_evaluator, as_comparative_evaluator, as_evaluator, offline_client

__all__ = [
    "EvaluatorArgs",
    "EvaluatorResult",
    "FieldSource",
    "as_async_evaluator",
    "as_comparative_evaluator",
    "as_evaluator",
    "offline_client",
    "resolve_fields",
]
