"""Every test whose outcome could depend on speed carries the ``timing`` mark.

bench/stress_tests.py runs the marked tests on one busy core, so a test that
races something and is not marked is never stressed. This check keeps the
mark complete: a test that runs work beside itself (a background process,
thread or task), kills a process, sleeps, or sets a client timeout or a
reply delay must be marked, on itself, its class or its module.

A test reaches such a construct through its own body, a helper in its module
it calls, or a fixture of its module it asks for (followed to any depth).
Waiting for a subprocess to exit (``subprocess.run``) or for a loopback
server's reply is not on the list: a slow machine makes those slower, never
different (pytest-timeout catches a hang). A line that starts something the
test does not race (a server's own thread, say) says so on the line:
``# timing-lint: <reason>``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

TESTS = Path(__file__).resolve().parent
_OPT_OUT = "# timing-lint:"

# module.attr calls that start work beside the test, stop a process, or wait on a clock.
_CALLS = frozenset(
    {
        ("subprocess", "Popen"),
        ("os", "kill"),
        ("os", "killpg"),
        ("threading", "Thread"),
        ("threading", "Timer"),
        ("asyncio", "gather"),
        ("asyncio", "wait"),
        ("asyncio", "wait_for"),
        ("asyncio", "create_task"),
        ("asyncio", "sleep"),
        ("time", "sleep"),
        ("anyio", "create_task_group"),
        ("anyio", "sleep"),
        ("ray", "init"),
    }
)
_MODULES = frozenset({"multiprocessing"})  # any use: a process beside the test
# Keyword arguments that bound a call by time: a client timeout, a reply delay, a batching wait.
_KEYWORDS = frozenset({"timeout_s", "delay_s", "batch_wait_s", "hold_s"})


def _dotted(node: ast.AST) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return tuple(reversed(parts))


def _is_timing_mark(node: ast.AST) -> bool:
    return any(_dotted(sub)[-2:] == ("mark", "timing") for sub in ast.walk(node))


def _constructs(fn: ast.AST, lines: list[str]) -> list[str]:
    """What in ``fn``'s own body can make it depend on speed, as ``line: what``."""
    found: list[str] = []
    for node in ast.walk(fn):
        line = lines[node.lineno - 1] if hasattr(node, "lineno") else ""
        if _OPT_OUT in line:
            continue
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name[-2:] in _CALLS:
                found.append(f"{node.lineno}: {'.'.join(name)}()")
            for kw in node.keywords:
                if kw.arg in _KEYWORDS:
                    found.append(f"{node.lineno}: {kw.arg}=")
        if isinstance(node, ast.Name) and node.id in _MODULES:
            found.append(f"{node.lineno}: {node.id}")
        if isinstance(node, ast.Import | ast.ImportFrom):
            mods = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(m.split(".")[0] in _MODULES for m in mods):
                found.append(f"{node.lineno}: import {', '.join(mods)}")
    return found


def _names_used(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Module-level names ``fn`` may reach: the names it reads and its parameters (fixtures)."""
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    args = fn.args
    used |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    return used


def unmarked(source: str, filename: str = "<test>") -> list[str]:
    """Each unmarked test that reaches a speed-dependent construct, with what it reaches."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    module_marked = any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and _is_timing_mark(node.value)
        for node in tree.body
    )
    if module_marked:
        return []
    # Module-level functions (helpers and fixtures) by name, and each test with its class's marks.
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    tests: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defs[node.name] = node
            if node.name.startswith("test"):
                tests.append((node, any(_is_timing_mark(d) for d in node.decorator_list)))
        elif isinstance(node, ast.ClassDef):
            class_marked = any(_is_timing_mark(d) for d in node.decorator_list)
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and sub.name.startswith("test"):
                    tests.append((sub, class_marked or any(_is_timing_mark(d) for d in sub.decorator_list)))
    found: list[str] = []
    for test, marked in tests:
        if marked:
            continue
        seen: set[str] = set()
        todo: list[ast.FunctionDef | ast.AsyncFunctionDef] = [test]
        reached: list[str] = []
        while todo:
            fn = todo.pop()
            reached += [f"{fn.name} line {c}" for c in _constructs(fn, lines)]
            for name in _names_used(fn) - seen:
                seen.add(name)
                if name in defs and defs[name] is not test:
                    todo.append(defs[name])
        if reached:
            found.append(f"{filename}::{test.name} reaches {'; '.join(sorted(set(reached)))}")
    return found


