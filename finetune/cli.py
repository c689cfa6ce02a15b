"""``judgegraph finetune``: train, evaluate, merge and export local judges.

Multi-GPU: the SFT and classifier heads run on the transformers Trainer, so
``accelerate launch -m judgegraph.finetune train run.toml`` or
``torchrun --nproc-per-node 8 -m judgegraph.finetune train run.toml`` runs
data-parallel; the progress bar is drawn by the main process only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

__all__ = ["app"]

app = typer.Typer(
    name="finetune",
    help="Train a local judge from traces: build the dataset, train (SFT, classifier or probe), evaluate, export.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", soft_wrap=True, highlight=False)
    return typer.Exit(code=2)


ConfigArg = Annotated[Path, typer.Argument(help="run config, .toml or .json (see `example-config`)")]


@app.command("example-config")
def example_config(
    out: Annotated[Path | None, typer.Argument(help="write it here instead of printing it")] = None,
) -> None:
    """Print (or write) a commented example config."""
    from ._config import EXAMPLE_CONFIG

    if out is None:
        console.print(EXAMPLE_CONFIG, markup=False, highlight=False)
        return
    if out.exists():
        raise _fail(f"{out} exists; not overwriting it")
    out.write_text(EXAMPLE_CONFIG, encoding="utf-8")
    console.print(f"wrote {out}")


@app.command()
def train(
    config: ConfigArg,
    resume: Annotated[bool, typer.Option("--resume", help="continue from the newest checkpoint in output_dir")] = False,
    checkpoint: Annotated[Path | None, typer.Option(help="continue from this checkpoint directory")] = None,
    progress: Annotated[bool, typer.Option(help="draw progress bars")] = True,
    threads: Annotated[
        int | None, typer.Option(help="CPU threads for torch; 1 is often fastest on a busy shared machine")
    ] = None,
) -> None:
    """Train the head named in CONFIG, evaluate it on the held-out instructions, export it."""
    from ._config import ConfigError, load_config
    from ._pipeline import run_finetune
    from ._traces import TraceFormatError

    if threads is not None:
        if threads < 1:
            raise _fail("--threads must be at least 1")
        import torch

        torch.set_num_threads(threads)
    try:
        cfg = load_config(config)
        report = run_finetune(
            cfg,
            resume=str(checkpoint) if checkpoint else (True if resume else None),
            progress=progress,
            log=lambda m: console.print(m, markup=False, highlight=False, soft_wrap=True),
        )
    except (ConfigError, TraceFormatError, FileNotFoundError, KeyError) as exc:
        raise _fail(str(exc)) from None
    except ValueError as exc:
        # transformers reports a missing checkpoint this way
        raise _fail(str(exc)) from None
    console.print(f"[bold]model:[/bold] {report.model_dir}  ({report.train_s:.0f} s)")
    for kind, ev in report.evaluation.items():
        console.print(f"[bold]held-out {kind}:[/bold] {ev.summary()}", soft_wrap=True)
    _print_commands(report.launch_commands)


@app.command()
def dataset(
    config: ConfigArg,
    out: Annotated[Path, typer.Option(help="where to write train.jsonl / validation.jsonl")] = Path("dataset"),
) -> None:
    """Build and save the dataset from CONFIG without training, and show its statistics."""
    from ._config import ConfigError, load_config
    from ._dataset import build_dataset
    from ._pipeline import load_config_traces
    from ._traces import TraceFormatError

    try:
        cfg = load_config(config)
        ds = build_dataset(load_config_traces(cfg), cfg.dataset)
    except (ConfigError, TraceFormatError, ValueError, KeyError) as exc:
        raise _fail(str(exc)) from None
    ds.save(out)
    table = Table("statistic", "value")
    for k, v in ds.stats.items():
        table.add_row(k, str(v))
    console.print(table)
    console.print(f"wrote {out}")


@app.command("export-traces")
def export_traces(
    store: Annotated[Path, typer.Argument(help="the SQLite store of `judgegraph eval`")],
    out: Annotated[Path, typer.Argument(help="JSONL traces to write")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="which run; default: the store's only run")] = None,
    labels: Annotated[
        str, typer.Option(help="judge: the verdicts of ok rows; human: the labels the source carried")
    ] = "judge",
) -> None:
    """Turn a judged eval run into JSONL traces, labelled by the judge or by the source's human labels."""
    from ._store_traces import traces_from_store
    from ._traces import write_traces

    if labels not in ("judge", "human"):
        raise _fail(f"--labels must be judge or human, got {labels!r}")
    try:
        export = traces_from_store(store, run_id=run_id, labels=labels)  # type: ignore[arg-type]
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise _fail(str(exc)) from None
    n = write_traces(out, export.traces)
    skipped = {k: v for k, v in export.counts.items() if k not in ("rows", "exported")}
    console.print(f"run {export.run_id} ({export.kind}): {export.counts['rows']} rows, wrote {n} traces to {out}")
    if skipped:
        console.print("skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())), highlight=False)
    for problem in export.problems:
        console.print(f"  {problem}", markup=False, highlight=False, soft_wrap=True)


@app.command("import-pandalm")
def import_pandalm(
    source: Annotated[Path, typer.Argument(help="PandaLM testset-v1.json")],
    out: Annotated[Path, typer.Argument(help="JSONL traces to write")],
) -> None:
    """Convert PandaLM's annotated test set to JSONL traces (majority label)."""
    from ._traces import TraceFormatError, traces_from_pandalm, write_traces

    try:
        n = write_traces(out, traces_from_pandalm(source))
    except (TraceFormatError, FileNotFoundError) as exc:
        raise _fail(str(exc)) from None
    console.print(f"wrote {n} traces to {out}")


@app.command()
def evaluate(
    traces: Annotated[Path, typer.Argument(help="JSONL traces with labels")],
    classifier: Annotated[Path | None, typer.Option(help="a saved probe or sequence classifier")] = None,
    model: Annotated[Path | None, typer.Option(help="a generative judge directory (TransformersBackend)")] = None,
    template: Annotated[str, typer.Option(help="judge template for --model")] = "pairwise-choice",
    max_tokens: Annotated[int, typer.Option(help="generation budget for --model")] = 256,
) -> None:
    """Agreement and swap consistency of a trained judge on labelled traces."""
    from ._evaluate import evaluate_judge
    from ._traces import TraceFormatError, read_traces

    if (classifier is None) == (model is None):
        raise _fail("give exactly one of --classifier or --model")
    try:
        items = read_traces(traces)
    except (TraceFormatError, FileNotFoundError) as exc:
        raise _fail(str(exc)) from None
    judge: object
    if classifier is not None:
        from ._classifier_judge import create_classifier_judge

        judge = create_classifier_judge(classifier)
        items = [t for t in items if t.kind == "pairwise"]
    else:
        from judgegraph import PairwiseJudge, PointwiseJudge, TransformersBackend
        from judgegraph.judges import get_template

        backend = TransformersBackend(model)  # type: ignore[arg-type]
        kind = get_template(template).kind
        judge = (PairwiseJudge if kind == "pairwise" else PointwiseJudge)(
            backend, template=template, max_tokens=max_tokens
        )
        items = [t for t in items if t.kind == kind]
    if not items:
        raise _fail(f"{traces} has no traces this judge can evaluate")
    console.print(evaluate_judge(judge, items).summary(), soft_wrap=True)


@app.command("merge-lora")
def merge_lora_cmd(
    adapter: Annotated[Path, typer.Argument(help="LoRA adapter directory")],
    out: Annotated[Path, typer.Argument(help="where to write full weights")],
) -> None:
    """Fold a LoRA adapter into its base model."""
    from ._export import merge_lora

    try:
        console.print(f"wrote {merge_lora(adapter, out)}")
    except ValueError as exc:
        raise _fail(str(exc)) from None


@app.command()
def merge(
    models: Annotated[list[Path], typer.Argument(help="two or more judge directories, same architecture")],
    out: Annotated[Path, typer.Option(help="where to write the merged judge")],
    weights: Annotated[str | None, typer.Option(help="comma-separated weights summing to 1; default equal")] = None,
) -> None:
    """Linear weight merging of judges (e.g. a pointwise-trained and a pairwise-trained one)."""
    from ._export import merge_linear

    try:
        w = [float(x) for x in weights.split(",")] if weights else None
        console.print(f"wrote {merge_linear(models, out, weights=w)}")
    except ValueError as exc:
        raise _fail(str(exc)) from None


@app.command()
def export(
    model: Annotated[Path, typer.Argument(help="trained model or LoRA adapter directory")],
    out: Annotated[Path, typer.Argument(help="servable directory to write")],
    dtype: Annotated[str, typer.Option(help="auto, bfloat16, float16 or float32")] = "auto",
) -> None:
    """Write a directory TGI, vLLM, SGLang and TransformersBackend load, and print the launch commands."""
    from ._export import export_for_serving

    if dtype not in ("auto", "bfloat16", "float16", "float32"):
        raise _fail(f"--dtype must be auto, bfloat16, float16 or float32, got {dtype!r}")
    try:
        result = export_for_serving(model, out, dtype=dtype)  # type: ignore[arg-type]
    except ValueError as exc:
        raise _fail(str(exc)) from None
    console.print(f"wrote {result.directory}" + (" (LoRA adapter merged)" if result.merged_adapter else ""))
    _print_commands(result.commands)


def _print_commands(commands: dict[str, str]) -> None:
    if not commands:
        return
    table = Table("serve with", "command", show_lines=True)
    for k, v in commands.items():
        table.add_row(k, v)
    console.print(table)
