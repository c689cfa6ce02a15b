"""The pytest plugin (entry point ``pytest11``): options, the ``judge``
marker, fixtures, cassette saving and the summary.

It costs nothing for a suite that does not use it: settings are read, and
judges and backends built, only when a test asks for a fixture.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ._settings import INI_KEYS, JudgeSettings

__all__ = [
    "judge_backend",
    "judge_settings",
    "judged",
    "pairwise_judge",
    "pointwise_judge",
    "pytest_addoption",
    "pytest_configure",
]


@dataclass
class _State:
    rows: list[Any] = field(default_factory=list)
    cassettes: dict[Path, Any] = field(default_factory=dict)
    settings: JudgeSettings | None = None

    def base_settings(self, config: pytest.Config) -> JudgeSettings:
        if self.settings is None:
            self.settings = JudgeSettings.from_config(config)
        return self.settings


_STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("judgegraph", "judged assertions and recorded verdicts (judgegraph)")
    for key, (help_text, flag) in INI_KEYS.items():
        parser.addini(key, help_text, default=None)
        if flag is not None:
            choices = {"--judge-cassette-mode": ["replay", "record", "refresh", "live"]}.get(flag)
            group.addoption(flag, default=None, choices=choices, help=f"{help_text} (ini: {key})")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = _State()
    config.addinivalue_line(
        "markers",
        "judge(threshold=, repeats=, aggregate=, judge=, pairwise_judge=): per-test judgegraph settings",
    )


def _state(config: pytest.Config) -> _State:
    return config.stash[_STATE]


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def judge_settings(request: pytest.FixtureRequest) -> JudgeSettings:
    """The resolved settings for this test: ini, command line, then ``@pytest.mark.judge``."""
    settings = _state(request.config).base_settings(request.config)
    marker = request.node.get_closest_marker("judge")
    return settings.with_marker(dict(marker.kwargs)) if marker is not None else settings


@pytest.fixture
def judge_backend(judge_settings: JudgeSettings) -> Any:
    """The configured backend. In replay mode it refuses every call (no network)."""
    from ._build import NoNetworkBackend, create_backend

    backend = create_backend(judge_settings)
    return NoNetworkBackend(backend) if judge_settings.cassette_mode == "replay" else backend


def _cassette_judge(request: pytest.FixtureRequest, settings: JudgeSettings, kind: str) -> Any:
    from ._build import create_backend, create_judge
    from ._cassette import CassetteFile, CassetteJudge

    marker = request.node.get_closest_marker("judge")
    chosen = (marker.kwargs if marker else {}).get("pairwise_judge" if kind == "pairwise" else "judge")
    backend = None if chosen is not None and not _is_config(chosen) else create_backend(settings)
    inner = create_judge(kind, backend, marker_judge=chosen)  # type: ignore[arg-type]
    state = _state(request.config)
    path = (request.path.parent / settings.cassette_dir / f"{request.path.stem}.json").resolve()
    cassette = state.cassettes.setdefault(path, CassetteFile(path))
    return CassetteJudge(inner, cassette=cassette, mode=settings.cassette_mode, test=request.node.nodeid)


def _is_config(value: Any) -> bool:
    from judgegraph.config import JudgeConfig

    return isinstance(value, JudgeConfig)


@pytest.fixture
def pointwise_judge(request: pytest.FixtureRequest, judge_settings: JudgeSettings) -> Any:
    """The configured pointwise judge behind this test module's cassette."""
    return _cassette_judge(request, judge_settings, "pointwise")


@pytest.fixture
def pairwise_judge(request: pytest.FixtureRequest, judge_settings: JudgeSettings) -> Any:
    """The configured pairwise judge (both answer orders) behind this test module's cassette."""
    return _cassette_judge(request, judge_settings, "pairwise")


@pytest.fixture
def judged(request: pytest.FixtureRequest, judge_settings: JudgeSettings, record_property: Any) -> Any:
    """Judged assertions: ``assert_score`` / ``assert_not_worse`` (and their
    ``a``-prefixed async forms). Each adds a summary row and JUnit properties."""
    from ._asserts import JudgeAssertions
    from ._report import Row, junit_properties

    judges: dict[str, Any] = {}
    state = _state(request.config)

    def judge_for(kind: str) -> Any:
        if kind not in judges:
            judges[kind] = _cassette_judge(request, judge_settings, kind)
        return judges[kind]

    def report(row: Row) -> None:
        state.rows.append(row)
        for name, value in junit_properties(row):
            record_property(name, value)

    return JudgeAssertions(
        test=request.node.nodeid,
        settings=judge_settings,
        judge_for=judge_for,  # type: ignore[arg-type]
        report=report,
        threshold_option=_threshold_option(request),
    )


def _threshold_option(request: pytest.FixtureRequest) -> str:
    """Where this test's threshold setting comes from, as an error about it names it."""
    marker = request.node.get_closest_marker("judge")
    if marker is not None and "threshold" in marker.kwargs:
        return "@pytest.mark.judge(threshold=...)"
    if request.config.getoption("judge_threshold", None) is not None:
        return "--judge-threshold"
    return "judge_threshold (ini)"


# ------------------------------------------------------------------ hooks


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    exc = call.excinfo
    if (
        exc is not None
        and report.failed
        and type(exc.value).__name__
        in (
            "JudgeAssertionError",
            "CassetteMissError",
            "JudgeUsageError",
        )
    ):
        # The message is the whole story; plugin frames would only bury it.
        report.longrepr = f"{type(exc.value).__name__}: {exc.value}"
    if report.when == "call" and report.passed:
        for cassette in _state(item.config).cassettes.values():
            cassette.test_passed(item.nodeid)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None or state.settings is None or state.settings.cassette_mode not in ("record", "refresh"):
        return
    for cassette in state.cassettes.values():
        cassette.save()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.rows:
        return
    from ._report import render_table

    mode = state.settings.cassette_mode if state.settings else "?"
    terminalreporter.write_sep("=", "judgegraph verdicts")
    for line in render_table(state.rows, mode=mode):
        terminalreporter.write_line(line)
