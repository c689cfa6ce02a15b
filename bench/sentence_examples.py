"""A sentence judge's example ranking: per-item cost at n and 4n labelled examples.

For each size, the CPU time of choosing the ``k`` most similar examples for one
item (median of ``--items`` items), two ways: the judge's index, built once when
it gets the examples, and the brute force it replaced (IDF and every example's
word vector recomputed for each item). Printed as times and as ratios: the
brute force over the index at each size, and each way's 4n over n (about 4 is
linear in the examples). The index's build time, paid once, is shown apart.

    .venv/bin/python bench/sentence_examples.py --n 2000
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections import Counter

from judgegraph import ScriptedBackend
from judgegraph.judges import LabelledExample, create_judge, similarity

_WORDS = [f"w{i}" for i in range(3000)] + ["the", "a", "thanks", "order", "parcel", "please", "sorry", "no"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _examples(n: int, seed: int) -> list[LabelledExample]:
    rng = random.Random(seed)
    return [
        LabelledExample(instruction=_text(rng, 8), response=_text(rng, 20), verdict=rng.choice(["yes", "no"]))
        for _ in range(n)
    ]


def _brute(examples: list[LabelledExample], instruction: str, response: str, k: int) -> list[LabelledExample]:
    def idf(texts: list[str]) -> dict[str, float]:
        df: Counter[str] = Counter()
        for t in texts:
            df.update({w.casefold() for w in t.split()})
        return {w: math.log((1 + len(texts)) / (1 + c)) + 1e-3 for w, c in df.items()}

    idf_q, idf_r = idf([e.instruction for e in examples]), idf([e.response for e in examples])
    scores = [
        0.25 * similarity(instruction, e.instruction, idf=idf_q) + 0.75 * similarity(response, e.response, idf=idf_r)
        for e in examples
    ]
    order = sorted(range(len(examples)), key=lambda i: (-scores[i], i))
    return [examples[i] for i in order[:k]]


def _measure(n: int, items: int, seed: int) -> tuple[float, float, float]:
    examples = _examples(n, seed)
    started = time.process_time()
    judge = create_judge("Is the reply polite?", ScriptedBackend([]), examples=examples, k=4)
    build = time.process_time() - started
    rng = random.Random(seed + 1)
    fast: list[float] = []
    slow: list[float] = []
    for _ in range(items):
        item = judge.input_model(instruction=_text(rng, 8), response=_text(rng, 20))
        t0 = time.process_time()
        judge.select_examples(item)
        t1 = time.process_time()
        _brute(examples, item.instruction, item.response, 4)
        t2 = time.process_time()
        fast.append(t1 - t0)
        slow.append(t2 - t1)
    return build, statistics.median(fast), statistics.median(slow)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="examples at the smaller size (the larger is 4n)")
    ap.add_argument("--items", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rows = {n: _measure(n, a.items, a.seed) for n in (a.n, 4 * a.n)}
    print("| examples | index build (once) | per item, index | per item, brute force | brute / index |")
    print("|---:|---:|---:|---:|---:|")
    for n, (build, fast, slow) in rows.items():
        print(f"| {n:,} | {build * 1e3:.0f} ms | {fast * 1e3:.2f} ms | {slow * 1e3:.1f} ms | {slow / fast:.0f}x |")
    (_, f1, s1), (_, f4, s4) = rows[a.n], rows[4 * a.n]
    print(f"\n4n / n per item: index {f4 / f1:.1f}, brute force {s4 / s1:.1f} (4 is linear in the examples)")


if __name__ == "__main__":
    main()
