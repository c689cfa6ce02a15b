"""``judgegraph quickstart``: collect traces, train a local judge, judge in a
graph with escalation to a teacher, measure against humans.

Data: the bundled PandaLM test set, split by prompt into train / held-out.
The local judge learns from the train items. For calibration, every train
item is judged by a head fitted on the other folds of train prompts
(cross-fitting, ``_crossfit``); the planner picks the escalation budget on
those verdicts and the teacher's. The held-out items are used only for the
final table and report. An escalated item's verdict merges the teacher's with
the local judge's probabilities (``_combine``).

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
from typing import Any

from judgegraph.backends import Endpoint, parse_endpoint
from judgegraph.cascade import Abstain, CascadeJudge, LowConfidence, Tier
from judgegraph.datasets import PandaLMItem
from judgegraph.judges import Judge

from ._budget import _pick_budget, batch_threshold, escalation_rule
from ._combine import CombinedTeacher, TeacherConfusion, merged_table
from ._crossfit import CrossFitJudge, assign_folds, fold_judges
from ._data import load_bundled_pandalm, split_pandalm_by_prompt
from ._judges import (
    GPT35_PRICING,
    GraphJudge,
    build_endpoint_judge,
    file_digest,
    recorded_teacher,
)
from ._models import QuickstartOptions, QuickstartResult
from ._stored import _stored_results, paired_agreement, table_row

__all__ = ["arun_quickstart", "run_quickstart"]


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

    # 1. Data: the bundled traces, split by prompt (train / held-out); the train
    # prompts are dealt into folds for cross-fitted calibration.
    items = load_bundled_pandalm()
    split = split_pandalm_by_prompt(
        items,
        heldout_fraction=opts.heldout_fraction,
        seed=opts.seed,
        limit=opts.limit,
        dedupe=True,
        min_prompts=3,  # fit, calibration and held-out each need a prompt of their own
    )
    train, held = split.train, split.heldout
    fold_of = assign_folds(train, folds=opts.folds, seed=opts.seed + 1)
    log(
        f"data: {split.describe()}; the train prompts are dealt into {opts.folds} folds: each train item is "
        "judged for calibration by a head fitted on the other folds"
    )
    cal_path, held_path = work / "data" / "calibration.jsonl", work / "data" / "heldout.jsonl"
    cal_digest, held_digest = _write_source(cal_path, train), _write_source(held_path, held)
    (work / "data" / "folds.json").write_text(json.dumps(fold_of, indent=1) + "\n", encoding="utf-8")
    clock["data"] = time.perf_counter() - started

    # 2. Tier 1: the local judge (trained here, plus its fold heads) or an endpoint.
    t = time.perf_counter()
    local: Judge[Any, Any]
    cal_judge: Judge[Any, Any]
    reused = False
    train_traces: int | None = None
    if opts.judge is None:
        from ._local import LocalClassifierJudge, load_or_train, traces_for

        probe, info, reused = load_or_train(
            work / "local-judge", train, labels=opts.train_labels, progress=opts.progress, log=log
        )
        train_traces = info.train_pairs
        texts = [x for it in (*train, *held) for x in (it.prompt, it.response1, it.response2)]
        new = probe.warm(texts, progress=opts.progress)
        probe.save_cache()
        log(f"embedding cache: {new} new texts embedded, {len(probe.cache)} cached")
        traces, _ = traces_for(train, opts.train_labels)
        cal_judge = CrossFitJudge(fold_judges(probe, traces, fold_of, folds=opts.folds), fold_of)
        clock["train"] = time.perf_counter() - t
        local = LocalClassifierJudge(probe, name="local")
        local_fp: dict[str, Any] = {
            "local": "encoder-probe",
            "weights": file_digest(
                [work / "local-judge" / "head.safetensors", work / "local-judge" / "classifier.json"]
            ),
        }
        cal_fp: dict[str, Any] = {**local_fp, "cross-fit": opts.folds, "folds": _digest(fold_of)}
        local_desc = f"local: all-MiniLM-L6-v2 + classifier head, {info.train_pairs} {info.labels}-labelled traces"
    else:
        ep = parse_endpoint(opts.judge)
        local = cal_judge = build_endpoint_judge(ep, name="local")
        local_fp = cal_fp = {"local": ep.model_dump()}
        local_desc = f"local: {ep.label}"
        clock["train"] = 0.0

    # 3. Tier 2: the teacher, live or replayed.
    teacher_ep = _teacher_spec(opts)
    teacher: Judge[Any, Any]
    if teacher_ep is None:
        teacher = recorded_teacher([*train, *held])
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
            cal_judge,
            cal_fp,
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
        confusion = TeacherConfusion.count(tres, labels)
        up = merged_table(lres, tres, confusion, list(labels)) if opts.merge else tres
        choice = _pick_budget(
            lres, up, labels, budget=opts.budget, target=opts.target, pick=opts.pick, teacher_alone=tres
        )
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
        # The held-out items are one batch job: the planner's threshold, capped so
        # that at most --budget of this batch (its least confident items) goes up.
        held_lres, _ = _stored_results(store, held_local)
        held_conf = [v.confidence if v.ok else None for v in held_lres.values()]
        held_thr = batch_threshold(choice.threshold, held_conf, opts.budget)
        cap_items = math.floor(opts.budget * len(held_conf) + 1e-9)
        if held_thr != choice.threshold:
            log(
                f"held-out batch ({len(held_conf)} items): the calibration threshold would send more than the "
                f"budget ({opts.budget:.0%}, {cap_items} items) up; capped: escalate {escalation_rule(held_thr)}"
            )
        policy = (
            Abstain(reason="the planner sends every item up") if held_thr is None else LowConfidence(threshold=held_thr)
        )
        top: Judge[Any, Any] = CombinedTeacher(teacher, local, confusion) if opts.merge else teacher
        cascade = CascadeJudge([Tier(local, (policy,)), top], on_last_failure="fallback", name="cascade")
        merge_fp = confusion.model_dump() if opts.merge else None
        cascade_fp = {
            "tiers": [local_fp, teacher_fp],
            "escalate": policy.model_dump(),
            "on_last_failure": "fallback",
            "merge": merge_fp,
        }
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
        cascade_name = f"cascade (budget {opts.budget:.0%}; planner's pick {choice.fraction:.0%})"
        rows = [
            table_row(store, held_local, name="local judge alone", judge=local_desc, escalation="none"),
            table_row(store, held_teacher, name="teacher alone", judge=teacher_desc, escalation="all"),
            table_row(
                store,
                held_cascade,
                name=cascade_name,
                judge=f"local; escalate {escalation_rule(held_thr)}",
                escalation="tiers",
            ),
        ]
        difference = paired_agreement(store, held_cascade, held_teacher, seed=opts.seed)
        report_dir = work / "report"
        paths = write_report(
            store,
            held_cascade,
            report_dir,
            comparison=report_comparison(rows, difference, heldout_items=len(held), cascade=cascade_name),
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
            "calibration items; so the cascade can differ from the teacher on items it escalates"
        )
    clock["total"] = time.perf_counter() - started
    result = QuickstartResult(
        split=(
            f"{split.describe()}. Calibration: the {len(train)} train items, each judged by a head fitted on the "
            f"other {opts.folds - 1} of {opts.folds} folds of train prompts (seed {opts.seed + 1})."
        ),
        fit_items=len(train),
        train_traces=train_traces,
        calibration_items=len(train),
        heldout_items=len(held),
        local_judge=local_desc,
        teacher=teacher_desc,
        reused_judge=reused,
        budget=choice,
        heldout_threshold=held_thr,
        heldout_cap_items=cap_items,
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
