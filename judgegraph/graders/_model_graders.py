"""``score_model`` and ``label_model`` graders: model judges whose prompt is
the grader's own messages.

The grader's messages become a :class:`GraderTemplate`, a judgegraph
:class:`~judgegraph.judges.Template` that renders them turn by turn. Each
``{{item.…}}`` / ``{{sample.…}}`` is filled with its value neutralised and
wrapped in delimiters (``⟦begin sample.output_text⟧ … ⟦end …⟧``), as every
judgegraph template holds evaluated content, and judgegraph's system note on
delimiters comes first. The answer format (``[RESULT] n`` or a label, or the
JSON schema under structured output) is appended to the last user message, so
the verdict is parsed as strictly as any judge's, repaired once, and a reply
that cannot be read is ``unparsed``, never a default score.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from judgegraph._templates import _SCORE_JSON, _SCORE_TEXT, _SYSTEM, Template, _block, neutralize
from judgegraph.backends import Backend, GenerateRequest, GenerateResult, backend_identity
from judgegraph.judges import FromContext, ModelJudge, Outcome
from judgegraph.types import JudgeInputError, Message, Status

from ._config import LabelModelConfig, SamplingParams, ScoreModelConfig
from ._inputs import GraderInput, GraderResult, graded
from ._templating import refs, render, resolve

__all__ = ["GraderTemplate", "LabelModelGrader", "ScoreModelGrader", "grader_template"]

Role = Literal["system", "user", "assistant"]


class GraderTemplate(Template):
    """A template made of an OpenAI grader's messages (see the module doc)."""

    turns: tuple[tuple[Role, str], ...]
    paths: tuple[str, ...]

    def render(self, fields: dict[str, str | None], *, scale: tuple[int, int], structured: bool) -> list[Message]:
        def value(path: str) -> str:
            text = fields.get(path)
            if text is None:
                raise JudgeInputError(f"{path}: the grader refers to it, and the input has none")
            return _block(path, neutralize(text))

        lo, hi = scale
        fmt = (self.json_format if structured else self.text_format).format(lo=lo, hi=hi)
        system = [self.system, *(render(t, value) for r, t in self.turns if r == "system")]
        turns = [Message(role=r, content=render(t, value)) for r, t in self.turns if r != "system"]
        last = max(i for i, m in enumerate(turns) if m.role == "user")
        turns[last] = Message(role="user", content=f"{turns[last].content}\n\n{fmt}")
        return [Message(role="system", content="\n\n".join(system)), *turns]


def grader_template(config: ScoreModelConfig | LabelModelConfig) -> GraderTemplate:
    """The template for a model grader's messages; ValueError naming a reference it cannot fill."""
    turns: list[tuple[Role, str]] = []
    paths: list[str] = []
    for i, m in enumerate(config.input):
        text = m.text()
        paths += refs(text, field=f"input[{i}].content")
        # OpenAI's developer role is the system role of chat-completions backends.
        turns.append(("system" if m.role == "developer" else m.role, text))
    if isinstance(config, LabelModelConfig):
        labels = tuple(config.labels)
        shown = ", ".join(f"`{lb}`" for lb in labels)
        parser: Literal["score", "label"] = "label"
        text_format = (
            f"Answer with exactly one of these labels: {shown}. Explain your reasoning briefly first. Then, on "
            "the last line and with nothing after it, write `[RESULT] <label>`, where <label> is one of them."
        )
        enum = " | ".join(f'"{lb}"' for lb in labels)
        json_format = f'Answer with a JSON object {{{{"rationale": string, "label": {enum}}}}}.'
        scale = (0, 0)
    else:
        labels, parser, text_format, json_format, scale = (), "score", _SCORE_TEXT, _SCORE_JSON, config.scale()
    digest = hashlib.sha256(repr((turns, labels, scale, parser)).encode()).hexdigest()[:12]
    return GraderTemplate(
        id=f"openai-{config.type}-{digest}",
        version=1,
        kind="pointwise",
        parser=parser,
        default_scale=scale,
        system=_SYSTEM,
        user="\n\n".join(t for _, t in turns),
        text_format=text_format,
        json_format=json_format,
        labels=labels,
        turns=tuple(turns),
        paths=tuple(dict.fromkeys(paths)),
    )


class _Sampled:
    """A backend whose requests carry the grader's temperature and seed. It
    wraps the backend each call resolves, outside any cache, so the cache and
    the job store key verdicts by them (they are request fields)."""

    def __init__(self, inner: Backend, params: SamplingParams) -> None:
        self.inner = inner
        self.params = params
        self.name: str = inner.name
        self.model: str = inner.model
        self.capabilities = inner.capabilities
        self.pricing = inner.pricing

    def identity(self) -> dict[str, Any]:
        return backend_identity(self.inner)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        p = self.params
        changes: dict[str, Any] = {}
        if p.temperature is not None:
            changes["temperature"] = p.temperature
        if p.seed is not None:
            changes["seed"] = p.seed
        return await self.inner.generate(dataclasses.replace(request, **changes))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def default_backend(config: ScoreModelConfig | LabelModelConfig, params: SamplingParams) -> Backend:
    """The config's model on OpenAI, with its reasoning effort (key from ``OPENAI_API_KEY``)."""
    from judgegraph.backends import OpenAIBackend

    return OpenAIBackend(config.model, reasoning_effort=params.reasoning_effort)


