"""The one-writer run lock belongs to the store file, however it is reached,
and its refusal always names the holder; a fresh store opened by several
processes at once is set up by all of them (issue 26).

Real files, real ``flock`` and real SQLite; the paths are generated: a
symlink to the file, to its folder, chains of them, relative paths with
``.`` and ``..``, doubled slashes.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph.jobs import Store
from judgegraph.jobs._store_guard import RunLock, RunLockedError

# Timing-sensitive (processes race for the lock and the set-up): bench/stress_tests.py runs it on a busy core.
pytestmark = pytest.mark.timing

_STEPS = ["link-file", "link-folder", "dot", "dotdot", "double-slash", "relative"]


def _from_cwd(path: str) -> str:
    """``path`` as the kernel reads it from here, without folding ``..``: a
    symlink's relative target is read from the link's folder, not from the
    working directory, so a relative spelling must not become a target."""
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _reach(store: Path, steps: list[str], root: Path) -> str:
    """Another way to spell ``store``: each step rewrites the path so far."""
    path = str(store)
    for n, step in enumerate(steps):
        here = Path(path)
        if step == "link-file":
            link = root / f"l{n}.db"
            link.symlink_to(_from_cwd(path))
            path = str(link)
        elif step == "link-folder":
            folder = root / f"d{n}"
            folder.symlink_to(_from_cwd(str(here.parent)), target_is_directory=True)
            path = str(folder / here.name)
        elif step == "dot":
            path = str(here.parent) + "/./" + here.name
        elif step == "dotdot":  # through a real subfolder and back (.. after a symlink leaves it)
            (here.parent / f"sub{n}").mkdir(exist_ok=True)
            path = f"{here.parent}/sub{n}/../{here.name}"
        elif step == "double-slash":
            path = str(here.parent) + "//" + here.name
        else:
            path = os.path.relpath(path)
    return path


@given(st.lists(st.sampled_from(_STEPS), min_size=1, max_size=4))
@settings(max_examples=40)
def test_the_run_lock_belongs_to_the_file_however_it_is_reached(steps: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        store = root / "data" / "s.db"
        first = Store(store)
        try:
            first.open_run("r", config_hash="h", kind="pointwise", spec={})
            second = Store(Path(_reach(store, steps, root)))
            try:
                with pytest.raises(RunLockedError, match="being written by pid"):
                    second.open_run("r", config_hash="h", kind="pointwise", spec={})
                second.open_run("other", config_hash="h", kind="pointwise", spec={})  # another run is free
            finally:
                second.close()
        finally:
            first.close()


def _opened(path: Path) -> int:
    """How many descriptors of this process have ``path`` open."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd) == str(path)
        except OSError:
            pass
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the refused side open the lock")
def test_a_process_refused_before_the_holder_wrote_its_note_still_names_it(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    store.touch()
    lock = RunLock(store, "r")
    lock.path.parent.mkdir(parents=True)
    # The holder, caught between taking the lock and writing who it is.
    holder = open(lock.path, "a+", encoding="utf-8")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    refused: list[BaseException] = []

    def contend() -> None:
        try:
            RunLock(store, "r").acquire()
        except RunLockedError as exc:
            refused.append(exc)

    thread = threading.Thread(target=contend)
    thread.start()
    while _opened(lock.path) < 2 and thread.is_alive():  # the contender has the lock file open
        pass
    os.pwrite(holder.fileno(), b"pid 4242 on testhost\n", 0)
    thread.join()
    holder.close()
    assert refused and "being written by pid 4242 on testhost" in str(refused[0]), refused


def _open_fresh(path: str, start: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue[str]) -> None:
    start.wait()
    try:
        Store(Path(path)).close()
        out.put("ok")
    except Exception as exc:  # the test reports what failed
        out.put(repr(exc))


def test_processes_opening_a_fresh_store_at_once_all_set_it_up(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    outcomes: list[str] = []
    for trial in range(25):  # the schema race is rare per trial; many trials make it show
        path = str(tmp_path / f"s{trial}.db")
        start = ctx.Barrier(5)
        out: multiprocessing.Queue[str] = ctx.Queue()
        procs = [ctx.Process(target=_open_fresh, args=(path, start, out)) for _ in range(5)]
        for p in procs:
            p.start()
        outcomes += [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join()
    assert set(outcomes) == {"ok"}, [o for o in outcomes if o != "ok"][:3]
