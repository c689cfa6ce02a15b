"""Which OpenAI models are reasoning models, and what they refuse.

OpenAI's o-series and the gpt-5 family (bar its ``-chat`` variants) reject
``temperature`` and ``max_tokens``: they take ``max_completion_tokens``, and a
``reasoning_effort``. They return no logprobs either.
"""

from __future__ import annotations

import re

__all__ = ["REASONING_EFFORTS", "is_reasoning_model"]

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

_REASONING = re.compile(r"^(?:o\d|gpt-5)(?!.*-chat)")


def is_reasoning_model(model: str) -> bool:
    """True for names such as ``o3-mini``, ``o4-mini``, ``gpt-5``, ``openai/gpt-5-mini``."""
    return bool(_REASONING.match(model.lower().rsplit("/", 1)[-1]))
