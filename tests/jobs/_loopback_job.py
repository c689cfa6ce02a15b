"""A pairwise job against a loopback OpenAI server: the items file, the server-side
judge that answers it, and the job spec that points at the server."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from judgegraph.jobs import BackendConfig, JobSpec, JudgeConfig, Limits, SourceConfig
from judgegraph.testing import Fault, LoopbackRequest, Reply

ITEM = re.compile(r"item-(\d+)")


def _items(path: Path, n: int, *, bad: tuple[int, ...] = ()) -> Path:
    with path.open("w", encoding="utf-8") as fp:
        for i in range(n):
            rec: dict[str, Any] = {
                "prompt": f"item-{i:03d}: which answer is better?",
                "left": f"GOOD answer {i}" if i % 2 == 0 else f"BAD answer {i}",
                "right": f"BAD answer {i}" if i % 2 == 0 else f"GOOD answer {i}",
                "human": "A" if i % 2 == 0 else "B",
            }
            if i in bad:
                rec["right"] = ""
            fp.write(json.dumps(rec) + "\n")
    return path


class Judge:
    """Server-side judge: scores the GOOD answer 8 and the BAD one 3, in
    whichever order they are shown; counts requests per item."""

    def __init__(self, *, unparsed: set[int] = frozenset(), fail: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.unparsed = set(unparsed)
        self.fail = set(fail)
        self.per_item: Counter[int] = Counter()

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        text = req.prompt
        i = int(ITEM.search(text).group(1))  # type: ignore[union-attr]
        self.per_item[i] += 1
        if i in self.fail:
            return Fault("status", status=400)
        if i in self.unparsed:
            return Reply("I cannot decide.")
        first_good = text.index("GOOD") < text.index("BAD")
        return Reply("Reasons. [SCORES] 8 3" if first_good else "Reasons. [SCORES] 3 8", prompt_tokens=50)


def _spec(src: Path, url: str, **limits: Any) -> JobSpec:
    return JobSpec(
        source=SourceConfig(
            path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"}, label="human"
        ),
        judge=JudgeConfig(kind="pairwise"),
        backend=BackendConfig(
            model="judge-m",
            base_url=url + "/v1",
            structured_output=False,
            max_attempts=2,
            pricing={"input_per_mtok": 1.0, "output_per_mtok": 4.0},
        ),
        limits=Limits(concurrency=8, **limits),
    )
