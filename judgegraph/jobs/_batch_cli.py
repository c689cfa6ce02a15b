"""``judgegraph eval --dry-run``: what a run would send and cost, printed before anything is sent."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from ._batch import aestimate_batch_job
from ._spec import build_backend, build_judge

__all__ = ["dry_run"]


def _backend(spec: Any, options: Any) -> Any:
    if options.engine == "vllm":
        from ._batch_vllm import local_backend

        return local_backend(spec.backend, options)
    return build_backend(spec.backend)


def batch_options(spec: Any, given: dict[str, Any]) -> Any:
    """The spec's batch options with what the command line gives instead (None: not given)."""
    from ._batch_api import BatchOptions

    # Only what the spec set, so defaults that depend on the engine follow the engine in use.
    base = spec.batch_api.model_dump(exclude_unset=True) if spec.batch_api else {}
    if given.get("engine") not in (None, "vllm"):  # the spec's vllm_* do not carry to another engine
        base = {k: v for k, v in base.items() if not k.startswith("vllm_")}
    return BatchOptions.model_validate({**base, **{k: v for k, v in given.items() if v is not None}})


def dry_run(console: Console, spec: Any, store: Path, options: Any, *, as_json: bool, rerun_failed: bool) -> None:
    est = asyncio.run(
        aestimate_batch_job(
            spec.source,
            judge=build_judge(spec.judge),
            kind=spec.judge.kind,
            store=store if store.exists() else None,
            context={"backend": _backend(spec, options)},
            options=options,
            rerun_failed=rerun_failed,
        )
    )
    if as_json:
        sys.stdout.write(est.model_dump_json(indent=2) + "\n")
        return

    def usd(v: float | None) -> str:
        return "unknown (give --price-in/--price-out)" if v is None else f"${v:.4f}"

    console.print(
        f"dry run: {est.items} items to judge, {est.requests} requests, about {est.prompt_tokens:,} prompt tokens"
        f" and at most {est.completion_tokens:,} completion tokens; cost live {usd(est.live_cost_usd)},"
        f" batch {usd(est.batch_cost_usd)} (repair requests not included). Nothing was sent."
    )
