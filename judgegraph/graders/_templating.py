"""OpenAI grader templates: ``{{ item.x }}``, ``{{ sample.output_text }}``,
``{{ sample.output_json.x }}``, with JSON-path-like ``.key`` and ``[i]`` steps.

A reference is checked when the config is loaded (namespace, variable) and
resolved per item; a missing value is a :class:`JudgeInputError` naming it,
never an empty string, since grading a blank where a value was meant is a
wrong grade that looks right.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from judgegraph.types import JudgeInputError

from ._inputs import GraderInput

__all__ = ["refs", "render", "resolve"]

_REF = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_PATH = re.compile(r"(?:item|sample)(?:\.[A-Za-z_][A-Za-z0-9_\-]*|\[\d+\])+")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]")
_SAMPLE_VARS = ("output_text", "output_json")


def refs(text: str, *, field: str) -> list[str]:
    """The references in ``text``, in order; ValueError naming ``field`` for
    one judgegraph cannot fill."""
    out = []
    for m in _REF.finditer(text):
        path = m.group(1)
        if not _PATH.fullmatch(path):
            raise ValueError(
                f"{field}: {{{{{path}}}}} is not a template reference judgegraph can fill "
                "(item.<name>… or sample.output_text / sample.output_json…)"
            )
        if path.startswith("sample"):
            first = _STEP.match(path, len("sample"))
            var = first.group(1) if first else None
            if var not in _SAMPLE_VARS or (var == "output_text" and first is not None and first.end() < len(path)):
                raise ValueError(
                    f"{field}: {{{{{path}}}}}: the sample has output_text and output_json only "
                    "(judgegraph has no output_tools or choices)"
                )
        out.append(path)
    return out


def resolve(path: str, value: GraderInput) -> str:
    """The text a reference stands for in ``value``: strings as they are,
    anything else as compact JSON."""
    root = "item" if path.startswith("item") else "sample"
    node: Any = value.item if root == "item" else value.sample.model_dump()
    for step in _STEP.finditer(path, len(root)):
        key, index = step.group(1), step.group(2)
        where = path[: step.end()]
        if key is not None:
            if not isinstance(node, dict) or key not in node:
                raise JudgeInputError(f"{where}: the grader refers to it, and the input has none")
            node = node[key]
        else:
            if not isinstance(node, list) or int(index) >= len(node):
                raise JudgeInputError(f"{where}: the grader refers to it, and the input has none")
            node = node[int(index)]
        if node is None:
            raise JudgeInputError(f"{where}: the grader refers to it, and the input holds null there")
    return node if isinstance(node, str) else json.dumps(node, ensure_ascii=False, separators=(",", ":"))


def render(text: str, value: Callable[[str], str]) -> str:
    """``text`` with each reference replaced by ``value(path)``."""
    return _REF.sub(lambda m: value(m.group(1)), text)
