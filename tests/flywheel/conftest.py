"""Fixtures for the flywheel tests: the synthetic world and the probe trainer on the tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest
from _flywheel_world import World

from judgegraph.flywheel import ProbeTrainer


@pytest.fixture(scope="module")
def world() -> World:
    return World()


@pytest.fixture(scope="module")
def trainer(tiny_model: Path) -> ProbeTrainer:
    return ProbeTrainer(encoder=str(tiny_model), options={"max_length": 48, "labels": 2, "max_iter": 50})
