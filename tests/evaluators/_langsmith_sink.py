"""What the stand-in LangSmith endpoint (conftest.py) counts as sent."""

from __future__ import annotations


def data_sent(hits: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The requests that carry something: all but ``GET /info``, the server
    description any LangSmith client reads, LangSmith's own cached client
    included, from a background thread at a moment that depends on timing. A
    run, feedback or dataset upload is a POST, PATCH or PUT, and stays in."""
    return [h for h in hits if h != ("GET", "/info")]
