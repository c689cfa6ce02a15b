"""A plumbing check of the in-process path: tiny model, pairwise and pointwise judges."""

from __future__ import annotations

from pathlib import Path

from .judges import PairwiseJudge, PointwiseJudge
from .types import PairwiseInput, PointwiseInput


async def run_smoke(workdir: Path) -> list[tuple[str, str, str, str]]:
    from .backends import TransformersBackend
    from .tiny_model import build_tiny_model

    model_dir = workdir / "tiny-model"
    if not (model_dir / "config.json").exists():
        build_tiny_model(model_dir)
    backend = TransformersBackend(model_dir)
    pair = PairwiseInput(instruction="Name a prime number.", response_a="7", response_b="8")
    point = PointwiseInput(instruction="What is 2 + 2?", response="4")
    v = await PairwiseJudge(backend, max_tokens=24).ajudge(pair)
    s = await PointwiseJudge(backend, max_tokens=24).ajudge(point)
    return [
        ("pairwise", v.status.value, str(v.winner), (v.reason or "")[:60]),
        ("pointwise", s.status.value, str(s.score), (s.reason or "")[:60]),
    ]
