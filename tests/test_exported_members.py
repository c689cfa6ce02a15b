"""Each package's ``__all__`` is exactly what it exports, after httpx's
``test_exported_members``: every listed name exists, and every public name
the package binds from inside judgegraph (its own modules, or another
package's) is listed. Names imported from elsewhere (``typing``) and
submodules are not exports. The top level stays a small face."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import judgegraph

PACKAGES = sorted(
    {"judgegraph"}
    | {f"judgegraph.{m.name}" for m in pkgutil.iter_modules(judgegraph.__path__) if m.ispkg}
    | {"judgegraph.graphs", "judgegraph.finetune"}  # the root wings, mounted under judgegraph
)


def _bound_from_inside(module: ModuleType) -> set[str]:
    """Names the package's ``__init__`` binds that come from judgegraph itself:
    relative or ``judgegraph.*`` imports, and its own defs, classes and assignments
    (under ``if TYPE_CHECKING:`` too: lazy exports count)."""
    tree = ast.parse(Path(str(module.__file__)).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level > 0 or (node.module or "").split(".")[0] == "judgegraph":
                names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node in tree.body:
            names.add(node.name)
        elif isinstance(node, ast.Assign) and node in tree.body:
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and node in tree.body and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    # Bound, that is: an import in a branch that only raises binds nothing.
    public = {n for n in names if not n.startswith("_") and hasattr(module, n)}
    return {n for n in public if not isinstance(getattr(module, n), ModuleType)}


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_exactly_what_the_package_exports(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    for member in exported:
        obj = getattr(module, member)  # lazy names resolve too
        assert not isinstance(obj, ModuleType), f"{name}.{member} is a module, not an export"
        if isinstance(obj, type) or inspect.isfunction(obj):  # aliases and constants carry no origin
            assert obj.__module__.startswith("judgegraph"), f"{name}.{member} comes from {obj.__module__}"
    assert set(exported) == _bound_from_inside(module)


def test_the_top_level_is_a_small_face() -> None:
    assert len(judgegraph.__all__) <= 30
    # A first program's names are there; the wings' stay in their packages.
    assert {"PointwiseJudge", "PairwiseJudge", "create_judge_node", "from_context", "resolve_model"} <= set(
        judgegraph.__all__
    )
    for wing_name in ("CascadeJudge", "calibrate_threshold", "arun_job", "cohen_kappa", "get_template"):
        assert not hasattr(judgegraph, wing_name), wing_name


def test_deprecated_aliases_are_gone() -> None:
    import judgegraph.jobs
    import judgegraph.judges

    for module, old in ((judgegraph, "BaseJudge"), (judgegraph.judges, "BaseJudge")):
        assert not hasattr(module, old)
    for old in ("run_job", "run_spec"):
        assert not hasattr(judgegraph.jobs, old)
