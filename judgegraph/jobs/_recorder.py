"""Progress counts, the run summary, and the recorder both engines write rows and results through."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from ._spec import PreparedRow
from ._store import ItemRecord, ResultRecord, Store
from ._summary_corrected import CorrectedRate, run_corrected

__all__ = ["JobProgress", "JobSummary", "ProgressCallback"]


@dataclass
class JobProgress:
    """Counts so far, for progress displays. ``total`` is None when the
    source cannot be counted cheaply."""

    total: int | None = None
    rows: int = 0
    judged: int = 0
    cached: int = 0
    ok: int = 0
    unparsed: int = 0
    errors: int = 0
    invalid: int = 0
    cost_usd: float = 0.0
    priced: bool = True  # False once an item judged now came back without a price
    tokens: int = 0
    requests: int = 0  # model calls made for the items judged now, retries and repairs included
    # A --batch-api run's provider batches by state (validating, in_progress, finalizing, completed,
    # failed, expired, cancelled; submitting while one is being created), with the requests they carry.
    batches: dict[str, int] = field(default_factory=dict)
    batch_requests: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> int:
        """Rows accounted for: judged now, found in the store, or invalid."""
        return self.judged + self.cached + self.invalid

    @property
    def failed(self) -> int:
        return self.unparsed + self.errors


ProgressCallback = Callable[[JobProgress], None]


class JobSummary(BaseModel):
    """What a run did. ``ok``, ``unparsed`` and ``errors`` count the run's
    rows by their verdict, judged now or found in the store (``judged`` and
    ``cached`` say which), so a rerun of a failed run still reports its
    failures. ``problems`` lists the first input problems and judge
    failures of this invocation by row; all of them are in the store.
    ``corrected``: when rows carry human labels (the source's ``label``),
    the judge's rates beside the same rates corrected for its errors,
    computed from every row the store holds for the run."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    store: str
    config_hash: str
    engine: str
    resumed: bool
    rows: int
    judged: int
    cached: int
    ok: int
    unparsed: int
    errors: int
    invalid: int
    cost_usd: float | None  # of the items judged now; None when the judge is unpriced
    tokens: int
    elapsed_s: float
    problems: list[str]
    problems_total: int
    requests: int = 0  # model calls for the items judged now, retries and repair rounds included
    corrected: list[CorrectedRate] | None = Field(
        default=None,
        description="judge-corrected rates (prediction-powered, as the report's) over the run's stored rows; "
        "None when no judged row has a human label, empty when fewer than two rows with a usable verdict do",
    )


_MAX_PROBLEMS = 100


class _Recorder:
    """Shared by both engines: turns prepared rows and verdicts into store
    writes and progress counts, identically."""

    def __init__(
        self, store: Store, run_id: str, config_hash: str, progress: JobProgress, callback: ProgressCallback | None
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.config_hash = config_hash
        self.progress = progress
        self.callback = callback
        self.problems: list[str] = []
        self.problems_total = 0
        self.started_wall = time.time()
        self.labelled = False  # a row read in this invocation carries a human label

    def problem(self, text: str) -> None:
        self.problems_total += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(text)

    def row(self, prep: PreparedRow) -> None:
        input_json = prep.item.model_dump_json(exclude_none=True) if prep.item is not None else None
        self.row_fields(
            prep.file, prep.row, prep.item_hash, prep.item_id, prep.label, prep.category, prep.problem, input_json
        )

    def row_fields(
        self,
        file: int,
        row: int,
        item_hash: str | None,
        item_id: str | None,
        label: str | None,
        category: str | None,
        problem: str | None,
        input_json: str | None,
    ) -> None:
        self.progress.rows += 1
        self.labelled = self.labelled or label is not None
        self.store.add_item(
            ItemRecord(self.run_id, file, row, item_hash, item_id, label, category, problem), input_json
        )
        if problem is not None:
            self.problem(problem)
        if item_hash is None:
            self.progress.invalid += 1
            self._tick()

    def cached(self, status: str | None = None) -> None:
        """A row the store already holds a verdict for: counted by that
        verdict, so the counts (and the exit code) say the run's state, not
        only this invocation's. ``None``: its verdict is not known yet."""
        self.progress.cached += 1
        self._count(status)
        self._tick()

    def _count(self, status: str | None) -> None:
        p = self.progress
        if status == "ok":
            p.ok += 1
        elif status == "unparsed":
            p.unparsed += 1
        elif status is not None:
            p.errors += 1

    def needs_judging(self, prep: PreparedRow, rerun_failed: bool) -> bool:
        assert prep.item_hash is not None
        got = self.store.result_status(self.config_hash, prep.item_hash)
        if got is None:
            return True
        if rerun_failed and got != "ok" and not self._judged_this_run(prep.item_hash):
            return True
        self.cached(got)
        return False

    def _judged_this_run(self, item_hash: str) -> bool:
        return self.store.finished_at(self.config_hash, item_hash) >= self.started_wall

    def result(self, where: str, record: ResultRecord) -> None:
        self.store.add_result(record)
        p = self.progress
        p.judged += 1
        self._count(record.status)
        if record.status != "ok":
            self.problem(f"{where}: {record.status}: {record.reason}")
        if record.cost_usd is None:
            p.priced = False  # as the report does: one unpriced result makes the total unpriced
        p.cost_usd += record.cost_usd or 0.0
        p.tokens += record.prompt_tokens + record.completion_tokens
        p.requests += record.attempts
        self._tick()

    def _tick(self) -> None:
        if self.callback is not None:
            self.callback(self.progress)


def _corrected(rec: _Recorder, store: Store) -> list[CorrectedRate] | None:
    """The run's corrected rates; every row of the run is read in each invocation, so no label
    seen now means none stored, and the store is not read again."""
    if not rec.labelled:
        return None
    try:
        return run_corrected(store, rec.run_id)
    except ImportError as exc:  # the metrics extra is missing: the run itself is fine
        rec.problem(f"judge-corrected rates not computed: {exc} (pip install 'judgegraph[metrics]')")
        return None


def _summary(rec: _Recorder, store: Store, engine: str, resumed: bool, elapsed: float) -> JobSummary:
    p = rec.progress
    corrected = _corrected(rec, store)
    return JobSummary(
        run_id=rec.run_id,
        store=str(store.path),
        config_hash=rec.config_hash,
        engine=engine,
        resumed=resumed,
        rows=p.rows,
        judged=p.judged,
        cached=p.cached,
        ok=p.ok,
        unparsed=p.unparsed,
        errors=p.errors,
        invalid=p.invalid,
        cost_usd=p.cost_usd if p.priced else None,
        tokens=p.tokens,
        requests=p.requests,
        elapsed_s=elapsed,
        problems=rec.problems,
        problems_total=rec.problems_total,
        corrected=corrected,
    )
