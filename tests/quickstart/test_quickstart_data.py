"""The bundled PandaLM copy and the quickstart's prompt-grouped split."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph.datasets import load_pandalm
from judgegraph.quickstart import (
    PANDALM_ITEMS,
    bundled_pandalm,
    fold_pandalm_by_prompt,
    load_bundled_pandalm,
    split_pandalm_by_prompt,
)

ROOT = Path(__file__).resolve().parents[2]


def test_bundled_copy_is_the_published_test_set(shared_data: Path) -> None:
    bundled = load_bundled_pandalm()
    original = load_pandalm(shared_data / "pandalm")
    assert len(bundled) == len(original) == PANDALM_ITEMS
    # Everything the loader reads is kept, except PandaLM-7B's free-text reasons.
    for ours, theirs in zip(bundled, original, strict=True):
        assert ours.model_dump(exclude={"pandalm7b_reason"}) == theirs.model_dump(exclude={"pandalm7b_reason"})
        assert ours.pandalm7b_reason is None
    with bundled_pandalm() as folder:
        assert (folder / "LICENSE").read_bytes() == (shared_data / "pandalm" / "LICENSE").read_bytes()
        notice = (folder / "NOTICE").read_text(encoding="utf-8")
    manifest = (shared_data / "pandalm" / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]
    for line in manifest:
        _repo, commit, path, blob, _size = line.split("\t")
        assert commit in notice and path in notice and blob in notice


def test_bundled_copy_ships_license_and_notice() -> None:
    with bundled_pandalm() as folder:
        assert "Apache License" in (folder / "LICENSE").read_text(encoding="utf-8")
        notice = (folder / "NOTICE").read_text(encoding="utf-8")
    assert "WeOpenML/PandaLM" in notice and "3871806e72b4832f815ecafd24d3503c73403f48" in notice
    assert "gpt_reference" in notice  # says what was trimmed


def test_split_keeps_every_prompt_on_one_side() -> None:
    items = load_bundled_pandalm()
    split = split_pandalm_by_prompt(items, heldout_fraction=0.3, seed=0)
    train = {i.prompt for i in split.train}
    held = {i.prompt for i in split.heldout}
    assert not train & held
    assert (len(train), len(held)) == (split.train_prompts, split.heldout_prompts)
    # Items with an empty response cannot be judged: left out and counted.
    assert split.dropped_empty == sum(i.has_empty_response for i in items) == 54
    assert len(split.train) + len(split.heldout) == PANDALM_ITEMS - 54
    assert not any(i.has_empty_response for i in [*split.train, *split.heldout])
    assert abs(split.heldout_prompts / (split.train_prompts + split.heldout_prompts) - 0.3) < 0.01


def test_split_is_seeded() -> None:
    items = load_bundled_pandalm()
    a = split_pandalm_by_prompt(items, seed=3)
    b = split_pandalm_by_prompt(items, seed=3)
    c = split_pandalm_by_prompt(items, seed=4)
    assert [i.idx for i in a.heldout] == [i.idx for i in b.heldout]
    assert {i.prompt for i in a.heldout} != {i.prompt for i in c.heldout}


def test_dedupe_drops_repeated_comparisons_but_not_prompts() -> None:
    items = load_bundled_pandalm()
    plain = split_pandalm_by_prompt(items, seed=0)
    deduped = split_pandalm_by_prompt(items, seed=0, dedupe=True)
    assert deduped.dropped_duplicates == 74
    assert {i.prompt for i in plain.heldout} == {i.prompt for i in deduped.heldout}
    kept = [*deduped.train, *deduped.heldout]
    assert len({(i.prompt, i.response1, i.response2) for i in kept}) == len(kept)
    assert "74 repeated identical comparisons" in deduped.describe()


def test_limit_takes_whole_prompts() -> None:
    items = load_bundled_pandalm()
    full = split_pandalm_by_prompt(items, seed=1)
    small = split_pandalm_by_prompt(items, seed=1, limit=60)
    kept = [*small.train, *small.heldout]
    assert 60 <= len(kept) < 60 + 10  # a prompt has at most 10 items
    per_prompt = {p: sum(i.prompt == p for i in [*full.train, *full.heldout]) for p in {i.prompt for i in kept}}
    assert sum(per_prompt.values()) == len(kept)
    assert small.limited_to == 60 and "reduced run of 60 items" in small.describe()


def test_bad_split_arguments_are_refused() -> None:
    items = load_bundled_pandalm()
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_pandalm_by_prompt(items, heldout_fraction=1.0)
    with pytest.raises(ValueError, match="limit"):
        split_pandalm_by_prompt(items, limit=1)


def test_folds_cover_every_judgeable_item_once() -> None:
    """The default quickstart measures all of PandaLM's usable items: 999 less
    54 with an empty response and 74 repeated comparisons, 871."""
    data = fold_pandalm_by_prompt(load_bundled_pandalm())
    assert len(data.items) == PANDALM_ITEMS - 54 - 74 == 871
    assert sum(len(data.fold(k)) for k in range(data.folds)) == len(data.items)
    assert "871 items on 164 prompts" in data.describe()


@settings(max_examples=25, deadline=None)
@given(
    folds=st.integers(2, 10),
    seed=st.integers(0, 10_000),
    limit=st.one_of(st.none(), st.integers(10, 400)),
    dedupe=st.booleans(),
)
def test_folds_partition_the_items_by_prompt(folds: int, seed: int, limit: int | None, dedupe: bool) -> None:
    """Whatever the fold count, seed and reduction: every kept item is in
    exactly one fold, a prompt never spans two folds, fold prompt counts
    differ by at most one, and the same arguments deal the same folds; the
    items kept are those the train/held-out split keeps."""
    items = load_bundled_pandalm()
    data = fold_pandalm_by_prompt(items, folds=folds, seed=seed, limit=limit, dedupe=dedupe)
    per_fold = [data.fold(k) for k in range(folds)]
    assert sorted(i.idx for f in per_fold for i in f) == sorted(i.idx for i in data.items)
    prompts = [{i.prompt for i in f} for f in per_fold]
    assert all(not (a & b) for n, a in enumerate(prompts) for b in prompts[n + 1 :])
    counts = [len(p) for p in prompts]
    assert max(counts) - min(counts) <= 1 and min(counts) >= 1
    assert not any(i.has_empty_response for i in data.items)
    assert data == fold_pandalm_by_prompt(items, folds=folds, seed=seed, limit=limit, dedupe=dedupe)
    split = split_pandalm_by_prompt(items, seed=seed, limit=limit, dedupe=dedupe, min_prompts=folds)
    assert sorted(i.idx for i in data.items) == sorted(i.idx for i in [*split.train, *split.heldout])
