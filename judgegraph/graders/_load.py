"""Load an OpenAI Evals grader config into the judgegraph grader that runs it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from judgegraph.backends import Backend
from judgegraph.judges import FromContext, Judge

from ._checks import Embed, PythonGrader, StringCheckGrader, TextSimilarityGrader
from ._config import (
    GraderConfigError,
    LabelModelConfig,
    MultiConfig,
    PythonConfig,
    ScoreModelConfig,
    StringCheckConfig,
    TextSimilarityConfig,
    parse_grader_config,
)
from ._inputs import GraderInput, GraderResult
from ._model_graders import LabelModelGrader, ScoreModelGrader
from ._multi import MultiGrader

__all__ = ["create_grader"]

Grader = Judge[GraderInput, GraderResult]


def create_grader(
    config: str | os.PathLike[str] | Mapping[str, Any],
    *,
    backend: Backend | str | FromContext | None = None,
    allow_python: bool = False,
    embed: Embed | None = None,
    structured: bool | None = None,
    repair: bool = True,
) -> Grader:
    """The grader an OpenAI Evals grader config describes, as a judgegraph judge
    (``ajudge({"item": {...}, "sample": {"output_text": ...}})`` gives a
    :class:`GraderResult`).

    ``config`` is a mapping, a JSON string or a JSON file's path. Fields
    judgegraph cannot honour are refused by name (:class:`GraderConfigError`).
    ``backend`` is what model graders call (any judgegraph backend, model id
    or ``from_context(...)``); by default each one's ``model`` on OpenAI.
    ``allow_python=True`` is the consent a ``python`` grader needs: it runs
    the config's code in this process. ``embed`` (texts in, vectors out)
    makes ``cosine`` similarity available.
    """
    parsed = parse_grader_config(config)
    return _build(parsed, backend=backend, allow_python=allow_python, embed=embed, structured=structured, repair=repair)


def _build(
    config: Any,
    *,
    backend: Backend | str | FromContext | None,
    allow_python: bool,
    embed: Embed | None,
    structured: bool | None,
    repair: bool,
) -> Grader:
    name = config.name or config.type
    try:
        if isinstance(config, StringCheckConfig):
            return StringCheckGrader(config)
        if isinstance(config, TextSimilarityConfig):
            return TextSimilarityGrader(config, embed=embed)
        if isinstance(config, PythonConfig):
            return PythonGrader(config, allow_python=allow_python)
        if isinstance(config, ScoreModelConfig):
            return ScoreModelGrader(config, backend=backend, structured=structured, repair=repair)
        if isinstance(config, LabelModelConfig):
            return LabelModelGrader(config, backend=backend, structured=structured, repair=repair)
        assert isinstance(config, MultiConfig)
        parts = {
            key: _build(
                sub.model_copy(update={"name": sub.name or key}),
                backend=backend,
                allow_python=allow_python,
                embed=embed,
                structured=structured,
                repair=repair,
            )
            for key, sub in config.graders.items()
        }
        return MultiGrader(config, parts)
    except GraderConfigError as exc:
        raise GraderConfigError(str(exc) if str(exc).startswith(f"{name}:") else f"{name}: {exc}") from None
    except ValueError as exc:  # a template reference or formula judgegraph cannot run
        raise GraderConfigError(f"{name}: {exc}") from None