class _ModelGrader(ModelJudge[GraderInput, GraderResult]):
    input_model = GraderInput
    default_template = "pointwise-rubric"
    grader_type: str
    config: ScoreModelConfig | LabelModelConfig

    def __init__(
        self,
        config: ScoreModelConfig | LabelModelConfig,
        *,
        sampling: SamplingParams,
        backend: Backend | str | FromContext | None,
        structured: bool | None,
        top_logprobs: int,
        repair: bool,
    ) -> None:
        template = grader_template(config)
        super().__init__(
            default_backend(config, sampling) if backend is None else backend,
            name=config.name or config.type,
            template=template,
            scale=template.default_scale,
            structured=structured,
            max_tokens=sampling.max_completions_tokens or 512,
            top_logprobs=top_logprobs,
            repair=repair,
        )
        self.config = config
        self.sampling = sampling
        if not isinstance(self.backend, FromContext):
            self._check_effort(self.backend)

    def _check_effort(self, backend: Backend) -> None:
        want = self.sampling.reasoning_effort
        have = getattr(backend, "reasoning_effort", None)
        if want is not None and have != want:
            raise ValueError(
                f"{self.name}: sampling_params.reasoning_effort is {want!r}, and the backend sends {have!r}; "
                f"give a backend built with reasoning_effort={want!r}"
            )

    def _runner(self, backend: Backend | None, context: Any) -> Callable[[GraderInput], Awaitable[GraderResult]]:
        # A backend that contradicts the config is a set-up error, raised before any item is judged.
        self._check_effort(self.resolve_backend(backend, context))
        return super()._runner(backend, context)

    def _fields(self, item: GraderInput) -> dict[str, str | None]:
        assert isinstance(self.template, GraderTemplate)
        return {path: resolve(path, item) for path in self.template.paths}

    async def _ask(self, item: GraderInput, backend: Backend) -> tuple[Outcome, Any]:
        self._check_effort(backend)
        started = time.perf_counter()
        o = await self._call(_Sampled(backend, self.sampling), self._fields(item), self.scale)
        return o, self._provenance(backend, [o], o.status, time.perf_counter() - started)

    def _failed(self, o: Outcome, prov: Any, threshold: float | None) -> GraderResult:
        return GraderResult(
            grader=self.name,
            type=self.grader_type,
            status=o.status if o.status is not Status.OK else Status.UNPARSED,
            reason=o.reason,
            raw_text=o.raw_text,
            provenance=prov,
            pass_threshold=threshold,
        )


class ScoreModelGrader(_ModelGrader):
    """A ``score_model`` grader: the model's whole-number score on ``range``
    (default [0, 1]); it passes at ``pass_threshold`` when one is set.
    ``confidence`` is the probability of that score when the backend gives logprobs."""

    grader_type = "score_model"
    config: ScoreModelConfig

    def __init__(
        self,
        config: ScoreModelConfig,
        *,
        backend: Backend | str | FromContext | None = None,
        structured: bool | None = None,
        top_logprobs: int = 10,
        repair: bool = True,
    ) -> None:
        super().__init__(
            config,
            sampling=config.sampling_params or SamplingParams(),
            backend=backend,
            structured=structured,
            top_logprobs=top_logprobs,
            repair=repair,
        )

    async def _judge(self, item: GraderInput, backend: Backend) -> GraderResult:
        o, prov = await self._ask(item, backend)
        threshold = self.config.pass_threshold
        if o.status is not Status.OK or o.parsed is None or not isinstance(o.parsed.value, int):
            return self._failed(o, prov, threshold)
        score = o.parsed.value
        confidence = o.distribution.get(score) if o.distribution else None
        return graded(
            self.name,
            self.grader_type,
            float(score),
            threshold,
            confidence=confidence,
            rationale=o.parsed.rationale,
            raw_text=o.raw_text,
            provenance=prov,
        )


class LabelModelGrader(_ModelGrader):
    """A ``label_model`` grader: the model picks one of ``labels``; it passes
    when that label is among ``passing_labels`` (score 1.0, else 0.0)."""

    grader_type = "label_model"
    config: LabelModelConfig

    def __init__(
        self,
        config: LabelModelConfig,
        *,
        backend: Backend | str | FromContext | None = None,
        structured: bool | None = None,
        top_logprobs: int = 10,
        repair: bool = True,
    ) -> None:
        super().__init__(
            config,
            sampling=SamplingParams(),
            backend=backend,
            structured=structured,
            top_logprobs=top_logprobs,
            repair=repair,
        )

    async def _judge(self, item: GraderInput, backend: Backend) -> GraderResult:
        o, prov = await self._ask(item, backend)
        if o.status is not Status.OK or o.parsed is None:
            return self._failed(o, prov, None)
        # The parser matches labels ignoring case; report the config's spelling.
        label = next(lb for lb in self.config.labels if lb.casefold() == str(o.parsed.value).casefold())
        passed = label in self.config.passing_labels
        return graded(
            self.name,
            self.grader_type,
            1.0 if passed else 0.0,
            None,
            passed=passed,
            label=label,
            rationale=o.parsed.rationale,
            raw_text=o.raw_text,
            provenance=prov,
        )
