"""Judge a JSONL file of answers into a SQLite store, resumably.

Each verdict is committed as it lands. Stop the job at any point (Ctrl-C, a
crash, kill -9) and run the same command again: rows already stored are never
sent to the model again, and the rest are judged.

    python examples/offline_job.py answers.jsonl runs.db

Without an input file it writes a small one to judge. `judgegraph report
<run-id> --store runs.db` then renders an HTML report of the run.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from judgegraph import PointwiseJudge
from judgegraph.jobs import SourceConfig, arun_job

SAMPLE = [
    {"question": f"What is {a} + {b}?", "answer": str(a + b + (a % 3 == 0)), "id": f"sum-{a}-{b}"}
    for a, b in [(2, 2), (3, 4), (5, 1), (6, 6), (7, 2), (9, 9)]
]


async def main(source: Path, store: Path) -> None:
    if not source.exists():
        source.write_text("".join(json.dumps(row) + "\n" for row in SAMPLE))
    summary = await arun_job(
        # Map the judge's input fields onto the record's keys.
        SourceConfig(path=str(source), fields={"instruction": "question", "response": "answer"}, id="id"),
        judge=PointwiseJudge("openai:gpt-4o-mini"),
        kind="pointwise",
        store=store,
        concurrency=1,
    )
    print(f"run {summary.run_id}: {summary.rows} rows, {summary.judged} judged now, {summary.cached} already stored")
    # The verdict counts cover every row of the run, judged now or found in the store.
    print(f"all rows: ok {summary.ok}, unparsed {summary.unparsed}, errors {summary.errors}, invalid {summary.invalid}")


if __name__ == "__main__":
    args = sys.argv[1:] + ["answers.jsonl", "runs.db"][len(sys.argv[1:]) :]
    asyncio.run(main(Path(args[0]), Path(args[1])))
