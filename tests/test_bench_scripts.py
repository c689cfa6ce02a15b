"""Every bench script still imports: a test module it borrows from can move
(bench/soak.py broke when the tests moved into folders) and nothing else
would notice until someone ran it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"

# One fresh interpreter for all of them: a script's own sys.path changes stay in it.
_IMPORT_ALL = """
import importlib.util, sys, traceback
failed = []
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        failed.append(path + ": " + traceback.format_exc(limit=2).strip().splitlines()[-1])
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_bench_script_imports() -> None:
    scripts = sorted(str(p) for p in BENCH.glob("*.py"))
    assert any(s.endswith("soak.py") for s in scripts)
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL, *scripts], capture_output=True, text=True, cwd=BENCH)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
