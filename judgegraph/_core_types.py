"""The smallest shared shapes: the frozen base model, the two errors every
layer may raise, a token's log-probability and the JSON value alias. Re-exported by :mod:`judgegraph.types`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from pydantic import BaseModel, ConfigDict

__all__ = ["FrozenModel", "JSONValue", "JudgeInputError", "MissingExtraError", "TokenLogprob", "require_text"]

JSONValue: TypeAlias = str | int | float | bool | Sequence["JSONValue"] | Mapping[str, "JSONValue"] | None
"""A value JSON can hold (identities, fingerprints, JSON schemas, request
bodies): what ``json.dumps`` writes. Arrays and objects are read-only
``Sequence``/``Mapping`` so a ``dict[str, str]`` or a ``list[int]`` is one
too (``list``/``dict`` would not be: they are invariant)."""


class FrozenModel(BaseModel):
    """The one base of judgegraph's immutable data shapes: frozen, and
    unknown fields are an error rather than silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class JudgeInputError(ValueError):
    """The input to a judge is malformed; the message names the field."""


class MissingExtraError(ImportError):
    """A backend needs an optional dependency group that is not installed."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs the '{extra}' extra: pip install 'judgegraph[{extra}]'")
        self.extra = extra


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token's log-probability and its most likely alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


def require_text(value: str, field: str) -> str:
    if not value or not value.strip():
        raise ValueError(f"{field} must be a non-empty string")
    return value
