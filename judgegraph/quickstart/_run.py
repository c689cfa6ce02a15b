"""``judgegraph quickstart``: collect traces, train a local judge, judge in a
graph with escalation to a teacher, measure against humans.

Data: the bundled PandaLM test set, split by prompt into train / held-out;
the train side is split again by prompt into fit (the local judge learns
from it) and calibration (the planner picks the escalation budget on it).
The held-out items are used only for the final table and report.

Every judging step is a ``judgegraph.jobs`` run through the pairwise graph,
stored in ``<workdir>/results.sqlite``: a second run finds its verdicts
there (and the trained judge and its embedding cache on disk) and only
judges what changed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgegraph._cascade import Abstain, CascadeJudge, LowConfidence, Tier
from judgegraph._judge import BaseJudge
from judgegraph.datasets import PandaLMItem
from judgegraph.types import PairwiseVerdict, Status

from ._data import QuickstartSplit, load_bundled_pandalm, split_by_instruction
from ._judges import (
    GPT35_PRICING,
    Endpoint,
    GraphJudge,
    build_endpoint_judge,
    file_digest,
    parse_endpoint,
    recorded_teacher,
)

__all__ = [
    "DEFAULT_OPENAI_TEACHER",
    "BudgetChoice",
    "QuickstartOptions",
    "QuickstartResult",
    "TableRow",
    "arun_quickstart",
    "run_quickstart",
    "table_row",
]

#: The teacher used when OPENAI_API_KEY is set and no --escalate is given.
DEFAULT_OPENAI_TEACHER = "openai:gpt-4o-mini"

#: Escalation budgets the planner tries (shares of items sent to the teacher).
BUDGET_GRID = tuple(round(0.05 * k, 2) for k in range(1, 20))


class QuickstartOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    workdir: Path = Path(".judgegraph/quickstart")
    judge: str | None = Field(
        default=None, description="tier 1: None trains the local judge; or openai:MODEL[@URL], vllm:MODEL@URL, tgi:URL"
    )
    escalate: str | None = Field(
        default=None,
        description="tier 2: replay (recorded gpt-3.5-turbo), or an endpoint; None: OpenAI when OPENAI_API_KEY "
        "is set, else replay",
    )
    limit: int | None = Field(default=None, ge=10, description="use about this many items (whole prompts)")
    budget: float = Field(default=0.5, gt=0, le=1, description="the most items the planner may send up")
    target: float | None = Field(
        default=None, ge=0, le=1, description="agreement to reach; default: the teacher's own on calibration"
    )
    seed: int = 0
    heldout_fraction: float = Field(default=0.3, gt=0, lt=1)
    calibration_fraction: float = Field(default=0.25, gt=0, lt=1)
    train_labels: Literal["human", "teacher"] = Field(
        default="teacher",
        description="what the local judge learns from: the teacher's recorded verdicts (distillation; humans "
        "only measure) or the human majority",
    )
    progress: bool = True


class TableRow(BaseModel):
    """One line of the result table, computed from the stored per-item results."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    judge: str
    run_id: str
    items: int
    agreement: float | None = Field(description="share of items whose verdict equals the human majority")
    correct: int
    failed: int = Field(description="items without a usable verdict (counted as wrong)")
    escalated_share: float = Field(description="share of items sent to the teacher")
    cost_usd: float | None = Field(description="total; None when a judge is unpriced")

    @property
    def cost_per_1k(self) -> float | None:
        return None if self.cost_usd is None else 1000 * self.cost_usd / self.items


