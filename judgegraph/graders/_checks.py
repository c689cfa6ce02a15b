"""Graders that call no model: ``string_check``, ``text_similarity`` and ``python``."""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from judgegraph.judges import Judge
from judgegraph.types import MissingExtraError, Status

from ._config import GraderConfigError, PythonConfig, StringCheckConfig, TextSimilarityConfig
from ._inputs import GraderInput, GraderResult, graded
from ._templating import refs, render, resolve

__all__ = ["Embed", "PythonGrader", "StringCheckGrader", "TextSimilarityGrader", "similarity_score", "string_check"]

Embed = Callable[[list[str]], Sequence[Sequence[float]] | Awaitable[Sequence[Sequence[float]]]]
"""Texts in, one vector per text out (sync or async): what ``cosine`` needs."""

Operation = Literal["eq", "ne", "like", "ilike"]


class _LocalGrader(Judge[GraderInput, GraderResult]):
    input_model = GraderInput
    grader_type: str

    async def _ajudge_item(self, item: GraderInput, context: Any) -> GraderResult:
        return await self._grade(item)

    async def _grade(self, item: GraderInput) -> GraderResult:
        raise NotImplementedError

    def _failed(self, status: Status, reason: str, threshold: float | None) -> GraderResult:
        return GraderResult(
            grader=self.name, type=self.grader_type, status=status, reason=reason, pass_threshold=threshold
        )


def _fill(text: str, item: GraderInput) -> str:
    return render(text, lambda path: resolve(path, item))


def string_check(operation: Operation, input: str, reference: str) -> bool:
    """OpenAI's string check: ``eq``/``ne`` compare exactly; ``like`` is
    "input contains reference", ``ilike`` the same ignoring case."""
    if operation == "eq":
        return input == reference
    if operation == "ne":
        return input != reference
    if operation == "like":
        return reference in input
    return reference.casefold() in input.casefold()


class StringCheckGrader(_LocalGrader):
    """Score 1.0 when the check holds, else 0.0; it passes at 1."""

    grader_type = "string_check"

    def __init__(self, config: StringCheckConfig) -> None:
        refs(config.input, field="input")
        refs(config.reference, field="reference")
        self.config = config
        self.name = config.name or self.grader_type

    async def _grade(self, item: GraderInput) -> GraderResult:
        c = self.config
        hit = string_check(c.operation, _fill(c.input, item), _fill(c.reference, item))
        return graded(self.name, self.grader_type, 1.0 if hit else 0.0, 1.0)


# evaluation_metric -> (the module it needs, what computes it from (input, reference)).
def _fuzzy(a: str, b: str) -> float:
    from rapidfuzz import fuzz

    return float(fuzz.ratio(a, b)) / 100.0


def _bleu(a: str, b: str) -> float:
    import sacrebleu

    return float(sacrebleu.sentence_bleu(a, [b]).score) / 100.0


def _gleu(a: str, b: str) -> float:
    from nltk.translate.gleu_score import sentence_gleu

    return float(sentence_gleu([b.split()], a.split()))


