"""Judges in your own test suite: a pytest plugin with recorded verdicts.

Registered through the ``pytest11`` entry point, so installing judgegraph
(with pytest) is enough. Fixtures: ``judged`` (assertions), ``pointwise_judge``,
``pairwise_judge``, ``judge_backend``, ``judge_settings``. Cassettes keep each
judge call's verdicts beside the tests, so CI replays them with no network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._asserts import JudgeAssertionError, JudgeAssertions, JudgeUsageError, sync_bridge
    from ._build import NoNetworkBackend, create_backend, create_judge
    from ._cassette import CassetteFile, CassetteJudge, CassetteMissError, Judging, cassette_key
    from ._checks import Check, check_not_worse, check_scores, score_of
    from ._report import Row, junit_properties, render_table
    from ._settings import CassetteMode, JudgeSettings, default_mode

__all__ = [
    "CassetteFile",
    "CassetteJudge",
    "CassetteMissError",
    "CassetteMode",
    "Check",
    "JudgeAssertionError",
    "JudgeAssertions",
    "JudgeSettings",
    "JudgeUsageError",
    "Judging",
    "NoNetworkBackend",
    "Row",
    "cassette_key",
    "check_not_worse",
    "check_scores",
    "create_backend",
    "create_judge",
    "default_mode",
    "junit_properties",
    "render_table",
    "score_of",
    "sync_bridge",
]

# Loaded on first use: pytest imports this package for every session, used or not.
_LAZY = {
    "CassetteFile": "._cassette",
    "CassetteJudge": "._cassette",
    "CassetteMissError": "._cassette",
    "CassetteMode": "._settings",
    "Check": "._checks",
    "JudgeAssertionError": "._asserts",
    "JudgeAssertions": "._asserts",
    "JudgeSettings": "._settings",
    "JudgeUsageError": "._asserts",
    "Judging": "._cassette",
    "NoNetworkBackend": "._build",
    "Row": "._report",
    "cassette_key": "._cassette",
    "check_not_worse": "._checks",
    "check_scores": "._checks",
    "create_backend": "._build",
    "create_judge": "._build",
    "default_mode": "._settings",
    "junit_properties": "._report",
    "render_table": "._report",
    "score_of": "._checks",
    "sync_bridge": "._asserts",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
