"""A pairwise judge backed by a classifier instead of a generative model.

Both answer orders are scored; the second order's probabilities are mapped
back (its A is our B) and averaged with the first. The winner is the most
probable class of that average and ``confidence`` is its probability, so a
position-biased classifier shows up as lower confidence and as
``inconsistent`` when the two orders would pick different winners.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from judgegraph.judges import FromContext, Judge, JudgeInputError, coerce_input
from judgegraph.rules import SWAPPED_WINNER
from judgegraph.types import PairwiseInput, PairwiseVerdict, Provenance, Status, SwapPolicy, Winner

from ._scorer import PairScorer

__all__ = ["ClassifierJudge", "create_classifier_judge", "load_classifier", "not_a_model"]

_CONTEXT_SCORER = FromContext("classifier")


def not_a_model(owner: str, what: str, value: str) -> TypeError:
    """A string that names no saved model: it once meant a context key, so say both ways out."""
    return TypeError(
        f"{owner}: {value!r} is no saved {what} directory; "
        f'write from_context("{value}") for the {what} the run\'s context holds'
    )


class ClassifierJudge(Judge[PairwiseInput, PairwiseVerdict]):
    """Judge pairs with a :class:`PairScorer` (an :class:`EncoderProbe` or a
    :class:`SequenceClassifier`). Same public API as the other judges:
    ``ajudge``, ``ajudge_many``, ``ainvoke``, and it works as a LangGraph node
    via ``create_judge_node``. ``scorer`` may be ``from_context(key)``, taken
    from the run's context like a backend (the default: ``from_context("classifier")``).

    ``swap=SwapPolicy(mode="single")`` scores only the given order.
    """

    input_model = PairwiseInput

    def __init__(
        self,
        scorer: PairScorer | FromContext = _CONTEXT_SCORER,
        *,
        name: str | None = None,
        swap: SwapPolicy | None = None,
    ) -> None:
        if isinstance(scorer, str):  # untyped callers: a string was once a context key
            raise not_a_model("ClassifierJudge", "scorer", scorer)
        self.scorer = scorer
        self.name = name or type(self).__name__
        self.swap = swap or SwapPolicy()

    async def ajudge_many(
        self,
        values: Sequence[PairwiseInput | Mapping[str, Any]],
        *,
        max_concurrency: int = 16,
        backend: Any = None,
        context: Any = None,
    ) -> list[PairwiseVerdict | JudgeInputError]:
        """Judge many pairs in one batched pass (``max_concurrency`` is accepted
        for API compatibility; the classifier batches instead)."""
        self._refuse_backend(backend)
        scorer = self._scorer(context)
        out: list[PairwiseVerdict | JudgeInputError | None] = [None] * len(values)
        good: list[tuple[int, PairwiseInput]] = []
        for i, v in enumerate(values):
            try:
                good.append((i, coerce_input(PairwiseInput, v, where=f"item {i}: ")))
            except JudgeInputError as exc:
                out[i] = exc
        verdicts = await self._score([item for _, item in good], scorer)
        for (i, _), verdict in zip(good, verdicts, strict=True):
            out[i] = verdict
        return [r for r in out if r is not None]

    def check_context(self, context: Any) -> None:
        self._scorer(context)

    async def _ajudge_item(self, item: PairwiseInput, context: Any) -> PairwiseVerdict:
        return (await self._score([item], self._scorer(context)))[0]

    def _scorer(self, context: Any = None) -> PairScorer:
        found = self.scorer
        if isinstance(found, FromContext):
            key, found = found.key, found.lookup(context)
            if found is None:
                raise LookupError(f"{self.name}: no scorer given and none under {key!r} in the runtime context")
        if not isinstance(found, PairScorer):
            raise TypeError(
                f"{self.name}: expected a PairScorer (EncoderProbe, SequenceClassifier), got {type(found).__name__}"
            )
        return found

    async def _score(self, items: list[PairwiseInput], scorer: PairScorer) -> list[PairwiseVerdict]:
        if not items:
            return []
        started = time.perf_counter()
        both = self.swap.mode == "both"
        batch = items + [it.swapped() for it in items] if both else items
        try:
            probs = await asyncio.to_thread(scorer.predict_proba, batch)
        except Exception as exc:  # a model failure is a verdict with a status, as for generative judges
            latency = time.perf_counter() - started
            reason = f"{type(exc).__name__}: {exc}"
            return [
                PairwiseVerdict(
                    status=Status.ERROR, reason=reason, provenance=self._prov(scorer, Status.ERROR, latency)
                )
                for _ in items
            ]
        latency = (time.perf_counter() - started) / len(items)
        n = len(items)
        return [self._verdict(probs[i], probs[n + i] if both else None, scorer, latency) for i in range(n)]

    def _verdict(
        self, first: Sequence[float], second: Sequence[float] | None, scorer: PairScorer, latency: float
    ) -> PairwiseVerdict:
        ab = self._order(dict(zip(scorer.labels, first, strict=True)))
        prov = self._prov(scorer, Status.OK, latency)
        if second is None:
            return ab.model_copy(update={"provenance": prov})
        ba = self._order({SWAPPED_WINNER[k]: p for k, p in zip(scorer.labels, second, strict=True)})
        assert ab.distribution is not None and ba.distribution is not None
        mean = {k: (ab.distribution[k] + ba.distribution[k]) / 2 for k in ab.distribution}
        winner = _argmax(mean)
        return PairwiseVerdict(
            status=Status.OK,
            winner=winner,
            confidence=mean[winner],
            distribution=mean,
            inconsistent=ab.winner != ba.winner,
            orders=(ab, ba),
            provenance=prov,
        )

    @staticmethod
    def _order(dist: dict[str, float]) -> PairwiseVerdict:
        winner = _argmax(dist)
        return PairwiseVerdict(status=Status.OK, winner=winner, confidence=dist[winner], distribution=dist)

    def _prov(self, scorer: PairScorer, status: Status, latency: float) -> Provenance:
        return Provenance(
            judge=self.name or type(self).__name__,
            backend=scorer.name,
            model=scorer.model,
            template_id=scorer.name,
            template_version=1,
            latency_s=latency,
            status=status,
        )


def _argmax(dist: Mapping[str, float]) -> Winner:
    best = max(dist, key=lambda k: dist[k])
    return cast(Winner, best)


def create_classifier_judge(
    scorer: PairScorer | str | Path | FromContext = _CONTEXT_SCORER,
    *,
    name: str | None = None,
    swap: SwapPolicy | None = None,
) -> ClassifierJudge:
    """A :class:`ClassifierJudge`. ``scorer`` is a loaded scorer, a directory
    written by a classifier's ``save`` (loaded here), or ``from_context(key)``."""
    if isinstance(scorer, Path) or (isinstance(scorer, str) and Path(scorer).is_dir()):
        scorer = load_classifier(scorer)
    if isinstance(scorer, str):
        raise not_a_model("ClassifierJudge", "scorer", scorer)
    return ClassifierJudge(scorer, name=name, swap=swap)


def load_classifier(directory: str | Path, *, device: str | None = None) -> PairScorer:
    """Load a saved :class:`EncoderProbe` or :class:`SequenceClassifier`."""
    import json

    d = Path(directory)
    meta_path = d / "classifier.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{d} has no classifier.json: not a directory saved by a judgegraph classifier")
    kind = json.loads(meta_path.read_text(encoding="utf-8")).get("kind")
    if kind == "encoder-probe":
        from ._probe import EncoderProbe

        return EncoderProbe.load(d, device=device)
    if kind == "sequence-classifier":
        from ._classifier import SequenceClassifier

        return SequenceClassifier.load(d, device=device)
    raise ValueError(f"{meta_path}: unknown classifier kind {kind!r}")
