"""Classifier and regression heads (AutoModelForSequenceClassification).

A cross-encoder reads instruction, answer A and answer B in one sequence and
predicts A / B (/ tie); for pointwise traces a one-output regression head
predicts the score. Works on an encoder (BERT-like) or a decoder (the last
token is pooled). Each text gets its own token budget, so a long answer A
cannot push answer B out of the window.

This is the head the issue asks for. On small real data (PandaLM, ~700
items) end-to-end fine-tuning of a small encoder tends to learn only the
majority class; :class:`EncoderProbe` is the judge that learns there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgegraph.pretrained import pretrained_source
from judgegraph.types import MissingExtraError, PairwiseInput

from ._progress import rich_trainer_callback
from ._scorer import PairScorer
from ._traces import PairwiseTrace, PointwiseTrace

__all__ = ["ClassifierOptions", "SequenceClassifier", "train_classifier"]

_LABELS = {3: ("A", "B", "tie"), 2: ("A", "B")}


class ClassifierOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task: Literal["pairwise", "pointwise"] = "pairwise"
    labels: Literal[2, 3] = Field(default=3, description="pairwise classes: 3 = A, B, tie; 2 = A, B (ties left out)")
    swap: bool = Field(default=True, description="train on both answer orders")
    max_length: int = Field(default=320, ge=16)
    learning_rate: float = Field(default=3e-5, gt=0)
    lr_scheduler_type: str = "linear"
    warmup_steps: int = Field(default=0, ge=0)
    num_train_epochs: float = Field(default=3.0, gt=0)
    max_steps: int = -1
    batch_size: int = Field(default=16, ge=1)
    weight_decay: float = Field(default=0.01, ge=0)
    logging_steps: int = Field(default=10, ge=1)
    save_steps: int = Field(default=200, ge=1)
    save_total_limit: int | None = Field(default=2, ge=1)
    seed: int = 0


def _sep_ids(tok: Any) -> list[int]:
    if tok.sep_token_id is not None:
        return [int(tok.sep_token_id)]
    return list(tok("\n\n", add_special_tokens=False)["input_ids"])


def encode(tok: Any, parts: Sequence[str], max_length: int) -> list[int]:
    """``[CLS] part1 [SEP] part2 [SEP] ...`` within ``max_length`` tokens,
    every part truncated to its share of the budget (unused share is passed on)."""
    sep = _sep_ids(tok)
    head = [int(tok.cls_token_id)] if tok.cls_token_id is not None else []
    tail = [int(tok.eos_token_id)] if tok.cls_token_id is None and tok.eos_token_id is not None else []
    budget = max_length - len(head) - len(tail) - len(sep) * len(parts)
    if budget < len(parts):
        raise ValueError(f"max_length {max_length} is too small for {len(parts)} texts")
    pieces = [list(tok(p, add_special_tokens=False)["input_ids"]) for p in parts]
    ids = list(head)
    left = budget
    for k, piece in enumerate(pieces):
        share = left // (len(pieces) - k)
        # A part may use what the later parts will not need.
        later = sum(len(p) for p in pieces[k + 1 :])
        take = min(len(piece), max(share, left - later))
        ids += piece[:take] + sep
        left -= take
    return ids + tail


def _pair_parts(item: PairwiseInput) -> list[str]:
    return [item.instruction, item.response_a, item.response_b]


class SequenceClassifier(PairScorer):
    """A trained AutoModelForSequenceClassification, as a pair scorer
    (``predict_proba``) or, for a regression head, a scorer of single answers
    (``predict_scores``)."""

    name = "sequence-classifier"

    def __init__(self, directory: str | Path, *, device: str | None = None) -> None:
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError:
            raise MissingExtraError("SequenceClassifier", "local") from None
        d = Path(directory)
        meta = json.loads((d / "classifier.json").read_text(encoding="utf-8"))
        self.options = ClassifierOptions.model_validate(meta["options"])
        self.scale: tuple[int, int] | None = tuple(meta["scale"]) if meta.get("scale") else None  # type: ignore[assignment]
        labels = _LABELS[self.options.labels]
        super().__init__(model=str(d), labels=labels)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(str(d))
        self.net = AutoModelForSequenceClassification.from_pretrained(str(d)).to(self.device).eval()
        self.metrics: dict[str, float] = dict(meta.get("metrics", {}))

    @classmethod
    def load(cls, directory: str | Path, *, device: str | None = None) -> SequenceClassifier:
        return cls(directory, device=device)

    def _forward(self, rows: list[list[int]], batch_size: int = 32) -> Any:
        import torch

        pad = self.tokenizer.pad_token_id or 0
        outs = []
        with torch.inference_mode():
            for start in range(0, len(rows), batch_size):
                chunk = rows[start : start + batch_size]
                width = max(len(r) for r in chunk)
                ids = torch.tensor([r + [pad] * (width - len(r)) for r in chunk], device=self.device)
                mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in chunk], device=self.device)
                outs.append(self.net(input_ids=ids, attention_mask=mask).logits.float().cpu())
        return torch.cat(outs)

    def predict_proba(self, items: Sequence[PairwiseInput]) -> list[list[float]]:
        if self.options.task != "pairwise":
            raise ValueError("this classifier has a pointwise regression head; use predict_scores")
        if not items:
            return []
        rows = [encode(self.tokenizer, _pair_parts(it), self.options.max_length) for it in items]
        return [[float(p) for p in r] for r in self._forward(rows).softmax(-1)]

    def predict_scores(self, items: Sequence[tuple[str, str]]) -> list[float]:
        """Scores on the training scale for (instruction, response) pairs."""
        if self.options.task != "pointwise" or self.scale is None:
            raise ValueError("this classifier has a pairwise head; use predict_proba")
        lo, hi = self.scale
        rows = [encode(self.tokenizer, list(it), self.options.max_length) for it in items]
        return [lo + float(v) * (hi - lo) for v in self._forward(rows)[:, 0]]


def _examples(
    traces: Sequence[PairwiseTrace | PointwiseTrace], opts: ClassifierOptions, tok: Any
) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
    rows: list[dict[str, Any]] = []
    if opts.task == "pointwise":
        for t in traces:
            if not isinstance(t, PointwiseTrace):
                raise ValueError(f"trace {t.id}: a pointwise head takes pointwise traces, got {t.kind}")
        scales = {t.scale for t in traces if isinstance(t, PointwiseTrace)}
        if len(scales) != 1:
            raise ValueError(f"pointwise traces must share one scale, found {sorted(scales)}")
        lo, hi = scales.pop()
        for t in traces:
            assert isinstance(t, PointwiseTrace)
            ids = encode(tok, [t.instruction, t.response], opts.max_length)
            rows.append({"input_ids": ids, "labels": (t.score - lo) / (hi - lo)})
        return rows, (lo, hi)
    index = {lab: i for i, lab in enumerate(_LABELS[opts.labels])}
    for t in traces:
        if not isinstance(t, PairwiseTrace):
            raise ValueError(f"trace {t.id}: a pairwise head takes pairwise traces, got {t.kind}")
        if t.winner not in index:
            continue  # a tie with a two-class head
        for v in (t, t.swapped()) if opts.swap else (t,):
            rows.append(
                {"input_ids": encode(tok, _pair_parts(v.to_input()), opts.max_length), "labels": index[v.winner]}
            )
    return rows, None


def train_classifier(
    model_path: str | Path,
    traces: Sequence[PairwiseTrace | PointwiseTrace],
    output_dir: str | Path,
    *,
    options: ClassifierOptions | None = None,
    resume_from_checkpoint: bool | str | None = None,
    progress: bool = True,
    callbacks: Sequence[Any] = (),
) -> SequenceClassifier:
    """Fine-tune ``model_path`` with a fresh classification (or regression)
    head on the traces, end to end, and save it to ``output_dir/final``.
    ``callbacks``: extra ``transformers.TrainerCallback`` objects, as for
    ``train_sft`` (the training loss is in their ``on_log``)."""
    try:
        import torch
        from datasets import Dataset
        from transformers import (
            AutoModelForSequenceClassification,
            AutoTokenizer,
            DataCollatorWithPadding,
            Trainer,
            TrainingArguments,
        )
    except ImportError:
        raise MissingExtraError("train_classifier", "finetune") from None

    opts = options or ClassifierOptions()
    out = Path(output_dir)
    folder, gguf = pretrained_source(model_path)
    tok = AutoTokenizer.from_pretrained(folder, **gguf)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    rows, scale = _examples(traces, opts, tok)
    if not rows:
        raise ValueError("no training rows: every trace was a tie and the head has two classes")
    num_labels = 1 if opts.task == "pointwise" else opts.labels
    net = AutoModelForSequenceClassification.from_pretrained(
        folder,
        **gguf,
        num_labels=num_labels,
        problem_type="regression" if num_labels == 1 else "single_label_classification",
    )
    if net.config.pad_token_id is None:
        net.config.pad_token_id = tok.pad_token_id
    args = TrainingArguments(
        output_dir=str(out),
        learning_rate=opts.learning_rate,
        lr_scheduler_type=opts.lr_scheduler_type,
        warmup_steps=opts.warmup_steps,
        num_train_epochs=opts.num_train_epochs,
        max_steps=opts.max_steps,
        per_device_train_batch_size=opts.batch_size,
        weight_decay=opts.weight_decay,
        logging_steps=opts.logging_steps,
        save_steps=opts.save_steps,
        save_total_limit=opts.save_total_limit,
        seed=opts.seed,
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = Trainer(
        model=net,
        args=args,
        train_dataset=Dataset.from_list(rows),
        data_collator=DataCollatorWithPadding(tok),
        callbacks=[rich_trainer_callback("classifier", enabled=progress), *callbacks],
    )
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    final = out / "final"
    trainer.save_model(str(final))
    tok.save_pretrained(str(final))
    meta = {
        "kind": SequenceClassifier.name,
        "options": opts.model_dump(),
        "scale": list(scale) if scale else None,
        "metrics": {
            "train_loss": result.training_loss,
            "runtime_s": time.perf_counter() - started,
            "train_rows": float(len(rows)),
        },
    }
    (final / "classifier.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return SequenceClassifier(final)
