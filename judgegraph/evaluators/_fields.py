"""Map LangSmith run and example fields onto a judge's input fields."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from judgegraph.types import JudgeInputError

__all__ = ["EvaluatorArgs", "FieldSource", "resolve_fields"]

EvaluatorArgs = Mapping[str, Any]
"""What an evaluator sees: ``inputs``, ``outputs`` and ``reference_outputs`` (dicts)."""

FieldSource = str | Callable[[EvaluatorArgs], Any]
"""A dotted path such as ``"inputs.question"`` or ``"outputs"``, or a function of the arguments."""

_ROOTS = ("inputs", "outputs", "reference_outputs")


def _lookup(args: EvaluatorArgs, path: str, field: str) -> tuple[bool, Any]:
    root, *rest = path.split(".")
    if root not in _ROOTS:
        raise ValueError(f"{field}: {path!r} must start with one of {', '.join(_ROOTS)}")
    value: Any = args.get(root)
    for part in rest:
        if not isinstance(value, Mapping) or part not in value:
            keys = sorted(value) if isinstance(value, Mapping) else type(value).__name__
            return False, f"{path!r} not found (at {part!r}: {keys})"
        value = value[part]
    if not rest and isinstance(value, Mapping):
        # A bare root names its only value, the common one-key case.
        if len(value) != 1:
            return False, f"{path!r} has keys {sorted(value)}: name one, e.g. '{root}.{next(iter(value), 'key')}'"
        value = next(iter(value.values()))
    if value is None:
        return False, f"{path!r} is empty"
    return True, value


def resolve_fields(
    args: EvaluatorArgs,
    mapping: Mapping[str, FieldSource],
    *,
    optional: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Judge input fields from the evaluator's arguments. A field in
    ``optional`` that cannot be found is left out; any other is an error that
    names the field and the path."""
    out: dict[str, Any] = {}
    for field, source in mapping.items():
        if callable(source):
            out[field] = source(args)
            continue
        found, value = _lookup(args, source, field)
        if found:
            out[field] = value
        elif field not in optional:
            raise JudgeInputError(f"{field}: {value}")
    return out
