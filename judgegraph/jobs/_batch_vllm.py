"""The batch engine on a local model: vLLM's offline runner behind the Files and Batches calls.

:class:`VLLMBatchClient` offers the part of ``openai.AsyncOpenAI`` the
:class:`~judgegraph.jobs._batch_api.BatchSettler` uses (``files.create``,
``files.content``, ``batches.create/retrieve/list/cancel``). A batch is one
``python -m vllm.entrypoints.openai.run_batch`` process on its input file,
which is the very JSONL a provider gets. Everything a batch is lives in its
folder under the work folder (next to the store), so a rerun after ``kill -9``
reads the same states::

    batches/<id>/batch.json   written first: input file, metadata (the settler's key)
    batches/<id>/started      created (exclusively) just before the process is started
    batches/<id>/pid          "launcher-pid start child-pid start", written by the launcher
    batches/<id>/exit         run_batch's exit status, written by the launcher when it ends
    batches/<id>/output.jsonl run_batch's output; log.txt its log

A small launcher (our interpreter) starts run_batch in its own session and
records its exit status, so a batch outlives the job that started it and its
end is known even when nobody waited for it. Nothing is ever started twice: a
batch is started only from ``queued`` (no ``started`` file), and a batch whose
process died before writing ``exit`` is ``failed`` (the settler then
resubmits its requests under its usual bound).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._vllm_process import LAUNCHER, RUN_BATCH, START_GRACE_S, VLLMBatchError, alive, check_vllm, last_error, put
from ._vllm_process import read_pids as _read_pids
from ._vllm_process import vllm_env as _env

__all__ = [
    "VLLMBatchClient",
    "VLLMBatchError",
    "check_options",
    "check_vllm",
    "client_for",
    "local_backend",
    "spec_backend",
    "work_dir_for",
]


def work_dir_for(store_path: Path) -> Path:
    """Where a store's local batches live: beside it, named after it."""
    return store_path.with_name(store_path.name + ".vllm-batches")


@dataclass(frozen=True)
class _Err:
    code: str
    message: str


@dataclass(frozen=True)
class _Errors:
    data: list[_Err]


@dataclass(frozen=True)
class LocalBatch:
    """The fields of an OpenAI ``Batch`` the settler reads."""

    id: str
    status: str
    input_file_id: str
    metadata: dict[str, str] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: _Errors | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class _FileObject:
    id: str


@dataclass(frozen=True)
class _Content:
    content: bytes


class _Files:
    def __init__(self, client: VLLMBatchClient) -> None:
        self._c = client

    async def create(self, *, file: tuple[str, bytes], purpose: str) -> _FileObject:
        fid = f"vfile-{uuid.uuid4().hex[:20]}"
        put(self._c.work / "files" / f"{fid}.jsonl", file[1])
        return _FileObject(fid)

    async def content(self, file_id: str) -> _Content:
        return _Content(self._c.file_path(file_id).read_bytes())


class _Batches:
    def __init__(self, client: VLLMBatchClient) -> None:
        self._c = client

    async def create(
        self, *, input_file_id: str, endpoint: str, completion_window: str, metadata: dict[str, str] | None = None
    ) -> LocalBatch:
        if not self._c.file_path(input_file_id).is_file():
            raise VLLMBatchError(f"no input file {input_file_id} in {self._c.work}")
        bid = f"vbatch-{time.time_ns():x}-{uuid.uuid4().hex[:8]}"
        rec = {"id": bid, "input_file_id": input_file_id, "metadata": metadata or {}, "created_at": time.time()}
        put(self._c.work / "batches" / bid / "batch.json", json.dumps(rec).encode())
        self._c.pump()
        return self._c.state(bid)

    async def retrieve(self, batch_id: str) -> LocalBatch:
        self._c.pump()
        return self._c.state(batch_id)

    async def list(self, *, limit: int = 100) -> AsyncIterator[LocalBatch]:
        # Newest first, as the provider lists them; ``limit`` is the page size there, ignored here.
        for bid in sorted(self._c.batch_ids(), reverse=True):
            yield self._c.state(bid)

    async def cancel(self, batch_id: str) -> LocalBatch:
        d = self._c.work / "batches" / batch_id
        put(d / "cancelled", b"")
        pids = _read_pids(d)
        if pids is not None and alive(pids[0], pids[1]):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pids[0], signal.SIGTERM)  # the launcher leads run_batch's session
        return self._c.state(batch_id)


