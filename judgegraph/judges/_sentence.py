"""A judge from one sentence: the criterion in plain words, a list of
allowed verdicts or a numeric scale, and optional human-labelled examples.

The verdict is parsed as strictly as a score: ``[RESULT] <label>`` (or the
JSON ``label`` field) must be exactly one of the choices, up to case; any
other word is ``unparsed``. Labelled examples (human corrections of earlier
verdicts, or fresh labels) go into the prompt, the ``k`` most similar to the
item first. Similarity is a cheap lexical one: TF-IDF cosine over words
(IDF from the labelled examples), 3/4 from the answers and 1/4 from the
requests. No embedding
model, no download; it finds near-duplicates and shared phrasing, not
paraphrases. The examples' word weights are computed once, when the judge
gets them, and an item is ranked against them through an inverted index, off
the event loop.
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import math
import random
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from anyio import to_thread
from pydantic import field_validator

from judgegraph._templates import _SYSTEM, Template
from judgegraph.backends import Backend
from judgegraph.types import FrozenModel, LabelVerdict, PointwiseInput, PointwiseScore, Status

from ._base import CONTEXT_BACKEND, FromContext
from ._contract import Context
from ._model import CallOptions, ModelJudge, Outcome, spell_out_options

__all__ = ["FewShotCheck", "LabelledExample", "SentenceJudge", "acheck_few_shot", "create_judge", "similarity"]

_WORD = re.compile(r"\w+")


class LabelledExample(FrozenModel):
    """One labelled trace: a request, an answer and the verdict a person gave
    (a label among the judge's choices, or a score on its scale)."""

    instruction: str
    response: str
    verdict: str | int
    rationale: str | None = None

    @field_validator("instruction", "response")
    @classmethod
    def _nonempty(cls, v: str, info: Any) -> str:
        if not v.strip():
            raise ValueError(f"{info.field_name} must be a non-empty string")
        return v


def _bag(text: str) -> Counter[str]:
    return Counter(w.casefold() for w in _WORD.findall(text))


def similarity(a: str, b: str, *, idf: Mapping[str, float] | None = None) -> float:
    """Cosine of word-count vectors, each word weighted by ``idf`` when given
    (unknown words weigh 1): 1.0 for the same words, 0.0 for none shared."""
    wa, wb = _bag(a), _bag(b)
    w = idf or {}
    va = {t: n * w.get(t, 1.0) for t, n in wa.items()}
    vb = {t: n * w.get(t, 1.0) for t, n in wb.items()}
    dot = sum(x * vb.get(t, 0.0) for t, x in va.items())
    norm = math.sqrt(sum(x * x for x in va.values())) * math.sqrt(sum(x * x for x in vb.values()))
    return dot / norm if norm else 0.0


def _unit_vector(bag: Counter[str], idf: Mapping[str, float]) -> dict[str, float]:
    # Words ``idf`` does not know weigh 1, as in :func:`similarity`.
    v = {t: n * idf.get(t, 1.0) for t, n in bag.items()}
    norm = math.sqrt(sum(x * x for x in v.values()))
    return {t: x / norm for t, x in v.items()} if norm else {}


class _ExampleIndex:
    """The examples' TF-IDF unit vectors as an inverted index (word -> the
    examples that have it, with its weight there), built once per example set.
    Ranking an item then touches only the postings of the item's own words,
    instead of re-reading every example for every item."""

    def __init__(self, examples: Sequence[LabelledExample]) -> None:
        self.n = len(examples)
        q_bags = [_bag(ex.instruction) for ex in examples]
        r_bags = [_bag(ex.response) for ex in examples]
        self.idf_q = _idf_of_bags(q_bags)
        self.idf_r = _idf_of_bags(r_bags)
        self.post_q = self._postings(q_bags, self.idf_q)
        self.post_r = self._postings(r_bags, self.idf_r)

    @staticmethod
    def _postings(bags: Sequence[Counter[str]], idf: Mapping[str, float]) -> dict[str, list[tuple[int, float]]]:
        post: dict[str, list[tuple[int, float]]] = {}
        for i, bag in enumerate(bags):
            for t, x in _unit_vector(bag, idf).items():
                post.setdefault(t, []).append((i, x))
        return post

    def top(self, instruction: str, response: str, k: int) -> list[int]:
        """Indices of the ``k`` examples most similar to the item, most similar first (ties: earlier first)."""
        scores = [0.0] * self.n
        for weight, text, idf, post in (
            (0.25, instruction, self.idf_q, self.post_q),
            (0.75, response, self.idf_r, self.post_r),
        ):
            for t, x in _unit_vector(_bag(text), idf).items():
                for i, y in post.get(t, ()):
                    scores[i] += weight * x * y
        return heapq.nsmallest(k, range(self.n), key=lambda i: (-scores[i], i))


def _idf_of_bags(bags: Sequence[Counter[str]]) -> dict[str, float]:
    # Smoothed inverse document frequency: words in every text ("it", "the") count little.
    df: Counter[str] = Counter()
    for b in bags:
        df.update(b.keys())
    n = len(bags)
    return {word: math.log((1 + n) / (1 + k)) + 1e-3 for word, k in df.items()}


def _check_labels(choices: Sequence[str]) -> tuple[str, ...]:
    labels = tuple(choices)
    if len(labels) < 2:
        raise ValueError("choices needs at least two labels")
    seen: set[str] = set()
    for i, label in enumerate(labels):
        if not label.strip() or label != label.strip() or re.search(r"[\n\[\]`{}]", label):
            raise ValueError(f"choices[{i}] = {label!r}: a label is one line of text without brackets or backticks")
        if label.casefold() in seen:
            raise ValueError(f"choices[{i}] = {label!r} repeats another label (labels are matched ignoring case)")
        seen.add(label.casefold())
    return labels


def _default_scores(labels: tuple[str, ...]) -> dict[str, float | bool]:
    # Choices are listed best first: two labels read as True/False (the
    # openevals shape of a yes/no verdict), more as evenly spaced 1.0 .. 0.0.
    if len(labels) == 2:
        return {labels[0]: True, labels[1]: False}
    return {label: 1.0 - i / (len(labels) - 1) for i, label in enumerate(labels)}


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _template(criterion: str, labels: tuple[str, ...], scale: tuple[int, int]) -> Template:
    digest = hashlib.sha256(repr((criterion, labels, scale)).encode()).hexdigest()[:12]
    shown = " | ".join(f'"{lb}"' for lb in labels)
    if labels:
        task = "Answer with exactly one of these labels: " + ", ".join(f"`{lb}`" for lb in labels) + "."
        text_format = (
            "Explain your reasoning briefly first. Then, on the last line and with nothing after it, write "
            "`[RESULT] <label>`, where <label> is exactly one of the labels above."
        )
        json_format = f'Answer with a JSON object {{{{"rationale": string, "label": {_braces(shown)}}}}}.'
    else:
        task = "Grade it on a whole-number scale from {lo} (does not meet the criterion) to {hi} (fully meets it)."
        text_format = (
            "Explain your reasoning briefly first. Then, on the last line and with nothing after it, write "
            "`[RESULT] n` where n is a whole number from {lo} to {hi}."
        )
        json_format = '{{"rationale": string, "score": integer}}: answer with that JSON object; score is {lo}-{hi}.'
    return Template(
        id=f"sentence-{digest}",
        version=1,
        kind="pointwise",
        parser="label" if labels else "score",
        default_scale=scale,
        system=_SYSTEM,
        user=(
            "Judge one answer against the criterion below.\n"
            f"Criterion: {_braces(criterion.strip())}\n{task}\n"
            "{examples_block}\n{instruction_block}\n{context_block}\n{reference_block}{response_block}\n\n{format}"
        ),
        text_format=text_format,
        json_format=json_format,
        labels=labels,
    )


class SentenceJudge(ModelJudge[PointwiseInput, LabelVerdict | PointwiseScore]):
    """A judge made from a criterion sentence (see :func:`create_judge`).

    With ``choices`` it returns a :class:`LabelVerdict`; with ``scale`` a
    :class:`PointwiseScore`. ``examples`` are human-labelled traces; the ``k``
    most similar to each item are shown to the model, with the person's verdict.
    """

    input_model = PointwiseInput
    default_template = "pointwise-rubric"

    @spell_out_options(CallOptions)
    def __init__(
        self,
        criterion: str,
        backend: Backend | str | FromContext = CONTEXT_BACKEND,
        *,
        choices: Sequence[str] | None = None,
        scale: tuple[int, int] | None = None,
        choice_scores: Mapping[str, float | bool] | None = None,
        examples: Sequence[LabelledExample | Mapping[str, object]] = (),
        k: int = 4,
        name: str | None = None,
        **options: Unpack[CallOptions],
    ) -> None:
        if not criterion.strip():
            raise ValueError("criterion must be a non-empty sentence")
        if choices is not None and scale is not None:
            raise ValueError("give choices or scale, not both")
        labels = _check_labels(choices) if choices is not None else () if scale is not None else ("yes", "no")
        if scale is not None and not scale[0] < scale[1]:
            raise ValueError(f"scale must run from low to high, got {scale}")
        self.criterion = criterion
        self.labels = labels
        self.label_scores = dict(choice_scores) if choice_scores is not None else _default_scores(labels)
        if labels and set(self.label_scores) != set(labels):
            raise ValueError(
                f"choice_scores must give a score to each of {list(labels)}, got {list(self.label_scores)}"
            )
        if k < 0:
            raise ValueError("k must be >= 0")
        self.k = k
        resolved = scale or (0, 0)
        super().__init__(
            backend,
            name=name or "SentenceJudge",
            template=_template(criterion, labels, resolved),
            scale=resolved,
            **options,
        )
        self._set_examples(examples)

    def _set_examples(self, examples: Sequence[LabelledExample | Mapping[str, object]]) -> None:
        # ``examples`` stays a public attribute: the judge's fingerprint (store and cache
        # keys) is its public settings. The index is private and built here, once.
        self.examples = self._check_examples(examples)
        self._indexed: tuple[tuple[LabelledExample, ...], _ExampleIndex] = (self.examples, _ExampleIndex(self.examples))

    def _index(self) -> _ExampleIndex:
        """The index of ``examples``; rebuilt only when they were assigned since."""
        src, index = self._indexed
        if src is not self.examples:  # assigned directly: check and index them, once
            self._set_examples(self.examples)
            index = self._indexed[1]
        return index

    def _check_examples(
        self, examples: Sequence[LabelledExample | Mapping[str, object]]
    ) -> tuple[LabelledExample, ...]:
        out = []
        for i, raw in enumerate(examples):
            ex = raw if isinstance(raw, LabelledExample) else LabelledExample.model_validate(raw)
            if self.labels and ex.verdict not in self.labels:
                raise ValueError(f"examples[{i}].verdict {ex.verdict!r} is not one of {list(self.labels)}")
            if not self.labels and not (isinstance(ex.verdict, int) and self.scale[0] <= ex.verdict <= self.scale[1]):
                raise ValueError(f"examples[{i}].verdict {ex.verdict!r} is not a whole number on {self.scale}")
            out.append(ex)
        return tuple(out)

    def with_examples(self, examples: Sequence[LabelledExample | Mapping[str, object]]) -> SentenceJudge:
        """The same judge with other labelled examples (``()`` for none)."""
        clone = copy.copy(self)
        clone._set_examples(examples)
        return clone

    def select_examples(self, item: PointwiseInput) -> list[LabelledExample]:
        """The ``k`` labelled examples most similar to ``item``, most similar first."""
        if not self.examples or self.k == 0:
            return []
        # The verdict is about the answer, so the answer weighs most: on the
        # request alone, a polite and a rude reply to one question look alike.
        examples, index = self.examples, self._index()
        return [examples[i] for i in index.top(item.instruction, item.response, self.k)]

    def _examples_text(self, item: PointwiseInput) -> str | None:
        chosen = self.select_examples(item)
        if not chosen:
            return None
        parts = ["People applied the criterion to these similar cases; follow their judgement."]
        for i, ex in enumerate(chosen, start=1):
            why = f"\nWhy: {ex.rationale}" if ex.rationale else ""
            parts.append(f"Example {i}\nRequest: {ex.instruction}\nAnswer: {ex.response}\nVerdict: {ex.verdict}{why}")
        return "\n\n".join(parts)

    async def _judge(self, item: PointwiseInput, backend: Backend) -> LabelVerdict | PointwiseScore:
        started = time.perf_counter()
        fields: dict[str, str | None] = {
            "instruction": item.instruction,
            "response": item.response,
            "reference": item.reference,
            "context": item.context,
            # Ranking thousands of examples is CPU work: keep it off the event loop.
            "examples": await to_thread.run_sync(self._examples_text, item) if self.examples and self.k else None,
        }
        o = await self._call(backend, fields, self.scale)
        prov = self._provenance(backend, [o], o.status, time.perf_counter() - started)
        return self._label(o, prov) if self.labels else self._score(o, prov)

    def _label(self, o: Outcome, prov: Any) -> LabelVerdict:
        common: dict[str, Any] = {"choices": self.labels, "label_scores": self.label_scores, "raw_text": o.raw_text}
        if o.status is not Status.OK or o.parsed is None:
            return LabelVerdict(status=o.status, reason=o.reason, provenance=prov, **common)
        return LabelVerdict(
            status=Status.OK, label=str(o.parsed.value), rationale=o.parsed.rationale, provenance=prov, **common
        )

    def _score(self, o: Outcome, prov: Any) -> PointwiseScore:
        if o.status is not Status.OK or o.parsed is None:
            return PointwiseScore(
                status=o.status, scale=self.scale, reason=o.reason, raw_text=o.raw_text, provenance=prov
            )
        assert isinstance(o.parsed.value, int)
        dist = {int(v): p for v, p in o.distribution.items()} if o.distribution else None
        return PointwiseScore(
            status=Status.OK,
            score=o.parsed.value,
            scale=self.scale,
            expected_score=sum(v * p for v, p in dist.items()) if dist else None,
            distribution=dist,
            confidence=dist.get(o.parsed.value, 0.0) if dist else None,
            rationale=o.parsed.rationale,
            raw_text=o.raw_text,
            provenance=prov,
        )


@spell_out_options(CallOptions)
def create_judge(
    criterion: str,
    backend: Backend | str | FromContext = CONTEXT_BACKEND,
    *,
    choices: Sequence[str] | None = None,
    scale: tuple[int, int] | None = None,
    choice_scores: Mapping[str, float | bool] | None = None,
    examples: Sequence[LabelledExample | Mapping[str, object]] = (),
    k: int = 4,
    name: str | None = None,
    **options: Unpack[CallOptions],
) -> SentenceJudge:
    """A judge from a sentence: ``create_judge("Is the reply polite?", choices=["yes", "no"])``
    or ``create_judge("How polite is the reply?", scale=(1, 5))``. With neither,
    the choices are yes/no. List choices best first: two labels score True and
    False in the evaluator shape, more score 1.0 down to 0.0 evenly, unless
    ``choice_scores`` says otherwise."""
    return SentenceJudge(
        criterion,
        backend,
        choices=choices,
        scale=scale,
        choice_scores=choice_scores,
        examples=examples,
        k=k,
        name=name,
        **options,
    )


@dataclass(frozen=True)
class FewShotCheck:
    """Agreement with people on held-out labelled items, without and with examples.

    A verdict that could not be read counts as a disagreement and is also
    counted on its own (``failed_*``), so a judge cannot gain by failing."""

    n_examples: int
    n_held_out: int
    agreement_without: float
    agreement_with: float
    failed_without: int
    failed_with: int

    @property
    def gain(self) -> float:
        return self.agreement_with - self.agreement_without


def _verdict_of(result: Any) -> str | int | None:
    if isinstance(result, LabelVerdict):
        return result.label
    if isinstance(result, PointwiseScore):
        return result.score
    return None


async def acheck_few_shot(
    judge: SentenceJudge,
    labelled: Sequence[LabelledExample | Mapping[str, object]],
    *,
    held_out: float = 0.5,
    seed: int = 0,
    backend: Backend | None = None,
    context: Context = None,
    max_concurrency: int = 8,
) -> FewShotCheck:
    """Split ``labelled`` at random (``seed``, stratified by verdict) into
    examples and a held-out part; judge the held-out items with no examples and with the others as
    examples, and compare each with the human verdict."""
    items = list(judge._check_examples(labelled))
    if len(items) < 2 or not 0 < held_out < 1:
        raise ValueError("need at least two labelled items and 0 < held_out < 1")
    # Stratified by verdict, so the examples and the held-out part both carry every kind of verdict.
    rng = random.Random(seed)
    test: list[LabelledExample] = []
    pool: list[LabelledExample] = []
    for verdict in sorted({ex.verdict for ex in items}, key=str):
        group = [ex for ex in items if ex.verdict == verdict]
        rng.shuffle(group)
        cut = round(len(group) * held_out)
        test += group[:cut]
        pool += group[cut:]
    if not test or not pool:
        raise ValueError("too few labelled items to hold some out and keep some as examples")
    inputs = [PointwiseInput(instruction=ex.instruction, response=ex.response) for ex in test]

    async def agreement(j: SentenceJudge) -> tuple[float, int]:
        results = await j.ajudge_many(inputs, max_concurrency=max_concurrency, backend=backend, context=context)
        verdicts = [_verdict_of(r) for r in results]
        hits = sum(v is not None and v == ex.verdict for v, ex in zip(verdicts, test, strict=True))
        return hits / len(test), sum(v is None for v in verdicts)

    without, failed_without = await agreement(judge.with_examples(()))
    with_, failed_with = await agreement(judge.with_examples(pool))
    return FewShotCheck(len(pool), len(test), without, with_, failed_without, failed_with)
