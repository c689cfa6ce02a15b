"""The docs site builds with ``mkdocs build --strict`` and every Python block
in docs/ runs, as the README's do (tests/_snippets.py: each block is a script,
with OPENAI_BASE_URL pointing at a loopback server)."""

from __future__ import annotations

import os
import re
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


def test_python_is_fenced_as_python() -> None:
    """A block fenced ```py or ```python3 would escape the runner: only ```python counts."""
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        odd = re.findall(r"^\s*```(py|python3|pycon|ipython)\s*$", page.read_text(), re.M)
        assert not odd, f"{page}: fence python blocks as ```python"


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.rglob("*.md"):
        assert str(page.relative_to(DOCS)) in nav, f"{page} is not in mkdocs.yml's nav"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as CI builds it: strict, so any warning fails."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("material")
    out = tmp_path_factory.mktemp("docs") / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_mkdocs_build_strict(site: Path) -> None:
    assert "PointwiseJudge" in (site / "index.html").read_text()
    api = (site / "reference" / "judgegraph.html").read_text()
    assert "create_judge_node" in api and "resolve_model" in api
    for guide in ("judges", "backends", "graphs", "agents", "pytest", "langsmith", "cascades", "jobs", "reliability"):
        assert (site / "guides" / f"{guide}.html").exists(), guide


CHROMIUM = Path("/usr/bin/chromium")


def test_site_renders_in_a_browser(site: Path, tmp_path: Path) -> None:
    """Headless Chromium loads the home page and an API page from file://; the
    theme's navigation and the rendered signatures are in the live DOM."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    flags.append("--virtual-time-budget=5000")
    for page, expected in (("index.html", "Backends and models"), ("reference/judgegraph.html", "PointwiseJudge")):
        dom = subprocess.run(
            [str(CHROMIUM), *flags, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", (site / page).as_uri()],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert 'class="md-nav' in dom.stdout and expected in dom.stdout, page
