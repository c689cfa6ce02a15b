"""The architecture is enforced, not described: import-linter's contracts in
pyproject.toml (layers, and private modules used only inside their package)
and strict mypy run over the package as it installs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _staged_tree import ROOT, repo_path, stage_package


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # The staged copy comes first on the path, ahead of the editable install.
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("importlinter")
    exe = Path(sys.executable).with_name("lint-imports")
    return _run([str(exe), str(ROOT / "pyproject.toml"), "--no-cache"], tree)


def test_import_contracts_hold(tmp_path: Path) -> None:
    result = _lint_imports(stage_package(tmp_path))
    assert result.returncode == 0, repo_path(result.stdout + result.stderr)
    assert "Contracts: 2 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "expect"),
    [
        # sideways: one wing reaching into another's private module
        ("flywheel/_scratch.py", "from judgegraph.jobs._store import Store\n", "judgegraph.jobs._store"),
        # upward: the judges layer importing a graph
        ("judges/_scratch.py", "import judgegraph.graphs\n", "judgegraph.graphs"),
        # the shared helpers import nothing from judgegraph
        ("_internal/_scratch.py", "import judgegraph.types\n", "judgegraph.types"),
    ],
)
def test_a_forbidden_import_fails_the_check_and_is_named(tmp_path: Path, module: str, line: str, expect: str) -> None:
    tree = stage_package(tmp_path)
    (tree / "judgegraph" / module).write_text(f'"""Scratch."""\n\n{line}')
    result = _lint_imports(tree)
    assert result.returncode != 0
    scratch = "judgegraph." + module.removesuffix(".py").replace("/", ".")
    assert scratch in result.stdout and expect in result.stdout, result.stdout


def test_mypy_strict_over_the_installed_layout(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    tree = stage_package(tmp_path)
    result = _run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "judgegraph"], tree)
    assert result.returncode == 0, repo_path(result.stdout + result.stderr)


def test_root_wings_import_from_a_source_checkout(tmp_path: Path) -> None:
    """Run from the repo root, Python finds the repo's judgegraph/ before any
    install; graphs/ and finetune/ must still import under it."""
    code = "import judgegraph.graphs, judgegraph.finetune; print(judgegraph.graphs.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -S: no site-packages, so no editable-install finder: only the checkout itself.
    result = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(ROOT)!r}] + {sys.path[1:]!r}; {code}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).resolve() == (ROOT / "graphs" / "__init__.py").resolve()


_CYCLES = """
import grimp
graph = grimp.build_graph("judgegraph")
found = sorted(
    (m, imp)
    for m in graph.modules
    for imp in graph.find_modules_directly_imported_by(m)
    if imp.startswith("judgegraph") and graph.chain_exists(importer=imp, imported=m)
)
print(len(graph.modules), found)
"""


def test_no_module_imports_its_way_back_to_itself(tmp_path: Path) -> None:
    """No import cycles anywhere in the installed layout (graphs/ and finetune/ included):
    a module that some import chain leads back to would fail here, named with its import."""
    pytest.importorskip("grimp")
    tree = stage_package(tmp_path)
    result = _run([sys.executable, "-c", _CYCLES], tree)
    assert result.returncode == 0, result.stderr
    modules, found = result.stdout.split(" ", 1)
    assert int(modules) > 150 and found.strip() == "[]", repo_path(result.stdout)
