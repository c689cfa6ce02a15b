"""``judgegraph quickstart``: collect traces, train a local judge, judge in a
graph with escalation to a teacher, measure against humans.

Data: the bundled PandaLM test set, every judgeable item (about 870), dealt
into folds by prompt. Each item is judged by a head fitted on the other folds
(cross-fitting, ``_crossfit``), and each fold's escalation budget is picked by
the planner on the other folds' items, their out-of-fold verdicts and human
labels; so every item is measured, and none by a judge or a budget that saw
its prompt or its label. An escalated item's verdict merges the teacher's with
the local judge's probabilities (``_combine``). The local judge saved for
later use learns from every item.

Every judging step is a ``judgegraph.jobs`` run through the pairwise graph,
stored in ``<workdir>/results.sqlite``: a second run finds its verdicts
there (and the trained judge and its embedding cache on disk) and only
judges what changed.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from judgegraph.backends import Endpoint, parse_endpoint
from judgegraph.cascade import Abstain, CascadeJudge, LowConfidence, Tier
from judgegraph.datasets import PandaLMItem
from judgegraph.judges import Judge

from ._budget import _pick_budget, batch_threshold, escalation_rule
from ._combine import CombinedTeacher, TeacherConfusion, merged_table
from ._crossfit import CrossFitJudge, fold_judges
from ._data import fold_pandalm_by_prompt, load_bundled_pandalm
from ._judges import (
    GPT35_PRICING,
    GraphJudge,
    build_endpoint_judge,
    file_digest,
    recorded_teacher,
)
from ._models import FoldPlan, QuickstartOptions, QuickstartResult
from ._stored import _stored_results, paired_agreement, table_row

__all__ = ["arun_quickstart", "run_quickstart"]

_V = TypeVar("_V")


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
    from judgegraph.jobs import SourceConfig, arun_job, config_hash, fingerprint_for

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
        summary = await arun_job(
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


# ------------------------------------------------------------------ the job


def _teacher_spec(options: QuickstartOptions) -> Endpoint | None:
    # A paid API is asked only when named: a key in the environment (set for some
    # other program) must not turn a free local run into some 1.7k paid requests.
    spec = options.escalate or "replay"
    return None if spec.strip().lower() == "replay" else parse_endpoint(spec)


async def arun_quickstart(
    options: QuickstartOptions | None = None, *, log: Callable[[str], None] = print
) -> QuickstartResult:
    """Run the whole quickstart; see the module docstring."""
    from judgegraph.jobs import Store, write_report

    from ._render import report_comparison

    opts = options or QuickstartOptions()
    clock: dict[str, float] = {}
    started = time.perf_counter()
    notes: list[str] = []
    work = opts.workdir
    work.mkdir(parents=True, exist_ok=True)

    # 1. Data: the bundled traces, dealt into folds by prompt. Every item is
    # judged by a head fitted on the other folds, and escalated by a budget the
    # planner picked on the other folds' items: no figure uses a judge or a
    # budget that saw the item's prompt or its human label.
    data = fold_pandalm_by_prompt(
        load_bundled_pandalm(), folds=opts.folds, seed=opts.seed, limit=opts.limit, dedupe=True
    )
    items, fold_of, k_folds = data.items, data.fold_of, data.folds
    log(f"data: {data.describe()}")
    path = work / "data" / "items.jsonl"
    digest = _write_source(path, items)
    (work / "data" / "folds.json").write_text(json.dumps(fold_of, indent=1) + "\n", encoding="utf-8")
    clock["data"] = time.perf_counter() - started

    # 2. Tier 1: the fold heads (and the judge saved for later, from every item) or an endpoint.
    t = time.perf_counter()
    fold_local: list[Judge[Any, Any]]
    reused = False
    train_traces: int | None = None
    if opts.judge is None:
        from ._local import load_or_train, traces_for

        probe, info, reused = load_or_train(
            work / "local-judge", items, labels=opts.train_labels, progress=opts.progress, log=log
        )
        train_traces = info.train_pairs
        new = probe.warm([x for it in items for x in (it.prompt, it.response1, it.response2)], progress=opts.progress)
        probe.save_cache()
        log(f"embedding cache: {new} new texts embedded, {len(probe.cache)} cached")
        traces, _ = traces_for(items, opts.train_labels)
        fold_local = fold_judges(probe, traces, fold_of, folds=k_folds)
        clock["train"] = time.perf_counter() - t
        weights = file_digest([work / "local-judge" / "head.safetensors", work / "local-judge" / "classifier.json"])
        local_fp: dict[str, Any] = {
            "local": "encoder-probe",
            "weights": weights,
            "cross-fit": k_folds,
            "folds": _digest(fold_of),
        }
        local_desc = (
            f"local: all-MiniLM-L6-v2 + classifier head; each item judged by one of {k_folds} fold heads "
            f"fitted on the {info.labels}-labelled traces of the other folds"
        )
    else:
        ep = parse_endpoint(opts.judge)
        fold_local = [build_endpoint_judge(ep, name="local")] * k_folds
        local_fp = {"local": ep.model_dump()}
        local_desc = f"local: {ep.label}"
        clock["train"] = 0.0
    local = CrossFitJudge(fold_local, fold_of, name="local")

    # 3. Tier 2: the teacher, live or replayed.
    teacher_ep = _teacher_spec(opts)
    teacher: Judge[Any, Any]
    if teacher_ep is None:
        teacher = recorded_teacher(items)
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
        # 4. Both tiers alone on every item, each through the pairwise graph.
        t = time.perf_counter()
        run_local = await _run(
            "local",
            local,
            local_fp,
            path,
            digest,
            store,
            concurrency=local_conc,
            describe="local judge, every item out of fold",
            progress=opts.progress,
        )
        run_teacher = await _run(
            "teacher",
            teacher,
            teacher_fp,
            path,
            digest,
            store,
            concurrency=teacher_conc,
            describe="teacher, every item",
            progress=opts.progress,
        )
        lres, labels = _stored_results(store, run_local)
        tres, _ = _stored_results(store, run_teacher)
        clock["judge"] = time.perf_counter() - t

        # 5. Per fold: the planner's budget on the other folds' items, capped on
        # this fold's batch, and the cascade that applies it.
        t = time.perf_counter()
        fold_by_hash = _fold_by_hash(store, run_local, fold_of)
        plans: list[FoldPlan] = []
        cascades: list[Judge[Any, Any]] = []
        fold_fps: list[dict[str, Any]] = []
        for k in range(k_folds):
            others = {h for h in labels if fold_by_hash[h] != k}
            mine = [h for h in lres if fold_by_hash[h] == k]
            o_local, o_teacher = _only(lres, others), _only(tres, others)
            o_labels = _only(labels, others)
            confusion = TeacherConfusion.count(o_teacher, o_labels)
            up = merged_table(o_local, o_teacher, confusion, list(o_labels)) if opts.merge else o_teacher
            choice = _pick_budget(
                o_local, up, o_labels, budget=opts.budget, target=opts.target, pick=opts.pick, teacher_alone=o_teacher
            )
            conf = [lres[h].confidence if lres[h].ok else None for h in mine]
            thr = batch_threshold(choice.threshold, conf, opts.budget)
            plan = FoldPlan(
                fold=k + 1,
                items=len(mine),
                budget=choice,
                threshold=thr,
                cap_items=math.floor(opts.budget * len(mine) + 1e-9),
            )
            plans.append(plan)
            log(_plan_line(plan))
            policy = Abstain(reason="the planner sends every item up") if thr is None else LowConfidence(threshold=thr)
            head = fold_local[k]
            top: Judge[Any, Any] = CombinedTeacher(teacher, head, confusion) if opts.merge else teacher
            cascades.append(CascadeJudge([Tier(head, (policy,)), top], on_last_failure="fallback", name="cascade"))
            fold_fps.append({"escalate": policy.model_dump(), "merge": confusion.model_dump() if opts.merge else None})
        cascade = CrossFitJudge(cascades, fold_of, name="cascade")
        cascade_fp = {"tiers": [local_fp, teacher_fp], "folds": fold_fps, "on_last_failure": "fallback"}
        run_cascade = await _run(
            "cascade",
            cascade,
            cascade_fp,
            path,
            digest,
            store,
            concurrency=local_conc,
            describe="cascade, every item",
            progress=opts.progress,
        )
        clock["cascade"] = time.perf_counter() - t

        # 6. Table and report, from the stored per-item results.
        cascade_name = f"cascade (budget {opts.budget:.0%})"
        rows = [
            table_row(store, run_local, name="local judge alone", judge=local_desc, escalation="none"),
            table_row(store, run_teacher, name="teacher alone", judge=teacher_desc, escalation="all"),
            table_row(store, run_cascade, name=cascade_name, judge="local; escalate per fold", escalation="tiers"),
        ]
        difference = paired_agreement(store, run_cascade, run_teacher, seed=opts.seed)
        paths = write_report(
            store,
            run_cascade,
            work / "report",
            comparison=report_comparison(rows, difference, items=len(items), cascade=cascade_name),
        )
    finally:
        store.close()
    notes.append(
        "the cascade falls back to the local verdict when the teacher's output is unparseable (its tier record says so)"
    )
    if opts.merge:
        notes.append(
            "an escalated item's verdict is the teacher's merged with the local judge's class probabilities: the "
            "class maximising P_local(c) x P(teacher's verdict | humans say c), that confusion counted on the "
            "other folds' items; so the cascade can differ from the teacher on items it escalates"
        )
    if opts.judge is None:
        notes.append(
            f"the local judge saved in {work / 'local-judge'} learns from every item; the figures are its fold "
            "heads', each fitted on the other folds (a head that saw an item's prompt is never scored on it)"
        )
    clock["total"] = time.perf_counter() - started
    result = QuickstartResult(
        split=data.describe(),
        items=len(items),
        train_traces=train_traces,
        local_judge=local_desc,
        teacher=teacher_desc,
        reused_judge=reused,
        folds=plans,
        rows=rows,
        cascade_minus_teacher=difference,
        store=work / "results.sqlite",
        report=paths["html"],
        summary=work / "quickstart.json",
        seconds={k: round(v, 2) for k, v in clock.items()},
        notes=notes,
    )
    result.summary.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return result


def _fold_by_hash(store: Any, run_id: str, fold_of: dict[str, int]) -> dict[str, int]:
    """The stored item hash -> its prompt's fold, so stored results group by fold."""
    return {r.item_hash: fold_of[r.input["instruction"]] for r in store.rows(run_id, with_input=True)}


def _only(by_hash: dict[str, _V], keys: set[str]) -> dict[str, _V]:
    return {h: v for h, v in by_hash.items() if h in keys}


def _plan_line(plan: FoldPlan) -> str:
    b = plan.budget
    capped = "" if plan.threshold == b.threshold else f" (capped at {plan.cap_items} items)"
    return (
        f"fold {plan.fold} ({plan.items} items): planner on the other folds' {b.calibration_items} items: "
        f"{b.recommendation}: {b.policy}; escalate {escalation_rule(plan.threshold)}{capped}"
    )


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


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