def _meteor(a: str, b: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    return float(meteor_score([b.split()], a.split()))


def _rouge(key: str) -> Callable[[str, str], float]:
    def score(a: str, b: str) -> float:
        from rouge_score import rouge_scorer

        return float(rouge_scorer.RougeScorer([key]).score(b, a)[key].fmeasure)

    return score


_METRICS: dict[str, tuple[str, Callable[[str, str], float]]] = {
    "fuzzy_match": ("rapidfuzz", _fuzzy),
    "bleu": ("sacrebleu", _bleu),
    "gleu": ("nltk", _gleu),
    "meteor": ("nltk", _meteor),
    **{f"rouge_{n}": ("rouge_score", _rouge(f"rouge{n.upper() if n == 'l' else n}")) for n in "12345l"},
}


def _require(metric: str) -> None:
    module = _METRICS[metric][0]
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(f"text_similarity {metric}", "graders")
    if metric == "meteor":
        from nltk.corpus import wordnet

        try:
            wordnet.ensure_loaded()
        except LookupError:
            raise GraderConfigError(
                "evaluation_metric: meteor needs NLTK's WordNet data, which judgegraph does not download; "
                "install it (nltk.download('wordnet')) or use another metric"
            ) from None


def similarity_score(metric: str, input: str, reference: str) -> float:
    """``input`` against ``reference`` by one of the metrics that need no model."""
    if metric not in _METRICS:
        raise ValueError(f"evaluation_metric: {metric!r} is not one of {sorted(_METRICS)}")
    return _METRICS[metric][1](input, reference)


async def _cosine(embed: Embed, a: str, b: str) -> float:
    out = embed([a, b])
    vectors = await out if inspect.isawaitable(out) else out
    if len(vectors) != 2:
        raise ValueError(f"the embedding function returned {len(vectors)} vectors for 2 texts")
    u, v = ([float(x) for x in vec] for vec in vectors)
    if len(u) != len(v):
        raise ValueError(f"the embedding function returned vectors of lengths {len(u)} and {len(v)}")
    norm = math.sqrt(math.fsum(x * x for x in u)) * math.sqrt(math.fsum(y * y for y in v))
    if not norm or not math.isfinite(norm):
        raise ValueError("cosine is undefined for a zero (or non-finite) vector")
    return math.fsum(x * y for x, y in zip(u, v, strict=True)) / norm


class TextSimilarityGrader(_LocalGrader):
    """The metric's score (0-1; cosine -1-1); it passes at ``pass_threshold``."""

    grader_type = "text_similarity"

    def __init__(self, config: TextSimilarityConfig, *, embed: Embed | None = None) -> None:
        refs(config.input, field="input")
        refs(config.reference, field="reference")
        if config.evaluation_metric == "cosine":
            if embed is None:
                raise GraderConfigError(
                    "evaluation_metric: cosine needs embeddings; pass embed= (texts in, vectors out) "
                    "or use a metric that needs no model"
                )
        else:
            _require(config.evaluation_metric)
        self.config = config
        self.embed = embed
        self.name = config.name or self.grader_type

    async def _grade(self, item: GraderInput) -> GraderResult:
        c = self.config
        a, b = _fill(c.input, item), _fill(c.reference, item)
        try:
            if c.evaluation_metric == "cosine":
                assert self.embed is not None
                score = await _cosine(self.embed, a, b)
            else:
                score = similarity_score(c.evaluation_metric, a, b)
        except Exception as exc:  # a metric's failure is this item's, explicitly, not the batch's
            return self._failed(Status.ERROR, f"{c.evaluation_metric}: {type(exc).__name__}: {exc}", c.pass_threshold)
        if not math.isfinite(score):
            return self._failed(Status.ERROR, f"{c.evaluation_metric} gave {score}", c.pass_threshold)
        return graded(self.name, self.grader_type, score, c.pass_threshold)


class PythonGrader(_LocalGrader):
    """Runs the config's ``grade(sample, item) -> float`` in this process.

    It executes the config's code with this process's rights, so it is only
    built with an explicit ``allow_python=True`` (see :func:`create_grader`).
    The function gets copies of the sample (``output_text``, ``output_json``)
    and the item, and runs in a worker thread so it cannot stall the event
    loop; an exception or a return that is not a finite number is a failed
    grade, never a default score.
    """

    grader_type = "python"

    def __init__(self, config: PythonConfig, *, allow_python: bool = False) -> None:
        self.name = config.name or self.grader_type
        if not allow_python:
            raise GraderConfigError(
                f"{self.name}: a python grader runs the code in its config; pass allow_python=True to run it"
            )
        try:
            code = compile(config.source, f"<python grader {self.name}>", "exec")
        except SyntaxError as exc:
            raise GraderConfigError(f"{self.name}: source: {exc.msg} (line {exc.lineno})") from None
        namespace: dict[str, Any] = {"__name__": "judgegraph_python_grader"}
        try:
            exec(code, namespace)  # the opt-in above is the user's consent to exactly this
        except Exception as exc:
            raise GraderConfigError(f"{self.name}: source: running it raised {type(exc).__name__}: {exc}") from None
        grade = namespace.get("grade")
        if not callable(grade):
            raise GraderConfigError(f"{self.name}: source: defines no grade(sample, item) function")
        self.config = config
        self._grade_fn: Callable[[dict[str, Any], dict[str, Any]], Any] = grade

    async def _grade(self, item: GraderInput) -> GraderResult:
        threshold = self.config.pass_threshold
        sample, row = item.sample.model_dump(), copy.deepcopy(item.item)
        try:
            value = await asyncio.to_thread(self._grade_fn, sample, row)
        except Exception as exc:
            return self._failed(Status.ERROR, f"grade raised {type(exc).__name__}: {exc}", threshold)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return self._failed(Status.ERROR, f"grade returned {value!r}, not a finite number", threshold)
        return graded(self.name, self.grader_type, float(value), threshold)
