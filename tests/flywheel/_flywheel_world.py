"""The synthetic world the flywheel tests run in (the longer answer wins; the
teacher replays the true labels), the shared settings, and small helpers to open
a flywheel folder and read a round's decisions."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from judgegraph.finetune._traces import PairwiseTrace
from judgegraph.flywheel import Flywheel, FlywheelItem, FlywheelSettings, ItemDecision, ProbeTrainer
from judgegraph.judges import ReplayJudge, item_key
from judgegraph.types import PairwiseInput, PairwiseVerdict, Status, Winner

WORDS = "alpha beta gamma delta the answer is good bad fine ok".split()
COST = 0.001


def _pair(rng: random.Random, instruction: str, *, shorter_wins: bool = False) -> tuple[PairwiseInput, Winner]:
    short = rng.randint(2, 10)
    long = short + rng.randint(6, 20)
    a_long = rng.random() < 0.5
    la, lb = (long, short) if a_long else (short, long)
    a = " ".join(rng.choice(WORDS) for _ in range(la))
    b = " ".join(rng.choice(WORDS) for _ in range(lb))
    winner: Winner = "A" if a_long != shorter_wins else "B"
    return PairwiseInput(instruction=instruction, response_a=a, response_b=b), winner


class World:
    """Synthetic items with true labels; held-out prompts never appear in the stream."""

    def __init__(self, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.heldout_pairs = [_pair(rng, f"held-out prompt {i}") for i in range(60)]
        self.stream = [_pair(rng, f"stream prompt {i}") for i in range(240)]
        self.drifted = [_pair(rng, f"new kind of prompt {i}", shorter_wins=True) for i in range(150)]
        table = {item_key(x): PairwiseVerdict(status=Status.OK, winner=w) for x, w in self.everything()}
        self.truth = {item_key(x): w for x, w in self.everything()}
        self.teacher = ReplayJudge(table, name="teacher", cost_usd=COST)

    def everything(self) -> list[tuple[PairwiseInput, Winner]]:
        return self.heldout_pairs + self.stream + self.drifted

    @property
    def heldout(self) -> list[PairwiseTrace]:
        return [
            PairwiseTrace(
                instruction=x.instruction, response_a=x.response_a, response_b=x.response_b, winner=w, source="human"
            )
            for x, w in self.heldout_pairs
        ]

    @staticmethod
    def batch(pairs: list[tuple[PairwiseInput, Winner]]) -> list[FlywheelItem]:
        return [FlywheelItem(input=x, id=f"item-{i}") for i, (x, _) in enumerate(pairs)]


SETTINGS = FlywheelSettings(alpha=0.2, delta=0.1, audit_rate=0.25, chunk_size=16)


def _flywheel(path: Path, world: World, trainer: ProbeTrainer, **kw: Any) -> Flywheel:
    settings = kw.pop("settings", SETTINGS)
    teacher = kw.pop("teacher", world.teacher)
    return Flywheel(path, heldout=world.heldout, teacher=teacher, trainer=trainer, settings=settings, **kw)


def _decisions(fw: Flywheel, n: int) -> list[ItemDecision]:
    path = fw.round_dir(n) / "decisions.jsonl"
    return [ItemDecision.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