def test_every_test_that_can_depend_on_speed_is_marked() -> None:
    found = [
        u for path in sorted(TESTS.rglob("test_*.py")) for u in unmarked(path.read_text(), str(path.relative_to(TESTS)))
    ]
    assert not found, "not marked `timing`, so bench/stress_tests.py never stresses them:\n" + "\n".join(found)


_HELPER = """
import subprocess, pytest

@pytest.fixture
def server():
    return start()

def start():
    return {construct}

def helper():
    return 1
"""


@pytest.mark.parametrize(
    "construct",
    [
        "subprocess.Popen(['x'])",
        "os.kill(pid, 9)",
        "threading.Thread(target=f).start()",
        "asyncio.gather(a(), b())",
        "asyncio.wait_for(ev.wait(), 5)",
        "time.sleep(0.01)",
        "multiprocessing.get_context('spawn').Process(target=f)",
        "Reply('x', delay_s=0.5)",
        "OpenAIBackend('m', timeout_s=0.3)",
        "ray.init(num_cpus=1)",
    ],
)
def test_the_check_follows_fixtures_and_helpers_to_a_construct(construct: str) -> None:
    by_fixture = _HELPER.format(construct=construct) + "\ndef test_a(server):\n    assert server\n"
    by_call = _HELPER.format(construct=construct) + "\ndef test_b():\n    assert start()\n"
    direct = f"def test_c():\n    {construct}\n"
    for code in (by_fixture, by_call, direct):
        assert unmarked(code), code
    # The same tests, marked on themselves, their class or their module, pass.
    assert not unmarked("import pytest\npytestmark = pytest.mark.timing\n" + by_fixture)
    assert not unmarked("import pytest\npytestmark = [pytest.mark.slow, pytest.mark.timing]\n" + by_call)
    assert not unmarked(direct.replace("def test_c", "@pytest.mark.timing\ndef test_c"))
    assert not unmarked(f"@pytest.mark.timing\nclass TestX:\n    def test_c(self):\n        {construct}\n")


@pytest.mark.parametrize(
    "code",
    [
        "def test_a():\n    assert subprocess.run(['x'], timeout=300).returncode == 0\n",
        "def test_a():\n    with LoopbackServer(handler) as s:\n        assert judge(s.url).score == 5\n",
        "def test_a():\n    threading.Thread(target=srv.serve_forever).start()  # timing-lint: the server's own loop\n",
        "def helper():\n    time.sleep(1)\n\ndef test_a():\n    assert 1\n",  # a helper nobody calls
    ],
)
def test_waiting_for_an_exit_or_a_reply_needs_no_mark(code: str) -> None:
    assert not unmarked(code), code


@given(
    depth=st.integers(min_value=0, max_value=5),
    construct=st.sampled_from(sorted(f"{m}.{a}()" for m, a in _CALLS)),
    as_fixture=st.booleans(),
)
def test_a_construct_any_number_of_helpers_deep_is_found(depth: int, construct: str, as_fixture: bool) -> None:
    # helper0 holds the construct, helper{i+1} calls helper{i}; the test reaches the top one.
    chain = [f"def helper0():\n    {construct}\n"]
    chain += [f"def helper{i + 1}():\n    return helper{i}()\n" for i in range(depth)]
    top = f"helper{depth}"
    test = f"def test_x({top}):\n    assert {top}\n" if as_fixture else f"def test_x():\n    assert {top}()\n"
    code = "\n".join([*chain, test])
    assert unmarked(code), code
    assert not unmarked(code.replace("def test_x", "@pytest.mark.timing\ndef test_x"))
