"""Run the Python blocks of a Markdown page, each as its own script, against a
loopback OpenAI server (OPENAI_BASE_URL) that answers every judge request.

A block opts out only with a marker right above it that gives a reason:
``<!-- readme-test: skip (why) -->``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"(<!-- readme-test: skip([^>]*)-->\s*)?```python\n(.*?)```", re.S)
RATIONALE = "Correct and concise."


def blocks(page: Path) -> list[tuple[int, str]]:
    """(index, code) of every runnable python block; a skip must say why."""
    found = []
    for i, m in enumerate(_BLOCK.finditer(page.read_text())):
        if m.group(1):
            assert re.search(r"\(\s*\S", m.group(2)), f"{page.name} block {i}: a skip marker needs a reason in (...)"
            continue
        found.append((i, m.group(3)))
    return found


def _fill(schema: dict[str, Any]) -> dict[str, Any]:
    """A verdict that fits a structured-output schema: top score, answer A wins."""
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if "enum" in prop:
            out[name] = prop["enum"][0]
        elif prop.get("type") == "integer":
            out[name] = prop.get("minimum", 1) if name.endswith("_b") else prop.get("maximum", 5)
        elif prop.get("type") == "boolean":
            out[name] = True
        else:
            out[name] = RATIONALE
    return out


def verdict(req: LoopbackRequest) -> Reply:
    """Structured output when asked for, else the text marker every template reads."""
    fmt = req.body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return Reply(json.dumps(_fill(fmt["json_schema"]["schema"])))
    if "[SCORES]" in req.prompt:
        return Reply(f"{RATIONALE}\n[SCORES] 9 3")
    return Reply(f"{RATIONALE}\n[RESULT] 5")


def run_script(script: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run a script with the OpenAI variables pointing at a fresh loopback server."""
    with LoopbackServer(verdict) as server:
        env = {**os.environ, "OPENAI_API_KEY": "sk-docs-test", "OPENAI_BASE_URL": server.url + "/v1"}
        proc = subprocess.run(
            [sys.executable, str(script), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
        )
        calls = sum(server.calls.values())
    return proc, calls


def run_block(code: str, tmp_path: Path, name: str) -> tuple[subprocess.CompletedProcess[str], int]:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    return run_script(script, tmp_path)
