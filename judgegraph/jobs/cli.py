"""``judgegraph eval`` and ``judgegraph report``.

``eval_command`` and ``report_command`` are plain typer command functions;
``app`` bundles them for ``python -m judgegraph.jobs.cli``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from judgegraph._internal.text_files import read_text

from ._cli_progress import JobBars, print_summary
from ._cli_progress import progress_display as _progress
from ._engines import Engine, engine_for

if TYPE_CHECKING:
    from ._recorder import JobSummary
    from ._spec import JobSpec

__all__ = ["app", "eval_command", "report_command"]

DEFAULT_STORE = "judgegraph.db"

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Batch evaluation jobs and their reports.")


def _parse_pairs(values: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or []:
        key, sep, val = v.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise typer.BadParameter(f"expected FIELD=VALUE, got {v!r}", param_hint=what)
        out[key.strip()] = val.strip()
    return out


def _load_spec_file(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise typer.BadParameter("reading YAML needs PyYAML; use a JSON spec", param_hint="--spec") from None
        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise typer.BadParameter("a job spec is a JSON object", param_hint="--spec")
    return data


def _fail(console: Console, message: str, code: int = 2) -> typer.Exit:
    # Escaped: rich would read "[ray]" in "pip install 'judgegraph[ray]'" as markup and drop it.
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


# Exit codes: 0 every row judged ok (or failures allowed); 1 some rows failed or were
# invalid; 2 bad usage, input or configuration; 3 the store could not be written.
EXIT_ROWS_FAILED = 1
EXIT_STORE = 3


def eval_command(
    source: Annotated[list[str] | None, typer.Argument(help="Input files, directories or globs.")] = None,
    spec_file: Annotated[Path | None, typer.Option("--spec", help="A JobSpec as JSON (or YAML).")] = None,
    kind: Annotated[str, typer.Option(help="pairwise, pointwise, multiturn or rubric.")] = "pairwise",
    fmt: Annotated[str, typer.Option("--format", help="auto jsonl json csv tsv parquet langsmith otel")] = "auto",
    mapping: Annotated[list[str] | None, typer.Option("--map", help="FIELD=PATH, e.g. response_a=outputs.0")] = None,
    label: Annotated[str | None, typer.Option(help="Path of the human label in each record.")] = None,
    label_map: Annotated[list[str] | None, typer.Option("--label-map", help="RAW=A|B|tie or RAW=number")] = None,
    category: Annotated[str | None, typer.Option(help="Path of a grouping field for the report.")] = None,
    item_id: Annotated[str | None, typer.Option("--id", help="Path of a stable item id.")] = None,
    model: Annotated[str | None, typer.Option(help="Judge model name.")] = None,
    backend: Annotated[str, typer.Option(help="openai (any OpenAI-compatible server) or tgi.")] = "openai",
    base_url: Annotated[str | None, typer.Option(help="Server URL, e.g. http://localhost:8000/v1")] = None,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key.")] = "OPENAI_API_KEY",
    template: Annotated[str | None, typer.Option(help="Prompt template id.")] = None,
    swap: Annotated[str | None, typer.Option(help="Pairwise position swap: both or single.")] = None,
    mode: Annotated[str, typer.Option(help="multiturn: conversation or turn.")] = "conversation",
    criteria: Annotated[Path | None, typer.Option(help="rubric: a JSON list of criteria.")] = None,
    no_structured: Annotated[bool, typer.Option("--no-structured", help="Ask for free text, not JSON.")] = False,
    price_in: Annotated[float | None, typer.Option(help="USD per million input tokens.")] = None,
    price_out: Annotated[float | None, typer.Option(help="USD per million output tokens.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Items in flight.")] = None,
    rpm: Annotated[float | None, typer.Option(help="Requests per minute cap.")] = None,
    tpm: Annotated[float | None, typer.Option(help="Tokens per minute cap.")] = None,
    max_attempts: Annotated[int, typer.Option(help="Attempts per request (retries + 1).")] = 4,
    timeout: Annotated[float, typer.Option(help="Seconds per attempt.")] = 60.0,
    store: Annotated[Path, typer.Option(help="SQLite result store.", envvar="JUDGEGRAPH_STORE")] = Path(DEFAULT_STORE),
    store_timeout: Annotated[
        float, typer.Option(help="Seconds a commit waits for another writer's lock before it is retried.")
    ] = 30.0,
    run_id: Annotated[str | None, typer.Option(help="Run name (default: from source and judge config).")] = None,
    rerun_failed: Annotated[bool, typer.Option("--rerun-failed", help="Judge unparsed/error items again.")] = False,
    engine: Annotated[str, typer.Option(help="local or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (ray engine).")] = None,
    ray_actors: Annotated[int, typer.Option(help="Judge actors (ray engine).")] = 2,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    batch_api: Annotated[
        bool | None,
        typer.Option(
            "--batch-api/--no-batch-api",
            help="Send the model calls through the provider's batch API (OpenAI), or live"
            " (default: as the spec's batch_api says; live without one).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the requests, tokens and cost (live and batch); send nothing.")
    ] = False,
    batch_discount: Annotated[
        float | None, typer.Option(help="Batch price as a share of the live price [default: 0.5].")
    ] = None,
    poll_interval: Annotated[
        float | None, typer.Option(help="Batch API: first wait between polls (s) [default: 5].")
    ] = None,
    batch_engine: Annotated[
        str | None, typer.Option(help="Batch API engine: provider, or vllm (vLLM's offline run_batch on --vllm-model).")
    ] = None,
    vllm_model: Annotated[str | None, typer.Option(help="--batch-engine vllm: the model folder.")] = None,
    vllm_python: Annotated[
        str | None, typer.Option(help="--batch-engine vllm: an interpreter with vllm [default: this one].")
    ] = None,
    vllm_arg: Annotated[
        list[str] | None,
        typer.Option(help="--batch-engine vllm: a run_batch argument (repeat), e.g. --vllm-arg=--dtype=float32"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    allow_failures: Annotated[
        bool, typer.Option("--allow-failures", help="Exit 0 even when rows are unparsed, errored or invalid.")
    ] = False,
) -> None:
    """Judge every item of a source and store the results; rerun to resume.

    Exits 0 when every row was judged ok, 1 when any row is unparsed, errored
    or invalid (unless --allow-failures), 2 on bad usage or configuration and
    3 when the store could not be written."""
    console = Console(stderr=True)
    spec = _spec_from_flags(
        console,
        spec_file=spec_file,
        source=source,
        concurrency=concurrency,
        flags=_JobFlags(
            kind=kind,
            fmt=fmt,
            mapping=mapping,
            label=label,
            label_map=label_map,
            category=category,
            item_id=item_id,
            model=model,
            backend=backend,
            base_url=base_url,
            api_key_env=api_key_env,
            template=template,
            swap=swap,
            mode=mode,
            criteria=criteria,
            no_structured=no_structured,
            price_in=price_in,
            price_out=price_out,
            rpm=rpm,
            tpm=tpm,
            max_attempts=max_attempts,
            timeout=timeout,
            vllm_model=vllm_model,
            batch_engine=batch_engine,
        ),
    )

    from ._batch_cli import batch_options as _batch_options

    given = {
        "batch_discount": batch_discount,
        "poll_initial_s": poll_interval,
        "engine": batch_engine,
        "vllm_model": vllm_model,
        "vllm_python": vllm_python,
        "vllm_args": tuple(vllm_arg) if vllm_arg else None,
    }
    try:  # the spec's options, with what the command line gives instead
        batch_options = _batch_options(spec, given)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise _fail(
            console, f"invalid batch option: {'.'.join(map(str, e['loc'])) or 'batch_api'}: {e['msg']}"
        ) from None
    if batch_api is None:
        batch_api = spec.batch_api is not None or batch_engine is not None
    if dry_run:
        from ._batch_cli import dry_run as _dry_run

        _dry_run(console, spec, store, batch_options, as_json=as_json, rerun_failed=rerun_failed)
        return
    try:
        runner = engine_for(
            engine, batch_api=batch_api, batch_options=batch_options, ray_actors=ray_actors, ray_address=ray_address
        )
    except ValueError as exc:
        raise _fail(console, str(exc)) from None
    summary = _run_guarded(
        console,
        runner,
        spec,
        store,
        store_timeout=store_timeout,
        run_id=run_id,
        rerun_failed=rerun_failed,
        progress=progress,
    )
    _print_result(console, summary, as_json=as_json, allow_failures=allow_failures)


@dataclass(frozen=True)
class _JobFlags:
    """The flags that describe a job when no ``--spec`` is given."""

    kind: str
    fmt: str
    mapping: list[str] | None
    label: str | None
    label_map: list[str] | None
    category: str | None
    item_id: str | None
    model: str | None
    backend: str
    base_url: str | None
    api_key_env: str
    template: str | None
    swap: str | None
    mode: str
    criteria: Path | None
    no_structured: bool
    price_in: float | None
    price_out: float | None
    rpm: float | None
    tpm: float | None
    max_attempts: int
    timeout: float
    vllm_model: str | None
    batch_engine: str | None

    def spec_data(self, source: list[str], concurrency: int | None) -> dict[str, object]:
        """The flags mapped onto JobSpec's config models (validated by the caller)."""
        from judgegraph.types import Pricing

        model = self.model
        if model is None and self.vllm_model:  # the name the requests carry and run_batch serves
            model = Path(self.vllm_model).name
        if model is None:
            need = "--vllm-model (the model folder)" if self.batch_engine == "vllm" else "--model (or use --spec)"
            raise ValueError(f"{need} is required")
        pricing = None
        if self.price_in is not None or self.price_out is not None:
            pricing = Pricing(input_per_mtok=self.price_in or 0.0, output_per_mtok=self.price_out or 0.0)
        crit = json.loads(read_text(self.criteria)) if self.criteria is not None else None
        return {
            "source": {
                "path": list(source),
                "format": self.fmt,
                "fields": _parse_pairs(self.mapping, "--map"),
                "label": self.label,
                "label_map": _parse_pairs(self.label_map, "--label-map") or None,
                "category": self.category,
                "id": self.item_id,
            },
            "judge": {
                "kind": self.kind,
                "template": self.template,
                "swap": {"mode": self.swap} if self.swap else None,
                "mode": self.mode,
                "criteria": crit,
                "structured": False if self.no_structured else None,
            },
            "backend": {
                "kind": self.backend,
                "model": model,
                "base_url": self.base_url,
                "api_key_env": self.api_key_env,
                "max_attempts": self.max_attempts,
                "timeout_s": self.timeout,
                "pricing": pricing.model_dump() if pricing else None,
                "structured_output": not self.no_structured,
            },
            "limits": {"concurrency": concurrency or 32, "rpm": self.rpm, "tpm": self.tpm},
        }


