"""A sentence judge's labelled examples are read once, when the judge gets them,
not again for every item; ranking an item against them runs off the event loop;
and the indexed ranking (and the held-out check built on it) agrees with a
brute-force ranking over the public :func:`similarity`."""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import threading
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import ScriptedBackend
from judgegraph.backends import GenerateRequest
from judgegraph.judges import LabelledExample, _sentence, acheck_few_shot, create_judge, similarity

# Two scores of one example computed in two summation orders differ by a few
# ulps at most (terms are products of small weights, each under ~10); 1e-9
# is far above that and far below any gap that changes which example is closest.
TOL = 1e-9


def _examples(n: int) -> list[LabelledExample]:
    return [
        LabelledExample(
            instruction=f"question {i} about order {i % 7}",
            response=f"reply {i} says {'thanks' if i % 2 else 'go away'} number{i}",
            verdict="yes" if i % 2 else "no",
        )
        for i in range(n)
    ]


def _counting_bag(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], list[tuple[str, int]]]:
    """Wrap the tokenizer (the real one runs) to count which texts it reads and on which thread."""
    seen: Counter[str] = Counter()
    threads: list[tuple[str, int]] = []
    real: Callable[[str], Counter[str]] = _sentence._bag

    def bag(text: str) -> Counter[str]:
        seen[text] += 1
        threads.append((text, threading.get_ident()))
        return real(text)

    monkeypatch.setattr(_sentence, "_bag", bag)
    return seen, threads


async def test_examples_are_read_once_across_many_judgements(monkeypatch: pytest.MonkeyPatch) -> None:
    seen, threads = _counting_bag(monkeypatch)
    examples = _examples(40)
    judge = create_judge("Is the reply polite?", ScriptedBackend(lambda _: "[RESULT] yes"), examples=examples, k=3)
    items = [{"instruction": f"question {j}", "response": f"reply {j} thanks"} for j in range(12)]
    for item in items:
        await judge.ajudge(item)
    texts = {ex.instruction for ex in examples} | {ex.response for ex in examples}
    assert {t: seen[t] for t in texts} == dict.fromkeys(texts, 1)  # once each, not once per judgement
    loop_thread = threading.get_ident()
    item_texts = {it["response"] for it in items}
    on_loop = [t for t, tid in threads if t in item_texts and tid == loop_thread]
    assert [t for t, _ in threads if t in item_texts] and not on_loop  # ranked off the event loop


async def test_a_judge_with_other_examples_reads_only_those() -> None:
    judge = create_judge("Is the reply polite?", ScriptedBackend(lambda _: "[RESULT] yes"), examples=_examples(6))
    other = judge.with_examples(_examples(3))
    item = judge.input_model(instruction="question 1", response="reply 1 says thanks")
    assert {ex.response for ex in other.select_examples(item)} <= {ex.response for ex in _examples(3)}
    assert len(judge.select_examples(item)) == 4 and len(other.select_examples(item)) == 3


# ------------------------------------------------------------ against brute force

_WORDS = ["thanks", "go", "away", "order", "parcel", "the", "a", "yes", "no", "help", "!!", "Thanks"]
_text = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6).map(" ".join)
_example = st.builds(
    lambda q, r, v: LabelledExample(instruction=q, response=r, verdict=v), _text, _text, st.sampled_from(["yes", "no"])
)


def _brute_idf(texts: list[str]) -> dict[str, float]:
    # The documented weighting, restated: smoothed inverse document frequency over the examples.
    df: Counter[str] = Counter()
    for t in texts:
        df.update({w.casefold() for w in re.findall(r"\w+", t)})
    return {w: math.log((1 + len(texts)) / (1 + k)) + 1e-3 for w, k in df.items()}


def _brute_scores(examples: list[LabelledExample], instruction: str, response: str) -> list[float]:
    idf_q = _brute_idf([ex.instruction for ex in examples])
    idf_r = _brute_idf([ex.response for ex in examples])
    return [
        0.25 * similarity(instruction, ex.instruction, idf=idf_q) + 0.75 * similarity(response, ex.response, idf=idf_r)
        for ex in examples
    ]


