"""The quickstart's data: the bundled PandaLM test set and an instruction-grouped split.

PandaLM's 999 pairs share only 170 prompts (instruction plus input); one prompt
comes with up to ten model pairs, so the same answers recur across items. A
split by item would put near-copies of held-out items into training. The split
here is by prompt: every item of a prompt lands on the same side.

54 items have an empty response. A pairwise judge input must have text on both
sides, so those items cannot be judged by any judge here; they are left out of
both sides of the split, and ``QuickstartSplit.dropped_empty`` counts them.

Some items are the same comparison twice (two models gave the same answers
to the same prompt): 57 groups, 131 items. A content-keyed store or replay
sees each such group as one item, and gpt-3.5-turbo's recorded verdicts
differ between copies in 4 groups. ``dedupe=True`` keeps the first copy
(lowest ``idx``) of each and counts the rest in ``dropped_duplicates``; it
does not change which prompts land on which side.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judgegraph.datasets import PandaLMItem, load_pandalm

__all__ = [
    "PANDALM_ITEMS",
    "PandaLMFolds",
    "QuickstartSplit",
    "bundled_pandalm",
    "fold_pandalm_by_prompt",
    "load_bundled_pandalm",
    "split_pandalm_by_prompt",
]

#: Items in the bundled copy (all of PandaLM's test set).
PANDALM_ITEMS = 999


def bundled_pandalm() -> AbstractContextManager[Path]:
    """A context manager giving the folder of the bundled PandaLM copy as a real path.

    >>> with bundled_pandalm() as folder:
    ...     items = load_pandalm(folder)
    """
    return resources.as_file(resources.files("judgegraph").joinpath("data", "pandalm"))


def load_bundled_pandalm() -> list[PandaLMItem]:
    """The 999 PandaLM test items from the copy shipped inside the package."""
    with bundled_pandalm() as folder:
        return load_pandalm(folder)


def _group_key(item: PandaLMItem) -> str:
    return item.prompt


class QuickstartSplit(BaseModel):
    """Train and held-out items, disjoint by prompt, with how they were drawn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    heldout_fraction: float = Field(gt=0, lt=1)
    train: list[PandaLMItem]
    heldout: list[PandaLMItem]
    train_prompts: int
    heldout_prompts: int
    dropped_empty: int = Field(ge=0, description="items left out because a response is empty")
    dropped_duplicates: int = Field(default=0, ge=0, description="repeated identical comparisons left out")
    limited_to: int | None = Field(default=None, description="items kept by a reduced run, before the split")

    @model_validator(mode="after")
    def _disjoint(self) -> QuickstartSplit:
        train = {_group_key(i) for i in self.train}
        held = {_group_key(i) for i in self.heldout}
        if train & held:
            raise ValueError("a prompt appears on both sides of the split")
        if not self.train or not self.heldout:
            raise ValueError("both sides of the split need items")
        return self

    def describe(self) -> str:
        """One line stating the split, for tables and reports."""
        dupes = f" and {self.dropped_duplicates} repeated identical comparisons" if self.dropped_duplicates else ""
        limited = f", reduced run of {self.limited_to} items" if self.limited_to is not None else ""
        return (
            f"PandaLM test set split by prompt (seed {self.seed}): train {len(self.train)} items / "
            f"{self.train_prompts} prompts, held-out {len(self.heldout)} items / {self.heldout_prompts} prompts; "
            f"{self.dropped_empty} items with an empty response{dupes} left out{limited}"
        )


def split_pandalm_by_prompt(
    items: Sequence[PandaLMItem],
    *,
    heldout_fraction: float = 0.3,
    seed: int = 0,
    limit: int | None = None,
    dedupe: bool = False,
    min_prompts: int = 2,
) -> QuickstartSplit:
    """Split ``items`` into train and held-out by prompt (instruction plus input).

    ``heldout_fraction`` is the share of prompts held out (rounded, at least
    one on each side). ``limit`` keeps whole prompts, drawn in a seeded order,
    until about ``limit`` items are kept (never fewer than ``limit`` unless the
    data runs out), and at least ``min_prompts`` prompts (a caller that
    splits the train side again needs three); it is for reduced runs and
    tests. Items with an empty
    response are dropped first and counted; with ``dedupe``, so are repeated
    identical comparisons (same prompt, same two responses in the same order).
    """
    if not 0 < heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    kept = _kept(items, seed=seed, limit=limit, dedupe=dedupe, min_prompts=min_prompts)
    usable, keys, dropped, duplicates = kept.items, kept.keys, kept.dropped_empty, kept.dropped_duplicates
    if len(keys) < 2:
        raise ValueError(f"need at least two prompts to split, got {len(keys)}")

    n_held = min(max(1, round(len(keys) * heldout_fraction)), len(keys) - 1)
    held_keys = set(keys[:n_held])
    train_keys = set(keys[n_held:])
    train = [i for i in usable if _group_key(i) in train_keys]
    heldout = [i for i in usable if _group_key(i) in held_keys]
    return QuickstartSplit(
        seed=seed,
        heldout_fraction=heldout_fraction,
        train=train,
        heldout=heldout,
        train_prompts=len(keys) - n_held,
        heldout_prompts=n_held,
        dropped_empty=dropped,
        dropped_duplicates=duplicates,
        limited_to=limit,
    )