def _spec_from_flags(
    console: Console,
    *,
    spec_file: Path | None,
    source: list[str] | None,
    concurrency: int | None,
    flags: _JobFlags,
) -> JobSpec:
    """The job the command line describes: ``--spec`` (with the sources and
    concurrency given beside it), or the flags mapped onto the config models.
    Any problem is one line on stderr and exit code 2."""
    from . import JobSpec

    try:
        if spec_file is not None:
            data = _load_spec_file(spec_file)
            if source:
                data.setdefault("source", {})["path"] = list(source)
            if concurrency is not None:
                data.setdefault("limits", {})["concurrency"] = concurrency
            return JobSpec.model_validate(data)
        if not source:
            raise _fail(console, "give input files, or --spec")
        return JobSpec.model_validate(flags.spec_data(source, concurrency))
    except typer.Exit:  # already reported
        raise
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise _fail(console, f"invalid job: {problems}") from None
    except (ValueError, OSError) as exc:
        raise _fail(console, str(exc)) from None
    except Exception as exc:  # a YAML syntax error, and the like: one line, not a traceback
        raise _fail(console, f"{spec_file}: {type(exc).__name__}: {exc}") from None


def _run_guarded(
    console: Console,
    runner: Engine,
    spec: JobSpec,
    store: Path,
    *,
    store_timeout: float,
    run_id: str | None,
    rerun_failed: bool,
    progress: bool,
) -> JobSummary:
    """Run the job on ``runner`` into the store, turning every way it can stop
    into one line and an exit code; what was judged is saved first."""
    from ._store import Store
    from ._store_guard import StoreCommitError, StoreError

    bar = _progress(console) if progress else None
    on_progress = JobBars(bar)

    try:
        on_progress.start()
        st = Store(store, busy_timeout_s=store_timeout)
        try:
            summary = runner.run(spec, store=st, run_id=run_id, rerun_failed=rerun_failed, progress=on_progress)
        except BaseException as exc:
            try:
                st.close()  # one more try at what is buffered
            except StoreCommitError as late:
                raise StoreCommitError(
                    f"{store}: the store refused commits ({late.reason}); {late.pending} judged results are "
                    "not saved: run the same command again to judge them and the rest",
                    pending=late.pending,
                    reason=late.reason,
                ) from exc
            if isinstance(exc, StoreCommitError) and exc.pending:
                raise StoreCommitError(
                    f"{store}: the job stopped, the store refused commits ({exc.reason}); everything judged "
                    "is saved now: run the same command again to judge the rest",
                    pending=0,
                    reason=exc.reason,
                ) from None
            raise
        st.close()
    except KeyboardInterrupt:
        if bar is not None:
            bar.stop()
        console.print("[yellow]interrupted[/yellow]: finished items are saved; run the same command to resume.")
        raise typer.Exit(130) from None
    except StoreCommitError as exc:
        if bar is not None:
            bar.stop()
        raise _fail(console, str(exc), EXIT_STORE) from None
    except (StoreError, sqlite3.Error) as exc:
        if bar is not None:
            bar.stop()
        where = "" if isinstance(exc, StoreError) else f"{store}: "
        raise _fail(console, f"{where}{exc}", EXIT_STORE if isinstance(exc, sqlite3.Error) else 2) from None
    except (ValueError, OSError, KeyError, ImportError) as exc:
        if bar is not None:
            bar.stop()
        raise _fail(console, str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)) from None
    if bar is not None:
        bar.stop()
    return summary


