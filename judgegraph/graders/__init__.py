"""OpenAI Evals graders on judgegraph: load a grader config (``string_check``,
``text_similarity``, ``score_model``, ``label_model``, ``python``, ``multi``)
into the judgegraph judge or check that runs it.

    grader = create_grader(json.load(open("grader.json")), backend=OpenAIBackend("gpt-4o"))
    result = await grader.ajudge({"item": {"reference": "Paris"}, "sample": {"output_text": "Paris"}})
    result.score, result.passed

Each field maps onto a judgegraph option (docs/graders.md has the table);
anything unsupported is refused by name. ``python`` graders execute their
source, so they run only with ``allow_python=True``.
"""

from __future__ import annotations

from ._checks import Embed, PythonGrader, StringCheckGrader, TextSimilarityGrader, similarity_score, string_check
from ._config import (
    GraderConfig,
    GraderConfigError,
    LabelModelConfig,
    MultiConfig,
    PythonConfig,
    SamplingParams,
    ScoreModelConfig,
    StringCheckConfig,
    TextSimilarityConfig,
    parse_grader_config,
)
from ._formula import Formula, FormulaError, compile_formula
from ._inputs import GraderInput, GraderResult, GraderSample
from ._load import Grader, create_grader
from ._model_graders import GraderTemplate, LabelModelGrader, ScoreModelGrader
from ._multi import MultiGrader

__all__ = [
    "Embed",
    "Formula",
    "FormulaError",
    "Grader",
    "GraderConfig",
    "GraderConfigError",
    "GraderInput",
    "GraderResult",
    "GraderSample",
    "GraderTemplate",
    "LabelModelConfig",
    "LabelModelGrader",
    "MultiConfig",
    "MultiGrader",
    "PythonConfig",
    "PythonGrader",
    "SamplingParams",
    "ScoreModelConfig",
    "ScoreModelGrader",
    "StringCheckConfig",
    "StringCheckGrader",
    "TextSimilarityConfig",
    "TextSimilarityGrader",
    "compile_formula",
    "create_grader",
    "parse_grader_config",
    "similarity_score",
    "string_check",
]
