"""Judges and backends described as data: what job specs, flywheel configs and
the command line build judges from. One home, so every wing builds them the same way."""

from __future__ import annotations

from ._backend import BackendConfig, build_backend
from ._judge import JudgeConfig, JudgeKind, build_judge

__all__ = ["BackendConfig", "JudgeConfig", "JudgeKind", "build_backend", "build_judge"]