class VLLMBatchClient:
    """Files and Batches calls answered by local run_batch processes (see the module doc).

    ``python`` must import vllm; ``model`` is the model folder run_batch
    loads; ``args`` go to run_batch as they are (``--dtype``,
    ``--max-model-len``, ...). The requests' ``model`` names are served
    (``--served-model-name``) unless ``args`` name them.
    """

    poll_cap_s = 2.0  # see BatchSettler._apoll

    def __init__(
        self,
        work: Path,
        *,
        model: str | os.PathLike[str],
        python: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        processes: int = 1,
        check: bool = True,
    ) -> None:
        self.work = Path(work).absolute()  # the launcher runs in the batch's folder
        self.model = Path(model)
        self.python = Path(python) if python is not None else Path(sys.executable)
        self.args = tuple(args)
        self.processes = processes
        self.files = _Files(self)
        self.batches = _Batches(self)
        self._procs: dict[str, subprocess.Popen[bytes]] = {}  # started here: reaped on poll
        if check:
            self.check()
        self.work.mkdir(parents=True, exist_ok=True)

    def check(self) -> None:
        """Fail early, naming the option, when the interpreter or the model folder cannot work."""
        check_vllm(self.python, self.model)

    def file_path(self, file_id: str) -> Path:
        if file_id.startswith("vout-"):
            return self.work / "batches" / Path(file_id.removeprefix("vout-")).name / "output.jsonl"
        return self.work / "files" / f"{Path(file_id).name}.jsonl"

    def batch_ids(self) -> list[str]:
        root = self.work / "batches"
        return [p.parent.name for p in root.glob("*/batch.json")] if root.is_dir() else []

    def _reap(self, bid: str, ended: bool) -> None:
        proc = self._procs.get(bid)
        if proc is None:
            return
        if ended:  # the launcher wrote its exit file and is leaving: reap it, or it stays a zombie
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        if proc.poll() is not None:
            del self._procs[bid]

    def state(self, bid: str) -> LocalBatch:
        d = self.work / "batches" / bid
        try:
            rec = json.loads((d / "batch.json").read_text())
        except (OSError, ValueError):
            raise VLLMBatchError(f"no batch {bid} in {self.work}") from None
        self._reap(bid, (d / "exit").is_file())

        def out(status: str, reason: str | None = None) -> LocalBatch:
            output = d / "output.jsonl"
            return LocalBatch(
                id=bid,
                status=status,
                input_file_id=rec["input_file_id"],
                metadata=rec.get("metadata") or {},
                output_file_id=f"vout-{bid}" if output.is_file() and status in ("completed", "failed") else None,
                errors=_Errors([_Err("vllm_run_batch", reason)]) if reason else None,
                created_at=float(rec.get("created_at", 0.0)),
            )

        exit_ = d / "exit"
        if exit_.is_file():
            rc = exit_.read_text().strip()
            if (d / "cancelled").exists():
                return out("cancelled")
            if rc == "0" and (d / "output.jsonl").is_file():
                return out("completed")
            return out("failed", f"run_batch exited with status {rc}: {last_error(d / 'log.txt')} (log {d})")
        if (d / "cancelled").exists():
            return out("cancelled")
        if not (d / "started").exists():
            return out("validating")  # queued: started when a process slot is free
        pids = _read_pids(d)
        if pids is None:
            if time.time() - (d / "started").stat().st_mtime < START_GRACE_S:
                return out("validating")
            return out("failed", f"the run_batch process never started: {last_error(d / 'log.txt')} (log {d})")
        if alive(pids[0], pids[1]) or alive(pids[2], pids[3]):
            return out("in_progress")
        if self._complete(d, rec["input_file_id"]):  # the launcher was killed after run_batch wrote everything
            return out("completed")
        return out("failed", f"the run_batch process died before it finished: {last_error(d / 'log.txt')} (log {d})")

    def _complete(self, d: Path, input_file_id: str) -> bool:
        """Whether the output has a readable line for every request of the input."""

        def ids(path: Path) -> set[str]:
            found: set[str] = set()
            with path.open(encoding="utf-8", errors="replace") as f:
                for line in f:
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        found.add(str(json.loads(line)["custom_id"]))
            return found

        try:
            return ids(self.file_path(input_file_id)) <= ids(d / "output.jsonl")
        except OSError:
            return False

    def pump(self) -> None:
        """Start queued batches, oldest first, while fewer than ``processes`` run."""
        states = {bid: self.state(bid).status for bid in sorted(self.batch_ids())}
        root = self.work / "batches"
        running = sum(
            s == "in_progress" or (s == "validating" and (root / b / "started").exists()) for b, s in states.items()
        )
        for bid, s in states.items():
            if running >= self.processes:
                return
            d = root / bid
            if s != "validating" or (d / "started").exists():
                continue
            try:
                (d / "started").open("x").close()  # exclusive: one starter per batch, ever
            except FileExistsError:
                continue
            self._start(bid, d)
            running += 1

    def _command(self, d: Path, input_file: Path) -> list[str]:
        cmd = [str(self.python), "-m", RUN_BATCH, "-i", str(input_file), "-o", str(d / "output.jsonl")]
        cmd += ["--model", str(self.model.absolute())]
        if "--served-model-name" not in self.args:
            names: list[str] = []
            with input_file.open(encoding="utf-8") as f:
                for line in f:
                    name = str(json.loads(line)["body"].get("model", ""))
                    if name and name not in names:
                        names.append(name)
            cmd += ["--served-model-name", *(names or [self.model.name])]
        return [*cmd, *self.args]

    def _start(self, bid: str, d: Path) -> None:
        rec = json.loads((d / "batch.json").read_text())
        cmd = self._command(d, self.file_path(rec["input_file_id"]))
        (d / "command.json").write_text(json.dumps(cmd))
        with (d / "log.txt").open("ab") as log:  # the launcher's own troubles land in run_batch's log
            self._procs[bid] = subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, str(d), *cmd],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                start_new_session=True,  # outlives a job killed with its process group; cancel signals the group
                cwd=d,
            )