@dataclass(frozen=True)
class _Kept:
    items: list[PandaLMItem]
    keys: list[str]  # the kept prompts, in the seeded order
    dropped_empty: int
    dropped_duplicates: int


def _kept(items: Sequence[PandaLMItem], *, seed: int, limit: int | None, dedupe: bool, min_prompts: int) -> _Kept:
    """The judgeable items (and their prompts, seeded order): empty responses
    dropped, repeated comparisons too with ``dedupe``, whole prompts up to ``limit``."""
    if limit is not None and limit < 2:
        raise ValueError(f"limit must be at least 2 items, got {limit}")
    usable = [i for i in items if not i.has_empty_response]
    dropped = len(items) - len(usable)
    duplicates = 0
    if dedupe:
        seen: set[tuple[str, str, str]] = set()
        unique: list[PandaLMItem] = []
        for item in sorted(usable, key=lambda i: i.idx):
            content = (item.prompt, item.response1, item.response2)
            if content in seen:
                duplicates += 1
                continue
            seen.add(content)
            unique.append(item)
        usable = unique

    groups: dict[str, list[PandaLMItem]] = {}
    for item in usable:
        groups.setdefault(_group_key(item), []).append(item)
    keys = sorted(groups)
    rng = random.Random(seed)
    rng.shuffle(keys)

    if limit is not None:
        kept: list[str] = []
        total = 0
        for key in keys:
            if total >= limit and len(kept) >= min_prompts:
                break
            kept.append(key)
            total += len(groups[key])
        keys = kept
    chosen = set(keys)
    return _Kept(
        items=[i for i in usable if _group_key(i) in chosen],
        keys=keys,
        dropped_empty=dropped,
        dropped_duplicates=duplicates,
    )


class PandaLMFolds(BaseModel):
    """Every judgeable item, dealt into folds by prompt: each item is judged by
    a judge fitted, and with a budget picked, on the other folds only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    folds: int = Field(ge=2)
    items: list[PandaLMItem]
    fold_of: dict[str, int] = Field(description="prompt -> fold (0-based)")
    dropped_empty: int = Field(ge=0, description="items left out because a response is empty")
    dropped_duplicates: int = Field(ge=0, description="repeated identical comparisons left out")
    limited_to: int | None = Field(default=None, description="items kept by a reduced run, before the folds")

    def fold(self, k: int) -> list[PandaLMItem]:
        """The items of fold ``k``."""
        return [i for i in self.items if self.fold_of[_group_key(i)] == k]

    def describe(self) -> str:
        """One line stating the folds, for tables and reports."""
        dupes = f" and {self.dropped_duplicates} repeated identical comparisons" if self.dropped_duplicates else ""
        limited = f", reduced run of {self.limited_to} items" if self.limited_to is not None else ""
        sizes = ", ".join(str(len(self.fold(k))) for k in range(self.folds))
        return (
            f"PandaLM test set, {len(self.items)} items on {len(self.fold_of)} prompts, dealt by prompt into "
            f"{self.folds} folds (seed {self.seed}; {sizes} items); {self.dropped_empty} items with an empty "
            f"response{dupes} left out{limited}"
        )


def fold_pandalm_by_prompt(
    items: Sequence[PandaLMItem],
    *,
    folds: int = 5,
    seed: int = 0,
    limit: int | None = None,
    dedupe: bool = True,
) -> PandaLMFolds:
    """Deal the judgeable items into ``folds`` folds by prompt (every item of a
    prompt in one fold). ``limit``, ``dedupe`` and the dropped items as for
    :func:`split_pandalm_by_prompt`."""
    from judgegraph.finetune import assign_folds

    kept = _kept(items, seed=seed, limit=limit, dedupe=dedupe, min_prompts=folds)
    return PandaLMFolds(
        seed=seed,
        folds=folds,
        items=kept.items,
        fold_of=assign_folds(kept.keys, folds=folds, seed=seed),
        dropped_empty=kept.dropped_empty,
        dropped_duplicates=kept.dropped_duplicates,
        limited_to=limit,
    )