class BudgetChoice(BaseModel):
    """The planner's pick, made on the calibration split only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calibration_items: int
    fraction: float = Field(description="share of calibration items the chosen policy sends to the teacher")
    threshold: float | None = Field(description="local-judge confidence below which an item escalates")
    policy: str
    recommendation: str
    calibration_agreement: float
    calibration_local: float
    calibration_teacher: float


class QuickstartResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    split: str
    fit_items: int
    train_traces: int | None = Field(description="traces the local judge learned from; None for an endpoint judge")
    calibration_items: int
    heldout_items: int
    local_judge: str
    teacher: str
    reused_judge: bool
    budget: BudgetChoice
    rows: list[TableRow]
    store: Path
    report: Path
    summary: Path
    seconds: dict[str, float]
    notes: list[str]


# ------------------------------------------------------------------ sources


def _write_source(path: Path, items: Sequence[PandaLMItem]) -> str:
    """The items as a JSONL job source; returns a digest of its content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for it in items:
        row = {
            "id": f"pandalm-{it.idx}",
            "instruction": it.prompt,
            "response_a": it.response1,
            "response_b": it.response2,
            "label": it.gold_winner,
            "category": it.category,
        }
        lines.append(json.dumps(row, ensure_ascii=False))
    text = "\n".join(lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------ runs


async def _run(
    name: str,
    judge: Any,
    fingerprint: dict[str, Any],
    source_path: Path,
    source_digest: str,
    store: Any,
    *,
    concurrency: int,
    describe: str,
    progress: bool,
) -> str:
    """Judge the source through the pairwise graph into the store; returns the run id."""
    from judgegraph.jobs import SourceConfig, config_hash, run_job
    from judgegraph.jobs._judging import fingerprint_for

    gj = GraphJudge(judge, name=name, fingerprint=fingerprint)
    ctx = gj.context()
    chash = config_hash(fingerprint_for(gj, ctx))
    run_id = f"{name}-{hashlib.sha256((chash + source_digest).encode()).hexdigest()[:10]}"
    source = SourceConfig(path=str(source_path), format="jsonl", label="label", category="category", id="id")
    spec = {
        "source": source.model_dump(mode="json"),
        "judge": {"name": describe, "kind": "pairwise", "fingerprint": fingerprint},
    }
    from ._progress import job_bar

    with job_bar(describe, enabled=progress) as update:
        summary = await run_job(
            source,
            judge=gj,
            kind="pairwise",
            store=store,
            context=ctx,
            run_id=run_id,
            concurrency=concurrency,
            progress=update,
            spec=spec,
        )
    if summary.invalid:
        raise RuntimeError(f"{name}: {summary.invalid} rows could not be read: {summary.problems[:3]}")
    return run_id


def _stored_results(store: Any, run_id: str) -> tuple[dict[str, PairwiseVerdict], dict[str, str]]:
    results: dict[str, PairwiseVerdict] = {}
    labels: dict[str, str] = {}
    for r in store.rows(run_id):
        if r.item_hash is None or r.result is None:
            raise RuntimeError(f"run {run_id}: row {r.row} has no stored result")
        results[r.item_hash] = PairwiseVerdict.model_validate(r.result)
        if r.label is not None:
            labels[r.item_hash] = r.label
    return results, labels


def table_row(
    store: Any, run_id: str, *, name: str, judge: str, escalation: Literal["none", "all", "tiers"]
) -> TableRow:
    """A table row recomputed from the stored per-item results of a run, with
    :func:`judgegraph.metrics.accuracy` (failed verdicts count as wrong)."""
    from judgegraph import metrics

    preds: list[Any] = []
    refs: list[Any] = []
    escalated = 0
    costs: list[float | None] = []
    rows = list(store.rows(run_id))
    for r in rows:
        res = r.result or {}
        if r.status == "ok":
            preds.append(res.get("winner"))
        else:
            preds.append(Status(r.status) if r.status in ("unparsed", "error") else Status.ERROR)
        refs.append(r.label)
        costs.append(r.cost_usd)
        if escalation == "all":
            escalated += 1
        elif escalation == "tiers":
            escalated += len(res.get("tiers") or ()) > 1
    if not rows:
        raise RuntimeError(f"run {run_id} has no rows")
    acc = metrics.accuracy(preds, refs, unparsed="wrong")
    failed = sum(isinstance(p, Status) for p in preds)
    correct = sum(p == r for p, r in zip(preds, refs, strict=True) if not isinstance(p, Status))
    total = None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
    return TableRow(
        name=name,
        judge=judge,
        run_id=run_id,
        items=len(rows),
        agreement=acc.value,
        correct=correct,
        failed=failed,
        escalated_share=escalated / len(rows),
        cost_usd=total,
    )


# ------------------------------------------------------------------ planning


def _pick_budget(
    local: dict[str, PairwiseVerdict],
    teacher: dict[str, PairwiseVerdict],
    labels: dict[str, str],
    *,
    budget: float,
    target: float | None,
) -> BudgetChoice:
    """Let the planner pick the escalation budget on the calibration results,
    and turn it into a confidence threshold the graph applies item by item."""
    from judgegraph._planner import plan_cascades

    table = {"local": local, "teacher": teacher}
    costs = {"local": 0.0, "teacher": 1.0}  # cost = share of items the teacher judges
    common: dict[str, Any] = {
        "labels": labels,
        "costs": costs,
        "budgets": BUDGET_GRID,
        "max_thresholds": 0,
        "tie_credit": 0.0,
    }
    first = plan_cascades(table, max_cost=budget, **common)
    alone = {c.name: c for c in first.candidates if len(c.tiers) == 1}
    local_acc, teacher_acc = alone["local"].agreement, alone["teacher"].agreement
    goal = teacher_acc if target is None else target
    plan = plan_cascades(table, target_agreement=goal, max_cost=budget, **common)
    if plan.recommended is None:
        plan = first
    chosen = plan.recommended
    assert chosen is not None  # local alone (cost 0) is always within the budget
    why = plan.recommendation if plan is not first else f"{plan.recommendation} (none reached {goal:.3f})"
    if [t.judge for t in chosen.tiers] == ["teacher"]:
        fraction = 1.0
    elif len(chosen.tiers) == 1:
        fraction = 0.0
    else:
        fraction = chosen.reach[1]
    confidences = sorted(v.confidence for v in local.values() if v.ok and v.confidence is not None)
    k = round(fraction * len(labels))
    threshold: float | None
    if fraction >= 1.0:
        threshold = None  # every item goes up
    elif k == 0:
        threshold = 0.0
    else:
        threshold = confidences[min(k, len(confidences) - 1)]
    return BudgetChoice(
        calibration_items=len(labels),
        fraction=fraction,
        threshold=threshold,
        policy=chosen.name,
        recommendation=why,
        calibration_agreement=chosen.agreement,
        calibration_local=local_acc,
        calibration_teacher=teacher_acc,
    )


# ------------------------------------------------------------------ the job


def _teacher_spec(options: QuickstartOptions) -> Endpoint | None:
    spec = options.escalate
    if spec is None:
        spec = DEFAULT_OPENAI_TEACHER if os.environ.get("OPENAI_API_KEY") else "replay"
    return None if spec.strip().lower() == "replay" else parse_endpoint(spec)


async def arun_quickstart(
    options: QuickstartOptions | None = None, *, log: Callable[[str], None] = print
) -> QuickstartResult:
    """Run the whole quickstart; see the module docstring."""
    from judgegraph.jobs import Store
    from judgegraph.jobs._report import write_report

    opts = options or QuickstartOptions()
    clock: dict[str, float] = {}
    started = time.perf_counter()
    notes: list[str] = []
    work = opts.workdir
    work.mkdir(parents=True, exist_ok=True)

    # 1. Data: the bundled traces, split by prompt (fit / calibration / held-out).
    items = load_bundled_pandalm()
    split = split_by_instruction(
        items, heldout_fraction=opts.heldout_fraction, seed=opts.seed, limit=opts.limit, dedupe=True
    )
    inner: QuickstartSplit = split_by_instruction(
        split.train, heldout_fraction=opts.calibration_fraction, seed=opts.seed + 1
    )
    fit, calib, held = inner.train, inner.heldout, split.heldout
    log(
        f"data: {split.describe()}; the train side is split again by prompt into fit {len(fit)} items "
        f"({inner.train_prompts} prompts) and calibration {len(calib)} items ({inner.heldout_prompts} prompts)"
    )
    cal_path, held_path = work / "data" / "calibration.jsonl", work / "data" / "heldout.jsonl"
    cal_digest, held_digest = _write_source(cal_path, calib), _write_source(held_path, held)
    clock["data"] = time.perf_counter() - started

    # 2. Tier 1: the local judge (trained here) or an endpoint.
    t = time.perf_counter()
    local: BaseJudge[Any, Any]
    reused = False
    train_traces: int | None = None
    if opts.judge is None:
        from ._local import LocalClassifierJudge, load_or_train

        probe, info, reused = load_or_train(
            work / "local-judge", fit, labels=opts.train_labels, progress=opts.progress, log=log
        )
        clock["train"] = time.perf_counter() - t
        train_traces = info.train_pairs
        t = time.perf_counter()
        texts = [x for it in (*calib, *held) for x in (it.prompt, it.response1, it.response2)]
        new = probe.warm(texts, progress=opts.progress)
        probe.save_cache()
        clock["embed"] = time.perf_counter() - t
        log(f"embedding cache: {new} new texts embedded, {len(probe.cache)} cached")
        local = LocalClassifierJudge(probe, name="local")
        local_fp: dict[str, Any] = {
            "local": "encoder-probe",
            "weights": file_digest(
                [work / "local-judge" / "head.safetensors", work / "local-judge" / "classifier.json"]
            ),
        }
        local_desc = f"local: all-MiniLM-L6-v2 + classifier head, {info.train_pairs} {info.labels}-labelled traces"
    else:
        ep = parse_endpoint(opts.judge)
        local = build_endpoint_judge(ep, name="local")
        local_fp = {"local": ep.model_dump()}
        local_desc = f"local: {ep.label}"
        clock["train"] = 0.0

    # 3. Tier 2: the teacher, live or replayed.
    teacher_ep = _teacher_spec(opts)
    teacher: BaseJudge[Any, Any]
    if teacher_ep is None:
        teacher = recorded_teacher([*calib, *held])
        with _bundled_file("gpt-3.5-turbo-testset-v1.json") as gpt_file:
            teacher_fp: dict[str, Any] = {"teacher": "replay gpt-3.5-turbo", "data": file_digest([gpt_file])}
        teacher_desc = "teacher: gpt-3.5-turbo, recorded verdicts replayed"
        notes.append(
            "teacher cost is estimated: the recorded verdicts carry no token counts, so tokens are taken as "
            f"characters / 4 (+120 prompt tokens) at ${GPT35_PRICING.input_per_mtok}/"
            f"${GPT35_PRICING.output_per_mtok} per million input/output tokens (gpt-3.5-turbo-0125 list price)"
        )
        notes.append("teacher outputs PandaLM recorded as unparseable ('garbage') count as wrong when it judges alone")
    else:
        teacher = build_endpoint_judge(teacher_ep, name="teacher")
        teacher_fp = {"teacher": teacher_ep.model_dump()}
        teacher_desc = f"teacher: {teacher_ep.label} (live, both answer orders)"
        notes.append("live teacher: cost is shown only when the backend is priced")
    local_conc = 8 if opts.judge is None else 16
    teacher_conc = 32 if teacher_ep is None else 16

    store = Store(work / "results.sqlite")
    try:
        # 4. Calibration: both tiers on the calibration split; the planner picks the budget there.
        t = time.perf_counter()
        cal_local = await _run(
            "calibration-local",
            local,
            local_fp,
            cal_path,
            cal_digest,
            store,
            concurrency=local_conc,
            describe="local judge, calibration split",
            progress=opts.progress,
        )
        cal_teacher = await _run(
            "calibration-teacher",
            teacher,
            teacher_fp,
            cal_path,
            cal_digest,
            store,
            concurrency=teacher_conc,
            describe="teacher, calibration split",
            progress=opts.progress,
        )
        lres, labels = _stored_results(store, cal_local)
        tres, _ = _stored_results(store, cal_teacher)
        choice = _pick_budget(lres, tres, labels, budget=opts.budget, target=opts.target)
        clock["calibrate"] = time.perf_counter() - t
        thr = escalation_rule(choice.threshold)
        log(
            f"planner (calibration split, {choice.calibration_items} items): {choice.recommendation}: "
            f"{choice.policy}; for new items that budget is the rule: escalate {thr}"
        )

        # 5. Held-out: local alone, teacher alone, and the cascade, each through the pairwise graph.
        t = time.perf_counter()
        held_local = await _run(
            "heldout-local",
            local,
            local_fp,
            held_path,
            held_digest,
            store,
            concurrency=local_conc,
            describe="local judge, held-out split",
            progress=opts.progress,
        )
        held_teacher = await _run(
            "heldout-teacher",
            teacher,
            teacher_fp,
            held_path,
            held_digest,
            store,
            concurrency=teacher_conc,
            describe="teacher, held-out split",
            progress=opts.progress,
        )
        policy = (
            Abstain(reason="the planner sends every item up")
            if choice.threshold is None
            else LowConfidence(threshold=choice.threshold)
        )
        cascade = CascadeJudge([Tier(local, (policy,)), teacher], on_last_failure="fallback", name="cascade")
        cascade_fp = {"tiers": [local_fp, teacher_fp], "escalate": policy.model_dump(), "on_last_failure": "fallback"}
        held_cascade = await _run(
            "heldout-cascade",
            cascade,
            cascade_fp,
            held_path,
            held_digest,
            store,
            concurrency=local_conc,
            describe="cascade, held-out split",
            progress=opts.progress,
        )
        clock["judge"] = time.perf_counter() - t

        # 6. Table and report, from the stored per-item results.
        cascade_name = f"cascade (budget {choice.fraction:.0%})"
        rows = [
            table_row(store, held_local, name="local judge alone", judge=local_desc, escalation="none"),
            table_row(store, held_teacher, name="teacher alone", judge=teacher_desc, escalation="all"),
            table_row(store, held_cascade, name=cascade_name, judge=f"local; escalate {thr}", escalation="tiers"),
        ]
        report_dir = work / "report"
        paths = write_report(store, held_cascade, report_dir)
    finally:
        store.close()
    notes.append(
        "the cascade falls back to the local verdict when the teacher's output is unparseable (its tier record says so)"
    )
    clock["total"] = time.perf_counter() - started
    result = QuickstartResult(
        split=(
            f"{split.describe()}. Train side split again by prompt (seed {opts.seed + 1}): fit {len(fit)} items, "
            f"calibration {len(calib)} items."
        ),
        fit_items=len(fit),
        train_traces=train_traces,
        calibration_items=len(calib),
        heldout_items=len(held),
        local_judge=local_desc,
        teacher=teacher_desc,
        reused_judge=reused,
        budget=choice,
        rows=rows,
        store=work / "results.sqlite",
        report=paths["html"],
        summary=work / "quickstart.json",
        seconds={k: round(v, 2) for k, v in clock.items()},
        notes=notes,
    )
    result.summary.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return result


def escalation_rule(threshold: float | None) -> str:
    """The per-item rule a budget became, in words."""
    if threshold is None:
        return "always"
    if threshold <= 0:
        return "never (only failed verdicts)"
    return f"when the local confidence < {threshold:.4f}"


def _bundled_file(name: str) -> Any:
    from contextlib import contextmanager

    from ._data import bundled_pandalm

    @contextmanager
    def cm() -> Any:
        with bundled_pandalm() as folder:
            yield folder / name

    return cm()


def run_quickstart(options: QuickstartOptions | None = None, *, log: Callable[[str], None] = print) -> QuickstartResult:
    import asyncio

    return asyncio.run(arun_quickstart(options, log=log))


def fmt_share(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"
