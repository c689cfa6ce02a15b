"""One training run from a config: traces -> dataset -> head -> held-out report -> export."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ._config import FinetuneConfig
from ._dataset import JudgeDataset, build_dataset
from ._evaluate import EvalReport, evaluate_judge
from ._traces import PairwiseTrace, PointwiseTrace, read_traces, traces_from_pandalm

__all__ = ["RunReport", "load_config_traces", "run_finetune"]


class RunReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    head: str
    model_dir: Path
    dataset_stats: dict[str, int]
    train_s: float
    evaluation: dict[str, EvalReport] = {}
    export_dir: Path | None = None
    launch_commands: dict[str, str] = {}


def load_config_traces(cfg: FinetuneConfig) -> list[PointwiseTrace | PairwiseTrace]:
    traces: list[PointwiseTrace | PairwiseTrace] = []
    for p in cfg.data.traces:
        traces += read_traces(p)
    for p in cfg.data.pandalm:
        traces += traces_from_pandalm(p)
    return traces


def _by_kind(traces: list[PointwiseTrace | PairwiseTrace]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for t in traces:
        out.setdefault(t.kind, []).append(t)
    return out


def _sft_run(
    cfg: FinetuneConfig, ds: JudgeDataset, resume: bool | str | None, progress: bool, log: Callable[[str], None]
) -> tuple[Path, dict[str, EvalReport], Path | None, dict[str, str]]:
    from judgegraph import PairwiseJudge, PointwiseJudge, SwapPolicy, TransformersBackend
    from judgegraph.judges import get_template

    from ._export import export_for_serving, launch_commands
    from ._sft import train_sft

    result = train_sft(cfg.model, ds, cfg.output_dir, options=cfg.sft, resume_from_checkpoint=resume, progress=progress)
    log(f"trained {result.steps} steps in {result.runtime_s:.0f} s; final loss {result.train_loss}")
    export_dir = cfg.export_dir
    if export_dir is None and result.adapter and cfg.evaluate:
        export_dir = cfg.output_dir / "merged"  # the backend loads full weights
    model_dir = result.final_dir
    commands: dict[str, str] = {}
    if export_dir is not None:
        model_dir = export_for_serving(result.final_dir, export_dir).directory
        commands = launch_commands(model_dir)
    reports: dict[str, EvalReport] = {}
    if cfg.evaluate and ds.validation_traces:
        backend = TransformersBackend(model_dir)
        formats = cfg.dataset.formats
        for kind, traces in _by_kind(ds.validation_traces).items():
            template = next((f for f in formats if get_template(f).kind == kind), None)
            if template is None:
                continue
            judge: Any
            if kind == "pairwise":
                judge = PairwiseJudge(
                    backend, template=template, swap=SwapPolicy(mode="both"), max_tokens=cfg.eval_max_tokens
                )
            else:
                judge = PointwiseJudge(
                    backend, template=template, max_tokens=cfg.eval_max_tokens, scale=traces[0].scale
                )
            reports[kind] = evaluate_judge(judge, traces)
    return model_dir, reports, export_dir, commands


def _classifier_run(
    cfg: FinetuneConfig, ds: JudgeDataset, resume: bool | str | None, progress: bool, log: Callable[[str], None]
) -> tuple[Path, dict[str, EvalReport]]:
    from ._classifier import train_classifier
    from ._classifier_judge import ClassifierJudge

    opts = cfg.classifier
    kind = opts.task
    clf = train_classifier(
        cfg.model,
        [t for t in ds.train_traces if t.kind == kind],
        cfg.output_dir,
        options=opts,
        resume_from_checkpoint=resume,
        progress=progress,
    )
    log(f"classifier trained: {clf.metrics}")
    reports: dict[str, EvalReport] = {}
    val = [t for t in ds.validation_traces if t.kind == kind]
    if cfg.evaluate and val and kind == "pairwise":
        reports["pairwise"] = evaluate_judge(ClassifierJudge(clf), val)
    return Path(clf.model), reports


def _probe_run(
    cfg: FinetuneConfig, ds: JudgeDataset, progress: bool, log: Callable[[str], None]
) -> tuple[Path, dict[str, EvalReport]]:
    from ._classifier_judge import ClassifierJudge
    from ._probe import train_probe

    train = [t for t in ds.train_traces if isinstance(t, PairwiseTrace)]
    probe = train_probe(train, cfg.model, options=cfg.probe, progress=progress, log=log)
    out = probe.save(cfg.output_dir / "final")
    reports: dict[str, EvalReport] = {}
    val = [t for t in ds.validation_traces if isinstance(t, PairwiseTrace)]
    if cfg.evaluate and val:
        reports["pairwise"] = evaluate_judge(ClassifierJudge(probe), val)
        probe.metrics |= {"validation_agreement": reports["pairwise"].agreement}
        probe.save(out)
    return out, reports


def run_finetune(
    cfg: FinetuneConfig,
    *,
    resume: bool | str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> RunReport:
    """Train the configured head and write ``report.json`` to ``output_dir``."""
    traces = load_config_traces(cfg)
    ds = build_dataset(traces, cfg.dataset)
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    ds.save(cfg.output_dir / "dataset")
    log(f"dataset: {ds.stats}")
    started = time.perf_counter()
    export_dir: Path | None = None
    commands: dict[str, str] = {}
    if cfg.head == "sft":
        model_dir, reports, export_dir, commands = _sft_run(cfg, ds, resume, progress, log)
    elif cfg.head == "classifier":
        model_dir, reports = _classifier_run(cfg, ds, resume, progress, log)
    else:
        if resume:
            log("the probe head trains in one pass; --resume does not apply and is ignored")
        model_dir, reports = _probe_run(cfg, ds, progress, log)
    report = RunReport(
        head=cfg.head,
        model_dir=model_dir,
        dataset_stats=ds.stats,
        train_s=time.perf_counter() - started,
        evaluation=reports,
        export_dir=export_dir,
        launch_commands=commands,
    )
    (cfg.output_dir / "report.json").write_text(
        json.dumps(report.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8"
    )
    return report
