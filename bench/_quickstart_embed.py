"""Embeddings of every bundled PandaLM text, computed once and cached, for the
quickstart seed bench (bench/quickstart_seeds.py).

One forward pass of all-MiniLM-L6-v2 (max 256 tokens, as the probe) gives
several views of each text: mean pooling of the last layer (exactly the
probe's embedding), mean pooling of layer 3, max pooling and the first token
of the last layer. Each view is unit length.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

VIEWS = ("mean6", "mean3", "max6", "cls6")


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def embed_views(texts: Sequence[str], *, max_length: int = 256, batch_size: int = 32) -> dict[str, Any]:
    import torch
    from transformers import AutoModel, AutoTokenizer

    from judgegraph.quickstart._local import encoder_path

    path = str(encoder_path())
    tok = AutoTokenizer.from_pretrained(path)
    enc = AutoModel.from_pretrained(path).eval()
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    outs: dict[str, list[Any]] = {v: [] for v in VIEWS}
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = tok(
                [texts[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            )
            res = enc(**batch, output_hidden_states=True)
            mask = batch["attention_mask"].unsqueeze(-1).float()
            last, mid = res.hidden_states[-1], res.hidden_states[3]
            views = {
                "mean6": (last * mask).sum(1) / mask.sum(1).clamp(min=1),
                "mean3": (mid * mask).sum(1) / mask.sum(1).clamp(min=1),
                "max6": last.masked_fill(mask == 0, -1e4).max(1).values,
                "cls6": last[:, 0],
            }
            for k, v in views.items():
                outs[k].append(torch.nn.functional.normalize(v.float(), dim=-1))
    result = {}
    inv = torch.tensor(order)
    for k, parts in outs.items():
        emb = torch.cat(parts)
        full = torch.empty_like(emb)
        full[inv] = emb
        result[k] = full
    return result


def load_or_embed(cache: Path, texts: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{view: {text_key: vector}}; embeds only the texts the cache lacks."""
    from safetensors.torch import load_file, save_file

    stored: dict[str, Any] = load_file(str(cache)) if cache.is_file() else {}
    keys = [text_key(t) for t in texts]
    have = set(_keys(cache)) if stored else set()
    missing = [t for t, k in zip(texts, keys, strict=True) if k not in have]
    missing = list(dict.fromkeys(missing))
    table: dict[str, dict[str, Any]] = {v: {} for v in VIEWS}
    for k in list(stored):
        view, _, key = k.partition("/")
        table[view][key] = stored[k]
    if missing:
        t = time.perf_counter()
        fresh = embed_views(missing)
        print(f"embedded {len(missing)} texts in {time.perf_counter() - t:.0f} s")
        for v in VIEWS:
            for i, text in enumerate(missing):
                table[v][text_key(text)] = fresh[v][i].contiguous()
        cache.parent.mkdir(parents=True, exist_ok=True)
        flat = {f"{v}/{k}": e for v, d in table.items() for k, e in d.items()}
        save_file(flat, str(cache))
    return table


def _keys(cache: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(cache), framework="pt") as f:
        return sorted({k.partition("/")[2] for k in f.keys()})
