"""Why the cross-encoder fine-tune learned only the majority class (issue 20).

all-MiniLM-L6-v2 fine-tuned end to end (``judgegraph.finetune.train_classifier``:
``[CLS] instruction [SEP] response A [SEP] response B [SEP]``, a fresh 3-class
head over BERT's pooler, both answer orders) on the quickstart's data: PandaLM
split by prompt (seed 0, 30% of prompts held out), the train side with the
teacher's recorded verdicts, scored against the human majority on the held-out
side. Each variant changes one thing from the run NOTES recorded (lr 3e-5,
batch 16, 3 classes):

- ``base``:   as recorded, but one epoch and ``--max-length`` tokens;
- ``lr1e-4``: a learning rate 3x higher (the head and pooler start from scratch
  or from an unused pooler, and at 3e-5 they may not move in one epoch);
- ``nt``:     2 classes, ties left out of training (ties are 15% of labels and
  the hardest class; a head with ties may settle on the prior);
- ``lr1e-4-nt``: both;
- ``lr1e-4-nt-512``: and 512 tokens instead of 256 (at 256 each answer keeps
  about its first 80 tokens: its ending and its length are cut away).

For each: the training loss at the start and the end, held-out agreement,
the predicted class counts (a collapsed head predicts one class), and the
share of items whose verdict flips with the answer order (a head that reads
the answers must flip).

    nice -n 10 .venv/bin/python bench/cross_encoder_pandalm.py --variants base lr1e-4 --epochs 1
    nice -n 10 .venv/bin/python bench/cross_encoder_pandalm.py --variants   # the feature check only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _trainer_losses import loss_recorder

from judgegraph.finetune import ClassifierOptions, train_classifier
from judgegraph.quickstart import load_bundled_pandalm, split_pandalm_by_prompt
from judgegraph.quickstart._local import encoder_path, traces_for

VARIANTS: dict[str, dict[str, Any]] = {
    "base": {},
    "lr1e-4": {"learning_rate": 1e-4},
    "nt": {"labels": 2},
    "lr1e-4-nt": {"learning_rate": 1e-4, "labels": 2},
    "lr1e-4-nt-512": {"learning_rate": 1e-4, "labels": 2, "max_length": 512},
}


def run(name: str, args: argparse.Namespace, train: list[Any], held: list[Any]) -> dict[str, Any]:
    settings: dict[str, Any] = {"max_length": args.max_length, "num_train_epochs": args.epochs}
    opts = ClassifierOptions(batch_size=16, logging_steps=5, save_steps=100_000, **(settings | VARIANTS[name]))
    recorder, losses = loss_recorder()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model = train_classifier(
            encoder_path(), train, Path(tmp) / name, options=opts, progress=False, callbacks=[recorder]
        )
        probs = model.predict_proba([t.to_input() for t in held])
        swapped = model.predict_proba([t.swapped().to_input() for t in held])
    labels = ["A", "B", "tie"][: len(probs[0])]

    def pick(p: list[float]) -> str:
        return labels[max(range(len(p)), key=p.__getitem__)]

    pred = [pick(p) for p in probs]
    flip = {"A": "B", "B": "A", "tie": "tie"}
    consistent = sum(flip[pick(q)] == p for p, q in zip(pred, swapped, strict=True))
    return {
        "variant": name,
        "options": VARIANTS[name],
        "train_s": round(time.perf_counter() - started),
        "loss_first_last": [losses[0], losses[-1]] if losses else None,
        "loss_min": min(losses) if losses else None,
        "agreement": sum(p == t.winner for p, t in zip(pred, held, strict=True)) / len(held),
        "predicted": dict(Counter(pred)),
        "swap_consistent": consistent / len(held),
    }


def order_sensitivity(train: list[Any], n: int, max_length: int) -> dict[str, dict[str, float]]:
    """How much the pretrained encoder's features change when the two answers
    trade places (the label flips) against how much they differ between
    items (which, with both orders in training, says nothing of the label):
    for BERT's pooler (what the fresh head reads), the CLS token and mean
    pooling."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from judgegraph.finetune._classifier import encode

    tok = AutoTokenizer.from_pretrained(encoder_path())
    net = AutoModel.from_pretrained(encoder_path()).eval()

    def parts(t: Any) -> list[str]:
        return [t.instruction, t.response_a, t.response_b]

    def views(traces: list[Any]) -> list[Any]:
        rows = [encode(tok, parts(t), max_length) for t in traces]
        width = max(map(len, rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
        mask = (ids != 0).long()
        with torch.inference_mode():
            out = net(input_ids=ids, attention_mask=mask)
        mean = (out.last_hidden_state * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return [out.pooler_output, out.last_hidden_state[:, 0], mean]

    items = train[:n]
    res = {}
    for name, x, y in zip(("pooler", "cls", "mean"), views(items), views([t.swapped() for t in items]), strict=True):
        xn, yn = torch.nn.functional.normalize(x, dim=-1), torch.nn.functional.normalize(y, dim=-1)
        between = (xn @ xn.T)[~torch.eye(len(x), dtype=torch.bool)].mean()
        res[name] = {
            "cosine_between_items": float(between),
            "cosine_with_its_swap": float((xn * yn).sum(-1).mean()),
            "swap_change_over_item_spread": float((x - y).norm(dim=-1).mean() / (x - x.mean(0)).norm(dim=-1).mean()),
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--features", type=int, default=48, help="items for the order-sensitivity check (0: skip)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    split = split_pandalm_by_prompt(load_bundled_pandalm(), heldout_fraction=0.3, seed=0, dedupe=True)
    train, _ = traces_for(split.train, "teacher")
    held, _ = traces_for(split.heldout, "human")
    sensitivity = order_sensitivity(train, args.features, args.max_length) if args.features else None
    print(json.dumps({"order_sensitivity": sensitivity}), flush=True)
    rows = []
    for name in args.variants:
        rows.append(run(name, args, train, held))
        print(json.dumps(rows[-1]), flush=True)
    res = {
        "split": split.describe(),
        "train_traces": len(train),
        "heldout": len(held),
        "heldout_labels": dict(Counter(t.winner for t in held)),
        "train_labels": dict(Counter(t.winner for t in train)),
        "order_sensitivity": sensitivity,
        "load_avg": os.getloadavg(),
        "rows": rows,
    }
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
