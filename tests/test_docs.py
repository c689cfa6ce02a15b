"""The docs site builds with ``mkdocs build --strict`` and every Python block
in docs/ runs, as the README's do (tests/_snippets.py: each block is a script,
with OPENAI_BASE_URL pointing at a loopback server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _snippets import ROOT, blocks, run_block

DOCS = ROOT / "docs"


def _cases() -> list[tuple[str, int, str]]:
    return [(str(page.relative_to(DOCS)), i, code) for page in sorted(DOCS.rglob("*.md")) for i, code in blocks(page)]


def test_docs_have_runnable_blocks() -> None:
    assert len(_cases()) >= 15


@pytest.mark.parametrize(
    ("page", "index", "code"),
    _cases(),
    ids=lambda v: v if isinstance(v, str) and v.endswith(".md") else str(v) if isinstance(v, int) else "",
)
def test_docs_block_runs(page: str, index: int, code: str, tmp_path: Path) -> None:
    proc, calls = run_block(code, tmp_path, f"{Path(page).stem}_{index}")
    assert proc.returncode == 0, f"{page} block {index}:\n{proc.stderr}"
    if ("openai:" in code or "OpenAIBackend(" in code) and "LoopbackServer(" not in code:  # its own server
        assert calls >= 1, f"{page} block {index} never reached the model server"


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.rglob("*.md"):
        assert str(page.relative_to(DOCS)) in nav, f"{page} is not in mkdocs.yml's nav"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("material")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert "PointwiseJudge" in home
    api = (tmp_path / "site" / "reference" / "judgegraph" / "index.html").read_text()
    assert "create_judge_node" in api and "resolve_model" in api
