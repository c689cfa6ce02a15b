"""What the plugin is configured with: ini / pyproject keys, command-line
options, the ``judge`` marker, and the judge and backend built from them."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, ValidationError

from judgegraph.types import FrozenModel

__all__ = ["INI_KEYS", "CassetteMode", "JudgeSettings", "default_mode"]

CassetteMode = Literal["replay", "record", "refresh", "live"]
Aggregate = Literal["mean", "majority"]

# ini key -> (help, command-line flag or None)
INI_KEYS: dict[str, tuple[str, str | None]] = {
    "judge_model": ("the judge model's name", "--judge-model"),
    "judge_base_url": ("the judge server's base URL (OpenAI-compatible or TGI)", "--judge-base-url"),
    "judge_backend": ("openai (any OpenAI-compatible server) or tgi; default openai", "--judge-backend"),
    "judge_api_key_env": ("the environment variable holding the API key; default OPENAI_API_KEY", None),
    "judge_structured_output": ("ask for JSON verdicts (true/false); default true", None),
    "judge_threshold": ("the lowest passing score for score assertions", "--judge-threshold"),
    "judge_repeats": ("judge each case this many times; default 1", "--judge-repeats"),
    "judge_aggregate": ("how repeats combine: mean or majority; default mean", "--judge-aggregate"),
    "judge_cassette_mode": (
        "replay, record, refresh or live; default replay when CI is set, else refresh",
        "--judge-cassette-mode",
    ),
    "judge_cassette_dir": ("cassette folder, relative to each test file's folder; default cassettes", None),
    "judge_price_in": ("USD per million input tokens, for the cost column", None),
    "judge_price_out": ("USD per million output tokens, for the cost column", None),
}

_MARKER_KEYS = {"threshold", "repeats", "aggregate", "judge", "pairwise_judge"}


def default_mode(env: dict[str, str] | os._Environ[str] = os.environ) -> CassetteMode:
    """Replay in CI (the ``CI`` variable set to anything but empty/0/false), refresh elsewhere."""
    ci = env.get("CI", "").strip().lower()
    return "replay" if ci not in ("", "0", "false", "no") else "refresh"


class JudgeSettings(FrozenModel):
    """The resolved configuration for one test: ini, then command line, then marker."""

    model: str | None = None
    base_url: str | None = None
    backend: Literal["openai", "tgi"] = "openai"
    api_key_env: str = "OPENAI_API_KEY"
    structured_output: bool = True
    threshold: float | None = None
    repeats: int = Field(default=1, ge=1)
    aggregate: Aggregate = "mean"
    cassette_mode: CassetteMode = "refresh"
    cassette_dir: str = "cassettes"
    price_in: float | None = Field(default=None, ge=0)
    price_out: float | None = Field(default=None, ge=0)

    @classmethod
    def from_config(cls, config: Any) -> JudgeSettings:
        """Settings from a pytest ``Config``: each key from its command-line
        option if given, else from the ini file; a bad value names the key."""
        raw: dict[str, Any] = {"cassette_mode": default_mode()}
        for key, (_, flag) in INI_KEYS.items():
            value = config.getoption(_dest(flag)) if flag else None
            if value is None:
                value = config.getini(key) or None
            if value is not None:
                raw[key.removeprefix("judge_")] = value.strip() if isinstance(value, str) else value
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(f"judge_{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"judgegraph pytest settings: {problems}") from None

    def with_marker(self, kwargs: dict[str, Any]) -> JudgeSettings:
        """These settings with a ``@pytest.mark.judge(...)``'s overrides (judges excepted)."""
        unknown = set(kwargs) - _MARKER_KEYS
        if unknown:
            raise ValueError(f"@pytest.mark.judge: unknown option(s) {sorted(unknown)}; use {sorted(_MARKER_KEYS)}")
        update = {k: v for k, v in kwargs.items() if k not in ("judge", "pairwise_judge")}
        try:
            return type(self).model_validate({**self.model_dump(), **update})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"@pytest.mark.judge: {problems}") from None


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")
