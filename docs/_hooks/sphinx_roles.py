"""An mkdocs hook: the docstrings cross-reference in Sphinx's style
(:class:`Judge`, :func:`create_judge_node`), which mkdocstrings renders as the
role's name followed by code. Keep the code, drop the role's name."""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:mod|class|meth|func|attr|data|exc|obj):(?=<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub("", html)
