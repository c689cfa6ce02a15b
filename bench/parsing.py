"""Parsing time against output length: n against 4n, per adversarial shape.

Each shape is a judge output (or an evaluated text, for the neutraliser) of
about n characters built to trip a backtracking pattern: long runs of one
character, runs of markers, nested brackets, unclosed delimiters, huge
numbers, fenced JSON with a long whitespace run. For each, the CPU time of
one parse at n and at 4n (fastest of ``--reps``), and their ratio: about 4
is linear, 16 quadratic. Every shape must also come out as the expected
kind of result (a value, or a ParseError), which is checked here too.

    .venv/bin/python bench/parsing.py --n 250000 --write bench/results/parsing.md
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

from judgegraph._templates import DELIM_CLOSE, DELIM_OPEN, neutralize
from judgegraph.judges import ParseError, parse_output

# Halfway, on a log scale, between linear (4) and quadratic (16). On a loaded
# machine single shapes measured up to ~7 on one run and ~4 on the next.
RATIO_LIMIT = 8.0


def _shapes() -> dict[str, tuple[Callable[[int], str], str, bool]]:
    """name -> (output of about n chars, parser kind, structured)."""
    o, c = DELIM_OPEN, DELIM_CLOSE
    return {
        "fenced JSON, newline run (cut off)": (lambda n: "```json\n{" + "\n" * n, "score", True),
        "fenced JSON, space run then fence": (lambda n: "```json\n" + " " * n + "```", "score", True),
        "fenced JSON verdict after a blank run": (
            lambda n: "```json\n" + "\n" * n + '{"feedback": "ok", "score": 4}\n```',
            "score",
            True,
        ),
        "nested brackets": (lambda n: "[" * n, "score", True),
        "nested objects": (lambda n: '{"a":' * (n // 5), "score", True),
        "huge JSON integer": (lambda n: '{"score": ' + "9" * n + "}", "score", True),
        "marker then a space run": (lambda n: "[RESULT]" + " " * n + "x", "score", False),
        "marker then a newline run then a value": (lambda n: "[RESULT]" + "\n" * n + "4", "score", False),
        "open brackets": (lambda n: "[" * n, "score", False),
        "brackets and spaces": (lambda n: "[ " * (n // 2), "choice", False),
        "markers on one line": (lambda n: "[RESULT] " * (n // 9), "score", False),
        "verdict lines": (lambda n: "[RESULT] 4\n" * (n // 11), "score", False),
        "unclosed end delimiters": (lambda n: f"{o}begin response{c}" + f"{o}end " * (n // 5), "score", False),
        "begin delimiters": (lambda n: f"{o}begin response{c}" * (n // 17), "score", False),
        "huge number": (lambda n: "[RESULT] " + "9" * n, "score", False),
        "huge score pair": (lambda n: "[SCORES] " + "1" * (n // 2) + " " + "2" * (n // 2), "two_scores", False),
        "score pair separators": (lambda n: "[SCORES] " + "1," * (n // 2), "two_scores", False),
        "emphasis run": (lambda n: "[RESULT] " + "*" * n + "4", "score", False),
        "choice words and spaces": (lambda n: "[RESULT] response" + " " * n + "x", "choice", False),
        "zero-width spaces": (lambda n: "[RE" + "\u200b" * n + "SULT] 4", "score", False),
        "accented letters": (lambda n: "é" * n + "\n[RESULT] 4", "score", False),
        "one letter": (lambda n: "a" * n, "score", False),
    }


def _inputs() -> dict[str, Callable[[int], str]]:
    """Evaluated texts for the neutraliser."""
    return {
        "neutralise: markers": lambda n: "[RESULT]" * (n // 8),
        "neutralise: brackets and zero-width spaces": lambda n: "[\u200b" * (n // 2),
        "neutralise: open bracket then spaces": lambda n: "[" + " " * n,
        "neutralise: spaces then close bracket": lambda n: " " * n + "]",
    }


def _cpu(fn: Callable[[], object], reps: int) -> float:
    # The fastest of the repetitions: other work on the machine only ever adds time.
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def _parse(text: str, kind: str, structured: bool) -> str:
    try:
        value = parse_output(text, kind=kind, scale=(1, 5), structured=structured)  # type: ignore[arg-type]
    except ParseError as exc:
        return f"rejected: {exc.reason[:60]}"
    return f"value {value.value!r}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=250_000, help="the shorter length; the longer is 4n")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--write", type=Path, help="also write the table as markdown here")
    args = ap.parse_args()
    n = args.n
    rows: list[tuple[str, float, float, str]] = []
    for name, (make, kind, structured) in _shapes().items():
        small, large = make(n), make(4 * n)
        outcome = _parse(large, kind, structured)
        t1 = _cpu(lambda s=small, k=kind, st=structured: _parse(s, k, st), args.reps)  # type: ignore[misc]
        t4 = _cpu(lambda s=large, k=kind, st=structured: _parse(s, k, st), args.reps)  # type: ignore[misc]
        rows.append((name, t1, t4, outcome))
    for name, make_text in _inputs().items():
        small, large = make_text(n), make_text(4 * n)
        t1 = _cpu(lambda s=small: neutralize(s), args.reps)  # type: ignore[misc]
        t4 = _cpu(lambda s=large: neutralize(s), args.reps)  # type: ignore[misc]
        rows.append((name, t1, t4, "(input side)"))
    head = f"| shape | n = {n:,} | 4n | ratio | result at 4n |\n|---|---|---|---|---|\n"
    lines = []
    worst = 0.0
    for name, t1, t4, outcome in rows:
        # Below a millisecond the clock's resolution decides the ratio; report it, do not judge it.
        ratio = t4 / t1 if t1 >= 1e-3 else float("nan")
        if ratio == ratio:
            worst = max(worst, ratio)
        lines.append(f"| {name} | {t1 * 1e3:.1f} ms | {t4 * 1e3:.1f} ms | {ratio:.1f} | {outcome} |")
    table = head + "\n".join(lines) + "\n"
    verdict = "linear" if worst <= RATIO_LIMIT else "NOT linear"
    print(table)
    print(f"worst ratio {worst:.1f} (limit {RATIO_LIMIT}): {verdict}")
    if args.write:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(
            "# Parsing time against output length\n\n"
            f"`bench/parsing.py --n {n} --reps {args.reps}`, {time.strftime('%Y-%m-%d')}, "
            f"Python {platform.python_version()}. CPU time of one parse (fastest of {args.reps}) at n and 4n "
            f"characters, load average {load}; a ratio near 4 is linear, 16 quadratic "
            "(n/a: under 1 ms, below the clock's resolution).\n\n"
            + table
            + f"\nWorst ratio {worst:.1f}: **{verdict}** (limit {RATIO_LIMIT}).\n"
        )
    sys.exit(0 if worst <= RATIO_LIMIT else 1)


if __name__ == "__main__":
    main()
