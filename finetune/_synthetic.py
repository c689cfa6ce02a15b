"""A synthetic judging task that a tiny model can learn: for smoke tests and demos.

Each instruction asks for a short statement about a topic; every answer
ends with a verdict line. Pairwise: one answer says "Verdict: correct", the
other "Verdict: wrong"; the correct one wins. Pointwise: the answer's closing verdict word sets its score
(wrong 1, partly right 3, correct 5).
Nothing here resembles real judging quality; it only proves the training
path learns from data rendered with the real judge prompts.
"""

from __future__ import annotations

import random

from ._traces import PairwiseTrace, PointwiseTrace

__all__ = ["synthetic_traces"]

_TOPICS = (
    "rivers",
    "planets",
    "bridges",
    "violins",
    "glaciers",
    "volcanoes",
    "tides",
    "comets",
    "forests",
    "deserts",
    "islands",
    "bees",
    "owls",
    "whales",
    "clouds",
    "caves",
    "lakes",
    "storms",
    "maps",
    "clocks",
)
_FILLER = (
    "the",
    "a",
    "many",
    "some",
    "often",
    "usually",
    "near",
    "large",
    "small",
    "old",
    "new",
    "bright",
    "quiet",
    "fast",
    "slow",
    "deep",
    "high",
    "cold",
    "warm",
    "green",
)


_VERDICTS = {1: "wrong", 3: "partly right", 5: "correct"}


def _claim(rng: random.Random, topic: str, verdict: str) -> str:
    words = " ".join(rng.choice(_FILLER) for _ in range(rng.randint(3, 6)))
    return f"{words} {topic}.\nVerdict: {verdict}."


def synthetic_traces(
    n: int, *, kind: str = "pairwise", instructions: int = 40, seed: int = 0
) -> list[PairwiseTrace | PointwiseTrace]:
    """``n`` labelled traces over ``instructions`` distinct instructions.

    ``kind="pairwise"``: two answers, exactly one right, no ties.
    ``kind="pointwise"``: one answer scored 1, 3 or 5 on a 1-5 scale.
    """
    if kind not in ("pairwise", "pointwise"):
        raise ValueError(f"kind must be 'pairwise' or 'pointwise', got {kind!r}")
    rng = random.Random(seed)
    prompts = [f"Tell me one fact about {rng.choice(_TOPICS)} (item {i})." for i in range(instructions)]
    out: list[PairwiseTrace | PointwiseTrace] = []
    for i in range(n):
        instruction = prompts[i % instructions]
        topic = instruction.split("about ", 1)[1].split(" ", 1)[0]
        if kind == "pairwise":
            good, bad = _claim(rng, topic, "correct"), _claim(rng, topic, "wrong")
            a_wins = rng.random() < 0.5
            out.append(
                PairwiseTrace(
                    id=f"syn-{i}",
                    instruction=instruction,
                    response_a=good if a_wins else bad,
                    response_b=bad if a_wins else good,
                    winner="A" if a_wins else "B",
                    source="synthetic",
                )
            )
        else:
            score = rng.choice(list(_VERDICTS))
            out.append(
                PointwiseTrace(
                    id=f"syn-{i}",
                    instruction=instruction,
                    response=_claim(rng, topic, _VERDICTS[score]),
                    score=score,
                    scale=(1, 5),
                    source="synthetic",
                )
            )
    return out
