"""Training the local judge. Installed as ``judgegraph.finetune``.

Traces (any labelled judgement) -> a dataset rendered with the same
templates the judges use -> one of three heads:

- ``train_sft``: generative SFT of a causal LM with TRL (LoRA, QLoRA or full),
  served by TGI / vLLM / SGLang or loaded by TransformersBackend;
- ``train_classifier``: an AutoModelForSequenceClassification head (pairwise
  classes, served by ``ClassifierJudge``, or a pointwise regression, served by
  ``ScoreRegressorJudge``: the cheap guardrail judge);
- ``train_probe``: a frozen sentence encoder plus a swap-equivariant linear
  head, the cheap pairwise judge that trains on CPU in minutes.

Then ``evaluate_judge`` on the held-out instructions, ``merge_lora`` /
``merge_linear``, and ``export_for_serving``. torch, transformers, peft and
trl are imported only when a function needs them.
"""

from ._classifier import ClassifierOptions, SequenceClassifier, train_classifier
from ._classifier_judge import ClassifierJudge, create_classifier_judge, load_classifier
from ._config import ConfigError, DataSource, FinetuneConfig, load_config
from ._crossfit import assign_folds, fold_heads
from ._dataset import (
    DatasetConfig,
    Example,
    JudgeDataset,
    build_dataset,
    dedup_traces,
    instruction_key,
    split_by_instruction,
)
from ._evaluate import EvalReport, aevaluate_judge, evaluate_judge
from ._export import ExportResult, export_for_serving, launch_commands, merge_linear, merge_lora
from ._pipeline import RunReport, run_finetune
from ._probe import EncoderProbe, ProbeOptions, train_probe
from ._progress import make_progress
from ._score_judge import ScoreRegressor, ScoreRegressorJudge, create_score_judge
from ._scorer import PairScorer
from ._sft import SFTOptions, TrainResult, train_sft
from ._store_traces import StoreExport, traces_from_store
from ._synthetic import synthetic_traces
from ._traces import (
    PairwiseTrace,
    PointwiseTrace,
    Trace,
    TraceFormatError,
    read_traces,
    trace_from_result,
    traces_from_pandalm,
    write_traces,
)

__all__ = [
    "ClassifierJudge",
    "ClassifierOptions",
    "ConfigError",
    "DataSource",
    "DatasetConfig",
    "EncoderProbe",
    "EvalReport",
    "Example",
    "ExportResult",
    "FinetuneConfig",
    "JudgeDataset",
    "PairScorer",
    "PairwiseTrace",
    "PointwiseTrace",
    "ProbeOptions",
    "RunReport",
    "SFTOptions",
    "ScoreRegressor",
    "ScoreRegressorJudge",
    "SequenceClassifier",
    "StoreExport",
    "Trace",
    "TraceFormatError",
    "TrainResult",
    "aevaluate_judge",
    "assign_folds",
    "build_dataset",
    "create_classifier_judge",
    "create_score_judge",
    "dedup_traces",
    "evaluate_judge",
    "export_for_serving",
    "fold_heads",
    "instruction_key",
    "launch_commands",
    "load_classifier",
    "load_config",
    "make_progress",
    "merge_linear",
    "merge_lora",
    "read_traces",
    "run_finetune",
    "split_by_instruction",
    "synthetic_traces",
    "trace_from_result",
    "traces_from_pandalm",
    "traces_from_store",
    "train_classifier",
    "train_probe",
    "train_sft",
    "write_traces",
]
