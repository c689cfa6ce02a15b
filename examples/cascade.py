"""A two-tier cascade: a small judge answers first, and only the pairs it is
unsure of go to the large one.

The small judge's verdict stands when both answer orders agree; when they
disagree (position bias, a near tie) the pair escalates. Both models are read
from OPENAI_API_KEY / OPENAI_BASE_URL; point the small one at your own server
with a model string such as "vllm:my-judge@http://127.0.0.1:8000/v1".

    python examples/cascade.py
"""

from __future__ import annotations

import asyncio
import os

from judgegraph import PairwiseJudge
from judgegraph.cascade import SwapInconsistency, create_cascade_judge

SMALL = os.environ.get("SMALL_JUDGE", "openai:gpt-4o-mini")
LARGE = os.environ.get("LARGE_JUDGE", "openai:gpt-4o")

PAIRS = [
    ("What is the capital of France?", "Paris.", "Lyon."),
    ("What is 12 times 3?", "38.", "36."),
    ("Name a prime number above 10.", "11 is prime.", "13 is prime."),
]


async def main() -> None:
    cascade = create_cascade_judge(
        [PairwiseJudge(SMALL, name="small"), PairwiseJudge(LARGE, name="large")],
        escalate=SwapInconsistency(),
    )
    items = [{"instruction": q, "response_a": a, "response_b": b} for q, a, b in PAIRS]
    for (question, *_), verdict in zip(PAIRS, await cascade.ajudge_many(items), strict=True):
        why = verdict.tiers[0].reason if verdict.tiers else ""
        print(f"{verdict.winner:3} by {verdict.decided_by:5} {question} ({why})")


if __name__ == "__main__":
    asyncio.run(main())
