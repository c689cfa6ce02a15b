"""Where a job runs: one interface, and the engines behind it.

An :class:`Engine` runs a :class:`JobSpec` into a store and returns its
:class:`JobSummary`. Every engine reads the same spec, keys verdicts by the
same config hash and writes the same store, so the command line (and a
script) only chooses one:

- :class:`LocalEngine` judges in this process, ``concurrency`` items at a time;
- :class:`BatchEngine` sends the model calls through a batch API: the
  provider's, or vLLM's offline ``run_batch`` (``BatchOptions(engine="vllm")``);
- :class:`RayEngine` spreads the items over Ray Data actors.

``run`` is for synchronous callers (the CLI, a script); async code calls
:func:`~judgegraph.jobs.arun_spec` or :func:`~judgegraph.jobs.arun_job`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ._batch_api import BatchOptions
    from ._recorder import JobSummary, ProgressCallback
    from ._spec import JobSpec
    from ._store import Store

__all__ = ["ENGINES", "BatchEngine", "Engine", "LocalEngine", "RayEngine", "engine_for"]

#: The names ``--engine`` takes.
ENGINES = ("local", "ray")


@runtime_checkable
class Engine(Protocol):
    """Runs a job spec into a store; resumes what the store already holds."""

    @property
    def name(self) -> str:
        """How summaries and messages name the engine."""
        ...

    def run(
        self,
        spec: JobSpec,
        *,
        store: Store,
        run_id: str | None = None,
        rerun_failed: bool = False,
        progress: ProgressCallback | None = None,
    ) -> JobSummary:
        """Judge every row of the spec's source not yet in the store, and return the run's summary."""
        ...


class _InProcess:
    """An engine that runs :func:`~judgegraph.jobs.arun_spec` on an event loop of this process;
    a subclass says whether the model calls go through a batch API, and with which options."""

    def _batch(self) -> tuple[bool, BatchOptions | None]:
        raise NotImplementedError

    def run(
        self,
        spec: JobSpec,
        *,
        store: Store,
        run_id: str | None = None,
        rerun_failed: bool = False,
        progress: ProgressCallback | None = None,
    ) -> JobSummary:
        from ._runner import arun_spec

        batch_api, options = self._batch()
        return asyncio.run(
            arun_spec(
                spec,
                store=store,
                run_id=run_id,
                rerun_failed=rerun_failed,
                progress=progress,
                batch_api=batch_api,
                batch_options=options,
            )
        )


@dataclass(frozen=True)
class LocalEngine(_InProcess):
    """Judges in this process, live calls to the spec's backend."""

    name: ClassVar[str] = "local"

    def _batch(self) -> tuple[bool, BatchOptions | None]:
        return False, None


@dataclass(frozen=True)
class BatchEngine(_InProcess):
    """Sends the model calls through a batch API at its discount: the
    provider's, or vLLM's offline ``run_batch`` when ``options.engine`` is
    ``"vllm"``. ``options=None``: the spec's ``batch_api`` options."""

    options: BatchOptions | None = None

    @property
    def name(self) -> str:
        return "batch-vllm" if self.options is not None and self.options.engine == "vllm" else "batch-api"

    def _batch(self) -> tuple[bool, BatchOptions | None]:
        return True, self.options


@dataclass(frozen=True)
class RayEngine:
    """Spreads the items over ``actors`` Ray Data actors, on the cluster at
    ``address`` or a local Ray it starts (needs the ``ray`` extra)."""

    actors: int = 2
    address: str | None = None
    name: ClassVar[str] = "ray"

    def run(
        self,
        spec: JobSpec,
        *,
        store: Store,
        run_id: str | None = None,
        rerun_failed: bool = False,
        progress: ProgressCallback | None = None,
    ) -> JobSummary:
        from ._ray import run_spec_ray

        return run_spec_ray(
            spec,
            store=store,
            run_id=run_id,
            rerun_failed=rerun_failed,
            progress=progress,
            actors=self.actors,
            address=self.address,
        )


def engine_for(
    name: str,
    *,
    batch_api: bool = False,
    batch_options: BatchOptions | None = None,
    ray_actors: int = 2,
    ray_address: str | None = None,
) -> Engine:
    """The engine the command line's options name. A batch API takes the
    model calls whichever engine is named (its polling runs in this process)."""
    if name not in ENGINES:
        raise ValueError(f"--engine must be {' or '.join(ENGINES)}, not {name!r}")
    if batch_api:
        return BatchEngine(batch_options)
    if name == "ray":
        return RayEngine(actors=ray_actors, address=ray_address)
    return LocalEngine()
