"""The benchmark loaders against the published files, read here with plain json."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from judgegraph.datasets import (
    LLMBAR_SUBSETS,
    PANDALM_JUDGES,
    DatasetNotFoundError,
    list_llmbar_runs,
    load_llmbar,
    load_llmbar_run,
    load_pandalm,
    load_unieval,
)
from judgegraph.types import Status


def test_missing_folder_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"testset-v1\.json"):
        load_pandalm(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="LLMBar"):
        load_llmbar(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="data"):
        load_unieval(tmp_path, dataset="sfres")
    with pytest.raises(ValueError, match="unknown UniEval dataset"):
        load_unieval(tmp_path, dataset="nope")


def test_pandalm_loader_matches_files(shared_data: Path) -> None:
    root = shared_data / "pandalm"
    raw = json.loads((root / "testset-v1.json").read_text())
    gpt = json.loads((root / "gpt-3.5-turbo-testset-v1.json").read_text())
    items = load_pandalm(root)
    assert len(items) == len(raw)
    assert [i.idx for i in items] == [r["idx"] for r in raw]
    for item, row in zip(items, raw, strict=True):
        assert item.annotators == (row["annotator1"], row["annotator2"], row["annotator3"])
        assert item.category == row["motivation_app"]
    # The data README's gold distribution (tie / 1 / 2).
    assert Counter(i.majority for i in items) == {0: 105, 1: 422, 2: 472}
    # The recorded outputs keep their unparseable marker as an unparsed verdict.
    verdicts = [i.recorded_verdict("gpt-3.5-turbo") for i in items]
    n_garbage = sum(1 for g in gpt if g["gpt_result"] == "garbage")
    assert n_garbage > 0
    assert sum(1 for v in verdicts if v.status is Status.UNPARSED) == n_garbage
    n_tie = sum(1 for g in gpt if g["gpt_result"] == "Tie")
    assert sum(1 for v in verdicts if v.winner == "tie") == n_tie
    for judge in PANDALM_JUDGES:
        assert all(i.recorded_verdict(judge).status in (Status.OK, Status.UNPARSED) for i in items)
    # Responses stored as JSON booleans come back as text.
    assert all(isinstance(i.response1, str) and isinstance(i.response2, str) for i in items)


def test_pandalm_pairwise_input(shared_data: Path) -> None:
    items = load_pandalm(shared_data / "pandalm")
    good = next(i for i in items if not i.has_empty_response and i.input.strip())
    pi = good.to_pairwise_input()
    assert good.instruction.strip() in pi.instruction and good.input.strip() in pi.instruction
    assert (pi.response_a, pi.response_b) == (good.response1, good.response2)
    empty = next(i for i in items if i.has_empty_response)
    with pytest.raises(ValidationError):
        empty.to_pairwise_input()


def test_llmbar_loaders_match_files(shared_data: Path) -> None:
    root = shared_data / "llmbar"
    runs = list_llmbar_runs(root)
    on_disk = sorted(root.glob("**/evaluators/*/*/statistics.json"))
    assert len(runs) == len(on_disk) > 0
    for subset in LLMBAR_SUBSETS:
        if not (root / LLMBAR_SUBSETS[subset]).is_dir():
            continue  # the Adversarial subsets are not in every copy of the data
        items = load_llmbar(root, subset=subset)
        raw = json.loads((root / LLMBAR_SUBSETS[subset] / "dataset.json").read_text())
        assert [(i.output_1, i.label) for i in items] == [(r["output_1"], r["label"]) for r in raw]
    subset, evaluator, strategy = next(r for r in runs if r[0] == "LLMEval^2")
    run = load_llmbar_run(root, subset=subset, evaluator=evaluator, strategy=strategy)
    run_dir = root / LLMBAR_SUBSETS[subset] / "evaluators" / evaluator / strategy
    raw_run = json.loads((run_dir / "result.json").read_text())
    names = {"1": "A", "2": "B", None: None}
    for j, row in zip(run.judgements, raw_run, strict=True):
        assert j.first == names[row["results"][-1]["swap = False"]["winner"]]
        assert j.second == names[row["results"][-1]["swap = True"]["winner"]]
        first, _ = j.order_verdicts()
        assert (first.status is Status.UNPARSED) == (j.first is None)
    assert run.statistics == json.loads((run_dir / "statistics.json").read_text())


def test_llmbar_rating_scores(shared_data: Path) -> None:
    root = shared_data / "llmbar"
    rating = [r for r in list_llmbar_runs(root) if r[2] == "Rating"]
    assert rating
    run = load_llmbar_run(root, subset=rating[0][0], evaluator=rating[0][1], strategy="Rating")
    assert sum(j.score_1 is not None and j.score_2 is not None for j in run.judgements) > len(run.judgements) // 2


@pytest.mark.parametrize("dataset", ["topical_chat", "qags_xsum", "qags_cnndm", "sfres", "sfhot"])
def test_unieval_loader_joins_predictions(shared_data: Path, dataset: str) -> None:
    root = shared_data / "unieval"
    items = load_unieval(root, dataset=dataset)
    task = items[0].task
    raw = json.loads((root / "unieval_predict" / task / f"{dataset}_result.json").read_text())
    assert len(items) == len(raw)
    for item, row in zip(items, raw, strict=True):
        assert item.human == pytest.approx(row["scores"])
        assert item.predicted == pytest.approx(row["predict_scores"])
    bare = load_unieval(root, dataset=dataset, predictions=False)
    assert all(i.predicted is None for i in bare)
