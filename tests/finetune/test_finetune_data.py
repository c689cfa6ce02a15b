"""Traces and the dataset builder: formats, bias controls, hygiene. No torch needed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from judgegraph import (
    PairwiseInput,
    PairwiseJudge,
    PairwiseVerdict,
    PointwiseInput,
    PointwiseJudge,
    PointwiseScore,
    Provenance,
    Rubric,
    ScriptedBackend,
    Status,
    SwapPolicy,
)
from judgegraph._templates import get_template
from judgegraph.finetune import (
    DatasetConfig,
    Example,
    PairwiseTrace,
    PointwiseTrace,
    TraceFormatError,
    build_dataset,
    dedup_traces,
    read_traces,
    split_by_instruction,
    synthetic_traces,
    trace_from_result,
    traces_from_pandalm,
    write_traces,
)
from judgegraph.finetune._dataset import instruction_key, swap_mentions
from judgegraph.finetune._phrasings import phrasing, phrasing_count
from judgegraph.judges import parse_output


def _pair(i: int, **kw: object) -> PairwiseTrace:
    fields: dict[str, object] = {
        "id": f"t{i}",
        "instruction": f"question {i % 7}",
        "response_a": f"first answer {i}",
        "response_b": f"second answer {i}",
        "winner": "A" if i % 3 else "B",
    }
    fields.update(kw)
    return PairwiseTrace.model_validate(fields)


# ------------------------------------------------------------------ traces


def test_jsonl_round_trip(tmp_path: Path) -> None:
    rubric = Rubric(criterion="accuracy", levels={1: "wrong", 2: "partly", 3: "right"})
    traces = [
        _pair(1, rationale="Answer A is right.", reference="ref"),
        _pair(2, score_a=3, score_b=8, winner=None),
        PointwiseTrace(instruction="q", response="r", score=2, rubric=rubric, source="human"),
    ]
    path = tmp_path / "t.jsonl"
    assert write_traces(path, traces) == 3
    back = read_traces(path)
    assert back == traces
    assert back[1].winner == "B"  # derived from the scores
    assert back[2].scale == (1, 3)  # taken from the rubric


def test_bad_jsonl_names_line_and_field(tmp_path: Path) -> None:
    good = _pair(1).model_dump_json()
    path = tmp_path / "t.jsonl"
    path.write_text(
        good
        + "\n\n"
        + json.dumps({"kind": "pairwise", "instruction": "q", "response_a": "a", "response_b": "b", "winner": "C"})
        + "\n"
    )
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:3: winner"):
        read_traces(path)
    path.write_text(good + "\n{not json\n")
    with pytest.raises(TraceFormatError, match=r":2: not valid JSON"):
        read_traces(path)
    path.write_text(json.dumps({"instruction": "q"}) + "\n")
    with pytest.raises(TraceFormatError, match=r":1: kind: missing"):
        read_traces(path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"score_a": 3}, "give both score_a and score_b"),
        ({"score_a": 9, "score_b": 2, "winner": "B"}, "contradicts the scores"),
        ({"score_a": 11, "score_b": 2}, "outside the scale"),
        ({"response_b": "  "}, "response_b must be a non-empty string"),
    ],
)
def test_pairwise_trace_rejects_inconsistent_labels(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _pair(1, **fields)


def test_pointwise_trace_rejects_score_off_scale() -> None:
    with pytest.raises(ValueError, match="outside the scale 1-5"):
        PointwiseTrace(instruction="q", response="r", score=6)


def test_trace_from_results() -> None:
    prov = Provenance(judge="j", backend="b", model="teacher-1", template_id="t", template_version=1, latency_s=0.1)
    item = PairwiseInput(instruction="q", response_a="a", response_b="b", reference="ref")
    verdict = PairwiseVerdict(
        status=Status.OK, winner="B", score_a=3.0, score_b=7.0, rationale="B is better", confidence=0.8, provenance=prov
    )
    t = trace_from_result(item, verdict, source="teacher")
    assert isinstance(t, PairwiseTrace)
    assert (t.winner, t.score_a, t.score_b, t.judge, t.reference) == ("B", 3, 7, "teacher-1", "ref")
    # Swap-averaged scores are not one judgement's scores: kept as metadata only.
    averaged = verdict.model_copy(update={"score_a": 3.5, "score_b": 7.0})
    t2 = trace_from_result(item.model_dump(), averaged)
    assert t2.score_a is None and t2.metadata["score_a"] == 3.5  # type: ignore[union-attr]

    score = PointwiseScore(status=Status.OK, score=4, scale=(1, 5), rationale="fine")
    tp = trace_from_result(PointwiseInput(instruction="q", response="r"), score, source="human")
    assert isinstance(tp, PointwiseTrace) and tp.score == 4 and tp.source == "human"

    failed = PointwiseScore(status=Status.UNPARSED, scale=(1, 5), reason="no [RESULT] marker")
    with pytest.raises(ValueError, match="only ok results become traces"):
        trace_from_result(PointwiseInput(instruction="q", response="r"), failed)


def test_pandalm_loader(shared_data: Path) -> None:
    source = shared_data / "pandalm" / "testset-v1.json"
    raw = json.loads(source.read_text())
    traces = traces_from_pandalm(source)
    empty = sum(1 for r in raw if not str(r["response1"]).strip() or not str(r["response2"]).strip())
    assert len(traces) == len(raw) - empty
    # The published label counts (tie/1/2 = 105/422/472) less the skipped items.
    counts = Counter(t.winner for t in traces)
    assert counts["A"] + counts["B"] + counts["tie"] == len(traces)
    first = raw[0]
    assert traces[0].instruction.startswith(first["instruction"]) and first["input"] in traces[0].instruction
    votes = [first[f"annotator{k}"] for k in (1, 2, 3)]
    assert traces[0].winner == {0: "tie", 1: "A", 2: "B"}[max(set(votes), key=votes.count)]


# ------------------------------------------------------------------ hygiene


def test_dedup_treats_both_orders_as_one_comparison() -> None:
    a = _pair(1, winner="A")
    same_swapped = a.swapped().model_copy(update={"id": "other"})
    conflicting = a.model_copy(update={"id": "x", "winner": "B"})
    kept, dups, conflicts = dedup_traces([a, same_swapped, conflicting, _pair(2)])
    assert [t.id for t in kept] == ["t1", "t2"]
    assert (dups, conflicts) == (2, 1)


def test_split_is_by_instruction() -> None:
    traces = [_pair(i, instruction=f"Prompt number {i % 20}") for i in range(200)]
    # Case and spacing variants are the same instruction.
    traces.append(_pair(999, instruction="  prompt   NUMBER 3 "))
    train, val = split_by_instruction(traces, validation_fraction=0.25, seed=3)
    assert len(train) + len(val) == len(traces)
    train_keys, val_keys = {instruction_key(t) for t in train}, {instruction_key(t) for t in val}
    assert not train_keys & val_keys
    assert len(val_keys) == 5


# ------------------------------------------------------------------ building


def test_swap_augmentation_on_the_built_dataset() -> None:
    traces = [_pair(i, rationale=f"Answer {'A' if i % 3 else 'B'} is better.") for i in range(30)]
    ds = build_dataset(traces, DatasetConfig(formats=("pairwise-choice",), validation_fraction=0.3))
    assert ds.stats["train_examples"] == 2 * ds.stats["train_traces"]
    by_trace: dict[str, list[Example]] = {}
    for ex in ds.train:
        by_trace.setdefault(ex.id.rsplit(":", 1)[0], []).append(ex)
    flip = {"A": "B", "B": "A", "tie": "tie"}
    for exs in by_trace.values():
        assert sorted(e.swapped for e in exs) == [False, True]
        plain, swapped = sorted(exs, key=lambda e: e.swapped)
        assert swapped.label == flip[plain.label]
        # The answers trade places in the prompt.
        p, s = plain.messages[1].content, swapped.messages[1].content
        a_text = p.split("⟦begin response a⟧\n")[1].split("\n⟦end")[0]
        b_text = p.split("⟦begin response b⟧\n")[1].split("\n⟦end")[0]
        assert s.split("⟦begin response a⟧\n")[1].split("\n⟦end")[0] == b_text
        assert s.split("⟦begin response b⟧\n")[1].split("\n⟦end")[0] == a_text
        # The rationale follows the answers, and the verdict line parses to the label.
        assert f"Answer {plain.label} is better." in plain.completion
        assert f"Answer {swapped.label} is better." in swapped.completion
        for e in (plain, swapped):
            parsed = parse_output(e.completion, kind="choice", scale=(0, 0))
            assert parsed.value == e.label
    # Validation stays as collected: one order, canonical wording.
    assert not any(e.swapped or e.phrasing for e in ds.validation)
    assert len(ds.validation) == len(ds.validation_traces)


def test_reference_drop_ratio_on_the_built_dataset() -> None:
    traces = [_pair(i, reference=f"reference {i}") for i in range(40)] + [_pair(i) for i in range(40, 50)]
    cfg = DatasetConfig(formats=("pairwise-choice",), reference_drop=0.25, validation_fraction=0.2, seed=1)
    ds = build_dataset(traces, cfg)
    with_ref_traces = sum(1 for t in ds.train_traces if t.reference)
    candidates = 2 * with_ref_traces  # both orders
    dropped = [e for e in ds.train if not e.has_reference and e.id.endswith("/noref")]
    assert len(dropped) == round(0.25 * candidates)
    for e in ds.train:
        rendered_ref = "⟦begin reference answer⟧" in e.messages[1].content
        assert rendered_ref == e.has_reference
    assert sum(e.has_reference for e in ds.train) == candidates - len(dropped)
    # Dropping never touches validation.
    assert all(e.has_reference for e in ds.validation if "reference" in e.messages[1].content)


def test_phrasings_keep_the_output_format() -> None:
    traces = [_pair(i) for i in range(60)]
    ds = build_dataset(traces, DatasetConfig(formats=("pairwise-choice",), phrasings=3, validation_fraction=0.1))
    used = Counter(e.phrasing for e in ds.train)
    assert set(used) == {0, 1, 2}
    fmt = get_template("pairwise-choice").text_format
    intros = set()
    for e in ds.train:
        assert e.messages[1].content.endswith(fmt)
        intros.add(e.messages[1].content.split("\n")[0])
    assert len(intros) == 3
    for tid in ("pairwise-scores", "pairwise-choice", "pointwise-rubric"):
        t = get_template(tid)
        for k in range(phrasing_count(t)):
            assert phrasing(t, k).text_format == t.text_format
    with pytest.raises(ValueError, match="has 3 phrasings"):
        phrasing(get_template("pairwise-choice"), 3)


async def test_canonical_prompts_match_what_the_judges_send() -> None:
    rubric = Rubric(criterion="clarity", levels={1: "unclear", 2: "so-so", 3: "clear"})
    pair = _pair(1, reference="the reference", score_a=2, score_b=9, winner=None)
    point = PointwiseTrace(id="p", instruction="q?", response="r.", score=2, rubric=rubric)
    point_plain = PointwiseTrace(id="p2", instruction="q2?", response="r2.", score=4)
    ds = build_dataset(
        [pair, point, point_plain],
        DatasetConfig(formats=("pairwise-scores", "pairwise-choice", "pointwise-rubric"), validation_fraction=0),
    )
    rendered = {(e.id.rsplit(":", 1)[0], e.template_id): e for e in ds.train if not e.swapped}

    for template in ("pairwise-scores", "pairwise-choice"):
        backend = ScriptedBackend(["[RESULT] A"] * 2)
        judge = PairwiseJudge(backend, template=template, swap=SwapPolicy(mode="single"), repair=False)
        await judge.ajudge(pair.to_input())
        assert backend.calls[0].messages == rendered[("t1", template)].messages
    for trace in (point, point_plain):
        backend = ScriptedBackend(["[RESULT] 1"])
        await PointwiseJudge(backend, repair=False).ajudge(
            PointwiseInput(instruction=trace.instruction, response=trace.response, rubric=trace.rubric)
        )
        assert backend.calls[0].messages == rendered[(trace.id, "pointwise-rubric")].messages
    assert rendered[("t1", "pairwise-scores")].completion.endswith("[SCORES] 2 9")


def test_formats_that_cannot_render_are_counted_not_guessed() -> None:
    traces = [_pair(i) for i in range(10)] + [_pair(10, winner="tie")]
    ds = build_dataset(traces, DatasetConfig(formats=("pairwise-scores", "pairwise-rubric"), validation_fraction=0))
    # No trace has scores, so pairwise-scores renders none; the tie cannot be a pairwise-rubric answer.
    assert ds.stats["skipped pairwise-scores: no scores"] == 11
    assert ds.stats["skipped pairwise-rubric: tie not allowed"] == 1
    assert all(e.template_id == "pairwise-rubric" for e in ds.train)
    with pytest.raises(ValueError, match="no training examples"):
        build_dataset(traces[:3], DatasetConfig(formats=("pairwise-scores",), validation_fraction=0))
    with pytest.raises(KeyError, match="no template 'nope'"):
        DatasetConfig(formats=("nope",))
    with pytest.raises(ValueError, match="conversation template"):
        DatasetConfig(formats=("conversation",))


def test_dataset_save_and_synthetic_task(tmp_path: Path) -> None:
    traces = synthetic_traces(40, kind="pointwise", instructions=8)
    assert {t.score for t in traces} <= {1, 3, 5}
    ds = build_dataset(traces, DatasetConfig(formats=("pointwise-rubric",), validation_fraction=0.25))
    out = ds.save(tmp_path / "ds")
    lines = (out / "train.jsonl").read_text().splitlines()
    assert len(lines) == len(ds.train)
    row = json.loads(lines[0])
    assert row["completion"].startswith("[RESULT] ") and row["label"] == row["completion"][-1]
    assert json.loads((out / "dataset.json").read_text())["stats"]["train_examples"] == len(ds.train)


def test_swap_mentions() -> None:
    assert swap_mentions("Answer A is clearer than response B; Assistant A errs.") == (
        "Answer B is clearer than response A; Assistant B errs."
    )
    assert swap_mentions("A short answer. Option A") == "A short answer. Option A"
