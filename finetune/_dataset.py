"""Turn traces into judge training examples, rendered with our own templates.

Order of work: dedup, split by instruction (so no prompt is on both sides),
then expand the training side (swap augmentation, reference drop, extra
phrasings). The validation side stays as the traces were: one canonical
rendering each, which is what the judge sees at inference.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judgegraph._templates import Template, generic_rubric, get_template, neutralize, rubric_text
from judgegraph.types import Message

from ._phrasings import phrasing, phrasing_count
from ._traces import PairwiseTrace, PointwiseTrace

__all__ = [
    "DatasetConfig",
    "Example",
    "JudgeDataset",
    "build_dataset",
    "dedup_traces",
    "split_by_instruction",
]

AnyTrace = PointwiseTrace | PairwiseTrace


class DatasetConfig(BaseModel):
    """How traces become examples. ``formats`` are template ids: each trace is
    rendered in every listed format that fits its kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    formats: tuple[str, ...] = ("pairwise-choice", "pointwise-rubric")
    swap: bool = Field(default=True, description="add each pairwise example in the other order too")
    reference_drop: float = Field(
        default=0.0, ge=0, le=1, description="share of training examples with a reference rendered without it"
    )
    phrasings: int = Field(default=1, ge=1, description="how many prompt wordings to spread training examples over")
    validation_fraction: float = Field(default=0.1, ge=0, lt=1, description="share of instructions held out")
    dedup: bool = True
    include_rationale: bool = True
    seed: int = 0

    @field_validator("formats")
    @classmethod
    def _formats(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("formats must name at least one template")
        for tid in v:
            t = get_template(tid)  # KeyError lists the registered ids
            if t.kind not in ("pointwise", "pairwise"):
                raise ValueError(f"format {tid!r} is a {t.kind} template; use a pointwise or pairwise one")
        return v


class Example(BaseModel):
    """One rendered training example: the judge prompt and the target answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    group: str = Field(description="instruction key the split is made on")
    template_id: str
    phrasing: int = 0
    swapped: bool = False
    has_reference: bool = False
    messages: tuple[Message, ...]
    completion: str
    label: str = Field(description="A, B or tie; or the score as text")

    def to_sft(self) -> dict[str, Any]:
        """TRL's conversational prompt-completion row."""
        return {
            "prompt": [{"role": m.role, "content": m.content} for m in self.messages],
            "completion": [{"role": "assistant", "content": self.completion}],
        }


class JudgeDataset(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: DatasetConfig
    train: list[Example]
    validation: list[Example]
    train_traces: list[PointwiseTrace | PairwiseTrace]
    validation_traces: list[PointwiseTrace | PairwiseTrace]
    stats: dict[str, int]

    def save(self, directory: str | Path) -> Path:
        """Write ``train.jsonl``, ``validation.jsonl`` and ``dataset.json``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        for name, rows in (("train", self.train), ("validation", self.validation)):
            with (out / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
                for ex in rows:
                    fh.write(ex.model_dump_json() + "\n")
        meta = {"config": self.config.model_dump(mode="json"), "stats": self.stats}
        (out / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return out

    def to_hf(self) -> Any:
        """A ``datasets.DatasetDict`` with TRL's prompt/completion columns."""
        from datasets import Dataset, DatasetDict

        return DatasetDict(
            {
                "train": Dataset.from_list([e.to_sft() for e in self.train]),
                "validation": Dataset.from_list([e.to_sft() for e in self.validation]),
            }
        )


# ------------------------------------------------------------------ hygiene


def _norm(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def instruction_key(trace: AnyTrace) -> str:
    """The split key: the instruction with case and spacing normalised."""
    return hashlib.sha1(_norm(trace.instruction).casefold().encode()).hexdigest()[:16]


def _content_key(t: AnyTrace) -> tuple[str, ...]:
    rubric = t.rubric.model_dump_json() if t.rubric else ""
    if isinstance(t, PairwiseTrace):
        # (A, B) and (B, A) are the same comparison.
        pair = sorted((_norm(t.response_a), _norm(t.response_b)))
        return ("pairwise", _norm(t.instruction), *pair, _norm(t.reference), rubric)
    return ("pointwise", _norm(t.instruction), _norm(t.response), _norm(t.reference), rubric)


def _label_key(t: AnyTrace) -> str:
    if isinstance(t, PairwiseTrace):
        oriented = t if _norm(t.response_a) <= _norm(t.response_b) else t.swapped()
        return oriented.winner
    return str(t.score)


def dedup_traces(traces: Iterable[AnyTrace]) -> tuple[list[AnyTrace], int, int]:
    """Drop repeated comparisons (either order counts as the same).

    The first occurrence is kept. Returns (kept, duplicates, conflicting):
    ``conflicting`` counts repeats whose label disagreed with the kept one.
    """
    seen: dict[tuple[str, ...], str] = {}
    kept: list[AnyTrace] = []
    dups = conflicts = 0
    for t in traces:
        key = _content_key(t)
        if key in seen:
            dups += 1
            conflicts += seen[key] != _label_key(t)
            continue
        seen[key] = _label_key(t)
        kept.append(t)
    return kept, dups, conflicts


def split_by_instruction(
    traces: Sequence[AnyTrace], *, validation_fraction: float, seed: int = 0
) -> tuple[list[AnyTrace], list[AnyTrace]]:
    """Hold out whole instructions: every trace of a held-out instruction
    goes to validation, so no prompt appears on both sides."""
    groups = sorted({instruction_key(t) for t in traces})
    random.Random(seed).shuffle(groups)
    n_val = round(validation_fraction * len(groups))
    if validation_fraction > 0 and len(groups) > 1:
        n_val = min(max(n_val, 1), len(groups) - 1)
    held = set(groups[:n_val])
    train = [t for t in traces if instruction_key(t) not in held]
    val = [t for t in traces if instruction_key(t) in held]
    return train, val


# ------------------------------------------------------------------ rendering

_MENTION = re.compile(r"\b(answer|response|assistant|output)(\s+)([AB])\b", re.I)


def swap_mentions(text: str) -> str:
    """Rewrite "answer A" as "answer B" and back, for a swapped rationale."""
    return _MENTION.sub(lambda m: m.group(1) + m.group(2) + ("B" if m.group(3) == "A" else "A"), text)


def _fields(t: AnyTrace, *, with_reference: bool, scale: tuple[int, int]) -> dict[str, str | None]:
    reference = t.reference if with_reference else None
    if isinstance(t, PairwiseTrace):
        return {
            "instruction": t.instruction,
            "response_a": t.response_a,
            "response_b": t.response_b,
            "reference": reference,
            "rubric_text": rubric_text(t.rubric) if t.rubric else None,
        }
    return {
        "instruction": t.instruction,
        "response": t.response,
        "reference": reference,
        "rubric_text": rubric_text(t.rubric) if t.rubric else generic_rubric(scale),
    }


def _target(t: AnyTrace, template: Template) -> tuple[str, str] | str:
    """(verdict line, label) for this template, or why it cannot be rendered."""
    if template.parser == "score":
        assert isinstance(t, PointwiseTrace)
        return f"[RESULT] {t.score}", str(t.score)
    assert isinstance(t, PairwiseTrace)
    if template.parser == "two_scores":
        if t.score_a is None or t.score_b is None:
            return "no scores"
        return f"[SCORES] {t.score_a} {t.score_b}", t.winner
    if t.winner == "tie" and template.parser == "choice_no_tie":
        return "tie not allowed"
    return f"[RESULT] {'TIE' if t.winner == 'tie' else t.winner}", t.winner


def _scale(t: AnyTrace, template: Template) -> tuple[int, int]:
    if template.parser in ("score", "two_scores"):
        return t.scale
    return template.default_scale


def _render(
    t: AnyTrace,
    template: Template,
    *,
    wording: int,
    swapped: bool,
    with_reference: bool,
    include_rationale: bool,
    group: str,
    base_id: str,
) -> Example | str:
    if isinstance(t, PairwiseTrace) and template.parser == "two_scores" and t.scale != template.default_scale:
        return "scale mismatch"
    target = _target(t, template)
    if isinstance(target, str):
        return target
    verdict, label = target
    rationale = neutralize(t.rationale).strip() if (include_rationale and t.rationale) else ""
    if swapped and rationale:
        rationale = swap_mentions(rationale)
    scale = _scale(t, template)
    messages = phrasing(template, wording).render(
        _fields(t, with_reference=with_reference, scale=scale), scale=scale, structured=False
    )
    suffix = f"{template.id}/p{wording}{'/swap' if swapped else ''}{'' if with_reference else '/noref'}"
    return Example(
        id=f"{base_id}:{suffix}",
        group=group,
        template_id=template.id,
        phrasing=wording,
        swapped=swapped,
        has_reference=with_reference and t.reference is not None,
        messages=tuple(messages),
        completion=f"{rationale}\n{verdict}" if rationale else verdict,
        label=label,
    )


def _trace_id(t: AnyTrace) -> str:
    return t.id or hashlib.sha1("\x1f".join(_content_key(t)).encode()).hexdigest()[:12]


def _expand(
    traces: Sequence[AnyTrace], cfg: DatasetConfig, rng: random.Random, *, train: bool, stats: Counter[str]
) -> list[Example]:
    templates = [get_template(f) for f in cfg.formats]
    out: list[Example] = []
    for t in traces:
        fitting = [tp for tp in templates if tp.kind == t.kind]
        if not fitting:
            stats[f"skipped: no {t.kind} format"] += 1
        for template in fitting:
            variants: list[tuple[AnyTrace, bool]] = [(t, False)]
            if train and cfg.swap and isinstance(t, PairwiseTrace):
                variants.append((t.swapped(), True))
            for v, swapped in variants:
                wording = rng.randrange(min(cfg.phrasings, phrasing_count(template))) if train else 0
                ex = _render(
                    v,
                    template,
                    wording=wording,
                    swapped=swapped,
                    with_reference=True,
                    include_rationale=cfg.include_rationale,
                    group=instruction_key(t),
                    base_id=_trace_id(t),
                )
                if isinstance(ex, str):
                    stats[f"skipped {template.id}: {ex}"] += 1
                    break  # the swapped copy cannot render either
                out.append(ex)
    return out


def _drop_references(
    examples: list[Example], traces: dict[str, AnyTrace], cfg: DatasetConfig, rng: random.Random
) -> list[Example]:
    """Re-render exactly round(ratio * n) reference-bearing examples without it."""
    with_ref = [i for i, e in enumerate(examples) if e.has_reference]
    chosen = rng.sample(with_ref, round(cfg.reference_drop * len(with_ref)))
    out = list(examples)
    for i in chosen:
        e = out[i]
        base_id = e.id.rsplit(":", 1)[0]
        t = traces[base_id]
        v = t.swapped() if e.swapped and isinstance(t, PairwiseTrace) else t
        ex = _render(
            v,
            get_template(e.template_id),
            wording=e.phrasing,
            swapped=e.swapped,
            with_reference=False,
            include_rationale=cfg.include_rationale,
            group=e.group,
            base_id=base_id,
        )
        assert isinstance(ex, Example)  # it rendered once with the same target
        out[i] = ex
    return out


def build_dataset(traces: Iterable[AnyTrace], config: DatasetConfig | None = None) -> JudgeDataset:
    """Dedup, split by instruction, then render train and validation examples."""
    cfg = config or DatasetConfig()
    all_traces = list(traces)
    if not all_traces:
        raise ValueError("no traces to build a dataset from")
    stats: Counter[str] = Counter(traces_in=len(all_traces))
    if cfg.dedup:
        all_traces, dups, conflicts = dedup_traces(all_traces)
        stats["duplicates_dropped"] = dups
        stats["conflicting_duplicates"] = conflicts
    ids = Counter(_trace_id(t) for t in all_traces)
    repeated = [i for i, n in ids.items() if n > 1]
    if repeated:
        raise ValueError(f"trace ids must be unique; repeated: {', '.join(repeated[:5])}")
    train_t, val_t = split_by_instruction(all_traces, validation_fraction=cfg.validation_fraction, seed=cfg.seed)
    rng = random.Random(cfg.seed)
    train = _expand(train_t, cfg, rng, train=True, stats=stats)
    if cfg.reference_drop > 0:
        train = _drop_references(train, {_trace_id(t): t for t in train_t}, cfg, rng)
    validation = _expand(val_t, cfg, rng, train=False, stats=stats)
    rng.shuffle(train)
    stats.update(
        train_traces=len(train_t),
        validation_traces=len(val_t),
        train_examples=len(train),
        validation_examples=len(validation),
        train_instructions=len({instruction_key(t) for t in train_t}),
        validation_instructions=len({instruction_key(t) for t in val_t}),
    )
    if not train:
        raise ValueError(f"no training examples could be rendered in formats {list(cfg.formats)}: {dict(stats)}")
    return JudgeDataset(
        config=cfg,
        train=train,
        validation=validation,
        train_traces=train_t,
        validation_traces=val_t,
        stats=dict(stats),
    )