def _print_result(console: Console, summary: JobSummary, *, as_json: bool, allow_failures: bool) -> None:
    """The summary on stdout (JSON or text), failed rows on stderr, and the exit code rows give."""
    if as_json:
        sys.stdout.write(summary.model_dump_json(indent=2) + "\n")
        if not allow_failures and (summary.unparsed or summary.errors or summary.invalid):
            raise typer.Exit(EXIT_ROWS_FAILED)
    else:
        failed = print_summary(Console(), console, summary)
        if failed and not allow_failures:
            console.print(
                f"[red]{failed} of {summary.rows} rows failed or were invalid[/red]: exit code {EXIT_ROWS_FAILED} "
                "(--allow-failures to exit 0)"
            )
            raise typer.Exit(EXIT_ROWS_FAILED)


def report_command(
    run: Annotated[str, typer.Argument(help="Run id (see `judgegraph eval` output).")],
    store: Annotated[Path, typer.Option(help="SQLite result store.", envvar="JUDGEGRAPH_STORE")] = Path(DEFAULT_STORE),
    out: Annotated[Path | None, typer.Option(help="Output folder (default: report-RUN).")] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            help='Human labels for some items, by the source\'s id field: JSONL ({"id": ..., "label": ...}) or '
            "CSV (id,label). The report then shows the judge-corrected rates beside the naive ones."
        ),
    ] = None,
) -> None:
    """Write an HTML report with plots, and JSON and Markdown summaries."""
    from ._report import read_labels, write_report
    from ._store import Store
    from ._store_guard import StoreError

    console = Console(stderr=True)
    if not store.exists():
        raise _fail(console, f"no store at {store}")
    try:
        by_id = read_labels(labels) if labels is not None else None
        # Read-only: a report changes nothing, and works on a store the user may not write.
        with Store(store, read_only=True) as st:
            paths = write_report(st, run, out or Path(f"report-{run}"), human_labels=by_id)
    except KeyError as exc:
        raise _fail(console, str(exc.args[0]) if exc.args else str(exc)) from None
    except StoreError as exc:
        raise _fail(console, str(exc)) from None
    except sqlite3.Error as exc:
        raise _fail(console, f"{store}: cannot read the result store: {exc}") from None
    except ImportError as exc:
        raise _fail(console, str(exc)) from None
    except (OSError, ValueError) as exc:  # an unreadable labels file, or one that matches no row
        raise _fail(console, str(exc)) from None
    printed = Console(soft_wrap=True)  # the paths are the command's result: stdout, never wrapped
    for kind, p in paths.items():
        printed.print(f"{kind}: {p}", highlight=False)


app.command("eval")(eval_command)
app.command("report")(report_command)

if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    app()