def local_backend(cfg: Any, options: Any, *, max_connections: int | None = None) -> Any:
    """The spec's backend for engine vllm: never called (run_batch answers), so it needs no
    server or key; its endpoint names the model folder, which then enters the config hash."""
    from ._spec import build_backend

    backend = build_backend(
        cfg.model_copy(update={"base_url": cfg.base_url or "http://127.0.0.1:9/v1"}), max_connections=max_connections
    )
    backend.endpoint = f"vllm-run-batch:{Path(options.vllm_model).absolute()}"  # type: ignore[attr-defined]
    return backend


def spec_backend(cfg: Any, options: Any, *, max_connections: int | None = None) -> Any:
    """A spec's backend: :func:`local_backend` under engine vllm, else the one it describes."""
    if getattr(options, "engine", None) == "vllm":
        return local_backend(cfg, options, max_connections=max_connections)
    from ._spec import build_backend

    return build_backend(cfg, max_connections=max_connections)


def check_options(options: Any) -> None:
    """Fail, naming the option, when a :class:`BatchOptions` for engine vllm cannot work."""
    check_vllm(options.vllm_python, options.vllm_model)


def client_for(store_path: Path, options: Any) -> VLLMBatchClient:
    """The local client a store's vLLM batch job uses, from its :class:`BatchOptions` (checked)."""
    return VLLMBatchClient(
        work_dir_for(store_path),
        model=options.vllm_model,
        python=options.vllm_python,
        args=options.vllm_args,
        processes=options.vllm_processes,
        check=False,
    )