@settings(max_examples=60, deadline=None)
@given(examples=st.lists(_example, min_size=1, max_size=12), q=_text, r=_text, k=st.integers(0, 5))
def test_selection_is_a_brute_force_top_k(examples: list[LabelledExample], q: str, r: str, k: int) -> None:
    judge = create_judge("Is it polite?", ScriptedBackend([]), examples=examples, k=k)
    chosen = judge.select_examples(judge.input_model(instruction=q, response=r))
    scores = _brute_scores(examples, q, r)
    assert len(chosen) == min(k, len(examples))
    picked = [next(i for i, ex in enumerate(examples) if ex is c) for c in chosen]
    assert len(set(picked)) == len(picked)
    ranked = [scores[i] for i in picked]
    assert all(a >= b - TOL for a, b in itertools.pairwise(ranked))  # most similar first
    left = [s for i, s in enumerate(scores) if i not in picked]
    assert not left or not ranked or min(ranked) >= max(left) - TOL  # nothing left out beats a chosen one


def _block(prompt: str, name: str) -> str:
    return prompt.split(f"⟦begin {name}⟧")[-1].split(f"⟦end {name}⟧")[0].strip()


def _first_shown(prompt: str) -> str | None:
    m = re.search(r"Verdict: (\w+)", prompt)
    return m.group(1) if m else None


@settings(max_examples=40, deadline=None)
@given(labelled=st.lists(_example, min_size=4, max_size=12), seed=st.integers(0, 5))
def test_held_out_check_matches_brute_force(labelled: list[LabelledExample], seed: int) -> None:
    if len({ex.verdict for ex in labelled}) < 2:
        labelled = [*labelled, LabelledExample(instruction="x", response="y", verdict="no")]
        labelled = [*labelled, LabelledExample(instruction="x", response="z", verdict="yes")]
    seen: list[tuple[str, str, str | None]] = []  # (request, answer, verdict of the first example shown)

    def model(req: GenerateRequest) -> str:
        prompt = req.messages[-1].content
        seen.append((_block(prompt, "instruction"), _block(prompt, "response"), _first_shown(prompt)))
        return f"[RESULT] {seen[-1][2] or 'yes'}"

    judge = create_judge("Is it polite?", ScriptedBackend(model), k=1)
    check = asyncio.run(acheck_few_shot(judge, labelled, held_out=0.5, seed=seed, max_concurrency=2))
    assert check.n_examples + check.n_held_out == len(labelled)
    without, with_ = seen[: check.n_held_out], seen[check.n_held_out :]
    assert all(first is None for *_, first in without) and all(first is not None for *_, first in with_)
    # Rebuild the split from what was judged: the pool is every labelled item not held out.
    pool = list(labelled)
    for q, r, _ in with_:
        pool.remove(next(ex for ex in pool if (ex.instruction, ex.response) == (q, r)))
    assert len(pool) == check.n_examples
    hits = 0
    for q, r, first in with_:
        scores = _brute_scores(pool, q, r)
        best = max(scores)
        assert first in {ex.verdict for ex, s in zip(pool, scores, strict=True) if s >= best - TOL}
        human = {ex.verdict for ex in labelled if (ex.instruction, ex.response) == (q, r)}
        hits += human == {first}
    if all(len({ex.verdict for ex in labelled if (ex.instruction, ex.response) == (q, r)}) == 1 for q, r, _ in with_):
        # Items with one human verdict: agreement is exactly the share whose closest example agrees.
        assert check.agreement_with == pytest.approx(hits / check.n_held_out, abs=TOL)
    assert check.failed_with == check.failed_without == 0


def test_the_examples_stay_part_of_the_judge_fingerprint() -> None:
    # The store and the call cache key verdicts by the judge's public settings: other
    # examples are another judge, whether given at construction, by with_examples or assigned.
    from judgegraph.judges import judge_fingerprint

    backend = ScriptedBackend([])
    a = create_judge("Is the reply polite?", backend, examples=_examples(3))
    b = a.with_examples(_examples(4))
    c = create_judge("Is the reply polite?", backend, examples=_examples(3))
    assert judge_fingerprint(a, backend) != judge_fingerprint(b, backend)
    assert judge_fingerprint(a, backend) == judge_fingerprint(c, backend)
    c.examples = tuple(_examples(4))
    assert judge_fingerprint(c, backend) == judge_fingerprint(b, backend)
    item = c.input_model(instruction="question 3", response="reply 3 says thanks number3")
    assert c.select_examples(item)[0] == _examples(4)[3]  # the assigned examples are the ones ranked
