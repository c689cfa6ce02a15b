"""Judges: the plain :class:`Judge` API, model-backed judges, composites,
replays and LangGraph nodes.

- :class:`AsyncJudge`: the one judge contract (``ajudge(item, *, context)``
  and declared capabilities) that graphs and jobs rely on.
- :class:`Judge`: what every judge is (input model, name, ``ajudge``,
  ``ajudge_many``, the Runnable bridge, the runtime-context lookup).
- :class:`ModelJudgeOptions` (and its part :class:`CallOptions`): the model
  judges' options, declared once; constructors and factories take them as
  ``**options: Unpack[ModelJudgeOptions]``.
- :class:`ModelJudge`: a judge that asks a model through a template and a
  backend (``PointwiseJudge``, ``PairwiseJudge``, ``RubricJudge``, ``MultiTurnJudge``).
- :class:`CompositeJudge`: a judge made of judges (ensembles here, cascades in
  :mod:`judgegraph.cascade`), with the helpers composites share.
- :func:`create_sampled_judge`: a model judge drawn k times per item, its
  confidence from the draws' votes (for judges with no logprobs).
- Templates (:func:`get_template`, :func:`register_template`) and the output
  parser (:func:`parse_output`) the model judges use.
"""

from __future__ import annotations

from judgegraph._parsing import ParseError, parse_output
from judgegraph._templates import Template, get_template, list_templates, register_template

from ._base import (
    CONTEXT_BACKEND,
    CONTEXT_CONFIG_KEY,
    RAISE_ON_FAILURE_KEY,
    FromContext,
    Judge,
    JudgeFailedError,
    JudgeInputError,
    coerce_input,
    context_from_config,
    find_in_context,
    from_context,
    run_sync,
    worst,
)
from ._composite import (
    CompositeJudge,
    Result,
    arun_part,
    cost_of,
    judge_name,
    latency_of,
    sum_usage,
    verdict_text,
)
from ._contract import AsyncJudge, Context, ajudge_one_order, as_async_judge
from ._ensemble import Aggregation, EnsembleJudge, create_ensemble_judge
from ._fingerprint import fingerprint_for, judge_fingerprint, node_identity
from ._model import CallOptions, ModelJudge, ModelJudgeOptions, Outcome
from ._node import create_batch_judge_node, create_judge_node, graph_node
from ._pairwise import PairwiseJudge, create_pairwise_judge
from ._pointwise import MultiTurnJudge, PointwiseJudge, create_multiturn_judge, create_pointwise_judge
from ._replay import (
    LLMBarReplay,
    ReplayJudge,
    VerdictRecord,
    arecord_verdicts,
    create_replay_judge,
    item_key,
    llmbar_replay,
    read_verdicts,
    write_verdicts,
)
from ._rubric import RubricJudge, create_rubric_judge
from ._sampled import SampledAggregation, SampledJudge, create_sampled_judge, takes_temperature
from ._sentence import FewShotCheck, LabelledExample, SentenceJudge, acheck_few_shot, create_judge, similarity
from ._threshold import check_threshold, score_scale
from ._trajectory import PairwiseTrajectoryJudge, TrajectoryJudge, create_trajectory_judge
from ._trajectory_inputs import TrajectoryInput, TrajectoryMatchInput, TrajectoryPairInput
from ._trajectory_match import ArgsMode, MatchMode, TrajectoryMatchJudge, match_trajectory
from ._transcript import render_message, render_transcript

__all__ = [
    "CONTEXT_BACKEND",
    "CONTEXT_CONFIG_KEY",
    "RAISE_ON_FAILURE_KEY",
    "Aggregation",
    "ArgsMode",
    "AsyncJudge",
    "CallOptions",
    "CompositeJudge",
    "Context",
    "EnsembleJudge",
    "FewShotCheck",
    "FromContext",
    "Judge",
    "JudgeFailedError",
    "JudgeInputError",
    "LLMBarReplay",
    "LabelledExample",
    "MatchMode",
    "ModelJudge",
    "ModelJudgeOptions",
    "MultiTurnJudge",
    "Outcome",
    "PairwiseJudge",
    "PairwiseTrajectoryJudge",
    "ParseError",
    "PointwiseJudge",
    "ReplayJudge",
    "Result",
    "RubricJudge",
    "SampledAggregation",
    "SampledJudge",
    "SentenceJudge",
    "Template",
    "TrajectoryInput",
    "TrajectoryJudge",
    "TrajectoryMatchInput",
    "TrajectoryMatchJudge",
    "TrajectoryPairInput",
    "VerdictRecord",
    "acheck_few_shot",
    "ajudge_one_order",
    "arecord_verdicts",
    "arun_part",
    "as_async_judge",
    "check_threshold",
    "coerce_input",
    "context_from_config",
    "cost_of",
    "create_batch_judge_node",
    "create_ensemble_judge",
    "create_judge",
    "create_judge_node",
    "create_multiturn_judge",
    "create_pairwise_judge",
    "create_pointwise_judge",
    "create_replay_judge",
    "create_rubric_judge",
    "create_sampled_judge",
    "create_trajectory_judge",
    "find_in_context",
    "fingerprint_for",
    "from_context",
    "get_template",
    "graph_node",
    "item_key",
    "judge_fingerprint",
    "judge_name",
    "latency_of",
    "list_templates",
    "llmbar_replay",
    "match_trajectory",
    "node_identity",
    "parse_output",
    "read_verdicts",
    "register_template",
    "render_message",
    "render_transcript",
    "run_sync",
    "score_scale",
    "similarity",
    "sum_usage",
    "takes_temperature",
    "verdict_text",
    "worst",
    "write_verdicts",
]
