"""No public callable of the judges, backends or graphs takes or returns
``Any`` unless its docstring says why (a sentence starting "Any:").

Public means exported through a package's ``__all__``: a function, or a
class's public methods (``__init__`` and properties included, inherited ones
too where judgegraph defines them; pydantic's and LangChain's own methods are
theirs to type).
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Iterator

import pytest

# graphs.serve is what `langgraph dev` loads: its served judge is public too.
PACKAGES = ("judgegraph.judges", "judgegraph.backends", "judgegraph.graphs", "judgegraph.graphs.serve")


def _ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] in ("judgegraph", "graphs")


def _members(cls: type) -> Iterator[tuple[str, Callable[..., object]]]:
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not _ours(klass):
            continue
        for attr, raw in vars(klass).items():
            if attr in seen or (attr.startswith("_") and attr != "__init__"):
                continue
            seen.add(attr)
            f = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
            f = f.fget if isinstance(f, property) else f
            if inspect.isfunction(f):
                yield attr, f


def public_callables() -> dict[str, tuple[Callable[..., object], type | None]]:
    """Each public callable once, named by where it is defined."""
    found: dict[str, tuple[Callable[..., object], type | None]] = {}
    for pkg in PACKAGES:
        module = importlib.import_module(pkg)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                for _, f in _members(obj):
                    found.setdefault(f"{f.__module__}.{f.__qualname__}", (f, obj))
            elif inspect.isfunction(obj):
                found.setdefault(f"{obj.__module__}.{obj.__qualname__}", (obj, None))
    return found


def _late_names() -> dict[str, object]:
    # Names some modules import only for the type checker (heavy imports).
    from langchain_core.language_models import BaseChatModel

    return {"BaseChatModel": BaseChatModel}


def _hints(f: Callable[..., object]) -> dict[str, object]:
    try:
        return typing.get_type_hints(f)
    except NameError:
        return typing.get_type_hints(f, localns=_late_names())


def _has_any(tp: object) -> bool:
    if tp is typing.Any:
        return True
    if isinstance(tp, list | tuple):  # Callable's argument list
        return any(_has_any(a) for a in tp)
    return any(_has_any(a) for a in typing.get_args(tp))


def _says_why(f: Callable[..., object], owner: type | None) -> bool:
    docs = [inspect.getdoc(f) or ""]
    if f.__name__ == "__init__" and owner is not None:
        docs.append(inspect.getdoc(owner) or "")
    return any("Any:" in d for d in docs)


def untyped_callables() -> list[str]:
    return sorted(
        name
        for name, (f, owner) in public_callables().items()
        if any(_has_any(t) for t in _hints(f).values()) and not _says_why(f, owner)
    )


def test_the_walk_sees_the_public_api() -> None:
    names = public_callables()
    assert "judgegraph.judges._base.Judge.ajudge" in names
    assert "judgegraph.backends._identity.backend_identity" in names
    assert any(n.startswith("judgegraph.graphs.") for n in names)
    assert len(names) > 150


def test_any_is_only_where_a_docstring_says_why() -> None:
    bad = untyped_callables()
    assert not bad, "Any in a public signature with no 'Any:' sentence in its docstring:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("hint", "expect"),
    [
        (typing.Any, True),
        (dict[str, typing.Any] | None, True),
        (typing.Callable[[typing.Any], str], True),
        (dict[str, object], False),
        (list[int] | None, False),
    ],
)
def test_any_is_found_inside_a_hint(hint: object, expect: bool) -> None:
    assert _has_any(hint) is expect
