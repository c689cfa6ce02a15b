"""Every Python snippet in the README runs, so the docs cannot rot.

Snippets that talk to OpenAI run against a loopback server speaking its
protocol (OPENAI_BASE_URL), with a scripted verdict.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"(<!-- readme-test: skip[^>]*-->\s*)?```python\n(.*?)```", re.S)


def snippets() -> list[tuple[int, str]]:
    found = [(i, m.group(2)) for i, m in enumerate(_BLOCK.finditer(README.read_text())) if not m.group(1)]
    assert found, "README has no runnable python snippets"
    return found


def test_readme_commands_are_the_ones_ci_runs() -> None:
    text = README.read_text()
    ci = (README.parent / ".ci" / "run").read_text()
    install = re.search(r"pip install (torch==2\.13\.0 -e \"\.\[all,ray,dev\]\")", text)
    assert install and install.group(1) in ci
    assert "judgegraph quickstart" in text
    # The same test command, workers and all; CI only adds reporting flags after it.
    command = re.search(r"\.venv/bin/python -m pytest[^\n`]*", text)
    assert command, "the README shows no test command"
    runs = [line.strip() for line in ci.splitlines() if ".venv/bin/python -m pytest" in line]
    assert len(runs) == 1 and runs[0].startswith(command.group(0).strip() + " "), (command.group(0), runs)


def _verdict(req: LoopbackRequest) -> Reply:
    if "response_format" in req.body:  # structured output asked for: answer in JSON
        return Reply('{"feedback": "Correct and concise.", "score": 5}')
    return Reply("Correct and concise.\n[RESULT] 5")


@pytest.mark.parametrize(("index", "code"), snippets(), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_readme_snippet_runs(index: int, code: str, tmp_path: Path) -> None:
    script = tmp_path / f"snippet_{index}.py"
    script.write_text(code)
    with LoopbackServer(_verdict) as server:
        env = {**os.environ, "OPENAI_API_KEY": "sk-readme-test", "OPENAI_BASE_URL": server.url + "/v1"}
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
        calls = sum(server.calls.values())
    assert proc.returncode == 0, proc.stderr
    if "OpenAIBackend(" in code:
        assert calls >= 1
    if "print(verdict.status" in code:
        assert proc.stdout.strip() == "ok 5 Correct and concise."
