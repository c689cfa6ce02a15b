"""The cheap pairwise judge: a frozen sentence encoder plus a small head.

Each text (instruction, answer A, answer B) is embedded once by a frozen
encoder (mean pooling, unit length). The head sees only features that flip
sign when the answers swap places: the difference of the answers' cosine
similarity to the instruction, differences of a few lexical signals (length,
repetition, copying of the prompt), and e(A) - e(B), the last held back by a
much stronger penalty since it has hundreds of dimensions and the data is
small. Ties are scored from the features' absolute values. So P(A wins | A, B) = P(B wins | B, A) holds exactly: the
judge is swap-consistent by construction, and training on both orders is
built in. On PandaLM this learns where end-to-end fine-tuning of the same
encoder collapsed to the majority class (see bench/results/finetune.md).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from judgegraph.types import MissingExtraError, PairwiseInput

from ._progress import task_bar
from ._scorer import PairScorer
from ._traces import PairwiseTrace

__all__ = ["EncoderProbe", "ProbeOptions", "embed_texts", "train_probe"]


class ProbeOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    labels: Literal[2, 3] = Field(default=3, description="3: A, B, tie; 2: A, B (tie traces are left out)")
    max_length: int = Field(default=256, ge=8, description="encoder tokens per text")
    batch_size: int = Field(default=32, ge=1)
    l2_scalar: float = Field(default=0.1, ge=0, description="penalty on the few scalar features' weights")
    l2_embedding: float = Field(default=10.0, ge=0, description="penalty on the embedding-difference and tie weights")
    max_iter: int = Field(default=300, ge=1)
    lexical: Literal[1, 2] = Field(
        default=1, description="1: five lexical signals per answer; 2: nine (adds ending, loops, refusal, length ratio)"
    )
    seed: int = 0


def embed_texts(
    encoder: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_length: int = 256,
    batch_size: int = 32,
    progress: bool = False,
    description: str = "embedding",
) -> Any:
    """Mean-pooled, unit-length embeddings as a float32 tensor (n, dim)."""
    import torch

    if not texts:
        raise ValueError("no texts to embed")
    out = []
    # Longest first keeps padding low inside each batch.
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    with task_bar(description, len(texts), enabled=progress) as advance, torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer(
                [texts[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            ).to(encoder.device)
            hidden = encoder(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            out.append(torch.nn.functional.normalize(pooled.float(), dim=-1).cpu())
            advance(len(idx))
    emb = torch.cat(out)
    result = torch.empty_like(emb)
    result[torch.tensor(order)] = emb
    return result


_WORD = re.compile(r"\w+")
N_SCALAR = 6  # cosine difference + the five v1 lexical signals


def _lexical(instruction: str, response: str) -> list[float]:
    """Cheap per-answer signals: length, repetition, how much it copies the
    instruction, line count, and whether it only echoes part of the prompt."""
    words = _WORD.findall(response.lower())
    prompt_words = set(_WORD.findall(instruction.lower()))
    n = max(len(words), 1)
    return [
        math.log1p(len(words)),
        len(set(words)) / n,
        sum(w in prompt_words for w in words) / n,
        math.log1p(response.count("\n")),
        float(response.strip().lower() in instruction.lower()),
    ]


_REFUSAL = re.compile(r"\b(i'?m sorry|i am sorry|as an ai|i cannot|i can'?t|i'?m not able|i am not able)\b")
_CLEAN_END = tuple(".!?)\"'`]*")


def _lexical_v2(instruction: str, response: str) -> list[float]:
    """The v1 signals plus: a clean ending (not cut off mid-sentence), the
    share of repeated word trigrams (degenerate loops), a refusal phrase, and
    the answer's length relative to the prompt's."""
    words = _WORD.findall(response.lower())
    tri = list(zip(words, words[1:], words[2:], strict=False))
    text = response.strip()
    return [
        *_lexical(instruction, response),
        float(text.endswith(_CLEAN_END) or text[-1:].isdigit()),
        1 - len(set(tri)) / len(tri) if tri else 0.0,
        float(bool(_REFUSAL.search(text.lower()))),
        math.log1p(len(words)) - math.log1p(len(_WORD.findall(instruction))),
    ]


def _features(q: Any, a: Any, b: Any, lex_a: Any, lex_b: Any) -> tuple[Any, Any]:
    """(antisymmetric, symmetric) features of a pair. Swapping A and B negates
    the first and keeps the second. The first ``N_SCALAR`` antisymmetric
    columns are scalar signals, the rest the embedding difference."""
    import torch

    cos = ((q * a).sum(-1) - (q * b).sum(-1)).unsqueeze(-1)
    anti = torch.cat([cos, lex_a - lex_b, a - b], dim=-1)
    sym = torch.cat([anti.abs(), (a * b).sum(-1, keepdim=True)], dim=-1)
    return anti, sym


class _Head:
    """logit_A = w·anti, logit_B = -w·anti, logit_tie = u·sym + t, on
    standardised features."""

    def __init__(self, dim_anti: int, dim_sym: int, labels: int, *, n_scalar: int = N_SCALAR) -> None:
        import torch

        self.labels = labels
        # The first n_scalar antisymmetric columns get the light penalty.
        self.n_scalar = n_scalar
        self.w = torch.zeros(dim_anti, requires_grad=True)
        self.u = torch.zeros(dim_sym, requires_grad=True)
        self.t = torch.zeros(1, requires_grad=True)
        # Over both orders an antisymmetric feature has mean zero: scale only.
        self.scale_anti = torch.ones(dim_anti)
        self.mean_sym = torch.zeros(dim_sym)
        self.scale_sym = torch.ones(dim_sym)

    def params(self) -> list[Any]:
        return [self.w, self.u, self.t] if self.labels == 3 else [self.w]

    def penalty(self, l2_scalar: float, l2_embedding: float) -> Any:
        n = self.n_scalar
        p = l2_scalar * (self.w[:n] ** 2).sum() + l2_embedding * (self.w[n:] ** 2).sum()
        return p + l2_embedding * (self.u**2).sum() if self.labels == 3 else p

    def fit_scaling(self, anti: Any, sym: Any) -> None:
        self.scale_anti = anti.std(0).clamp(min=1e-6)
        self.mean_sym, self.scale_sym = sym.mean(0), sym.std(0).clamp(min=1e-6)

    def logits(self, anti: Any, sym: Any) -> Any:
        import torch

        s = (anti / self.scale_anti) @ self.w
        cols = [s, -s]
        if self.labels == 3:
            cols.append(((sym - self.mean_sym) / self.scale_sym) @ self.u + self.t)
        return torch.stack(cols, dim=-1)

    def state(self) -> dict[str, Any]:
        names = ("w", "u", "t", "scale_anti", "mean_sym", "scale_sym")
        return {k: getattr(self, k).detach().clone().contiguous() for k in names}

    def load(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, v)


_LABELS = {3: ("A", "B", "tie"), 2: ("A", "B")}


class EncoderProbe(PairScorer):
    """A frozen encoder and a swap-equivariant linear head. Save it with
    :meth:`save`, load it with :meth:`load` (or :func:`load_classifier`)."""

    name = "encoder-probe"

    def __init__(
        self, encoder_dir: str | Path, head: _Head, options: ProbeOptions, *, device: str | None = None
    ) -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError:
            raise MissingExtraError("EncoderProbe", "local") from None
        super().__init__(model=str(encoder_dir), labels=_LABELS[options.labels])
        self.encoder_dir = Path(encoder_dir)
        self.options = options
        self.head = head
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(str(encoder_dir))
        self.encoder = AutoModel.from_pretrained(str(encoder_dir)).to(self.device).eval()
        self.metrics: dict[str, float] = {}
        # Instructions recur across pairs and both orders share texts: embed each once.
        self._cache: dict[str, Any] = {}
        self.cache_size = 50_000

    @classmethod
    def untrained(
        cls, encoder_dir: str | Path, options: ProbeOptions | None = None, *, device: str | None = None
    ) -> Self:
        """The frozen encoder with no head yet: :meth:`fit` gives it one."""
        opts = options or ProbeOptions()
        return cls(encoder_dir, _Head(1, 1, opts.labels), opts, device=device)

    # -------------------------------------------------------------- features

    def _embed(self, texts: Sequence[str], progress: bool = False) -> dict[str, Any]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            emb = embed_texts(
                self.encoder,
                self.tokenizer,
                missing,
                max_length=self.options.max_length,
                batch_size=self.options.batch_size,
                progress=progress,
            )
            for i, t in enumerate(missing):
                self._cache[t] = emb[i]
            while len(self._cache) > self.cache_size:  # oldest first
                del self._cache[next(iter(self._cache))]
        return {t: self._cache[t] for t in texts}

    def _pair_features(self, items: Sequence[PairwiseInput], progress: bool = False) -> tuple[Any, Any]:
        import torch

        table = self._embed(
            [x for it in items for x in (it.instruction, it.response_a, it.response_b)], progress=progress
        )
        q = torch.stack([table[it.instruction] for it in items])
        a = torch.stack([table[it.response_a] for it in items])
        b = torch.stack([table[it.response_b] for it in items])
        lex = _lexical if self.options.lexical == 1 else _lexical_v2
        la = torch.tensor([lex(it.instruction, it.response_a) for it in items])
        lb = torch.tensor([lex(it.instruction, it.response_b) for it in items])
        return _features(q, a, b, la, lb)

    def predict_proba(self, items: Sequence[PairwiseInput]) -> list[list[float]]:
        import torch

        if not items:
            return []
        anti, sym = self._pair_features(items)
        with torch.no_grad():
            probs = self.head.logits(anti, sym).softmax(-1)
        return [[float(p) for p in row] for row in probs]

    def fit(
        self, traces: Sequence[PairwiseTrace], *, progress: bool = False, log: Callable[[str], None] | None = None
    ) -> EncoderProbe:
        """Fit a fresh head on ``traces`` (L-BFGS on the cross-entropy over
        both answer orders), keeping the encoder and its embedding cache."""
        return _fit(self, traces, progress, log)

    # -------------------------------------------------------------- storage

    def save(self, directory: str | Path) -> Path:
        """Write a self-contained directory: the encoder, the head, the options."""
        from safetensors.torch import save_file

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        enc_out = out / "encoder"
        if self.encoder_dir.resolve() != enc_out.resolve():
            if enc_out.exists():
                shutil.rmtree(enc_out)
            self.encoder.save_pretrained(enc_out)
            self.tokenizer.save_pretrained(enc_out)
        save_file(self.head.state(), str(out / "head.safetensors"))
        meta = {
            "kind": self.name,
            "options": self.options.model_dump(),
            "labels": list(self.labels),
            "metrics": self.metrics,
        }
        (out / "classifier.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, directory: str | Path, *, device: str | None = None) -> EncoderProbe:
        from safetensors.torch import load_file

        d = Path(directory)
        meta = json.loads((d / "classifier.json").read_text(encoding="utf-8"))
        if meta.get("kind") != cls.name:
            raise ValueError(f"{d} holds a {meta.get('kind')!r}, not an {cls.name!r}")
        options = ProbeOptions.model_validate(meta["options"])
        state = load_file(str(d / "head.safetensors"))
        head = _Head(state["w"].numel(), state["u"].numel(), options.labels)
        head.load(state)
        probe = cls(d / "encoder", head, options, device=device)
        probe.metrics = dict(meta.get("metrics", {}))
        return probe


def _targets(traces: Sequence[PairwiseTrace], labels: int) -> list[int]:
    index = {lab: i for i, lab in enumerate(_LABELS[labels])}
    return [index[t.winner] for t in traces]


def train_probe(
    traces: Sequence[PairwiseTrace],
    encoder_dir: str | Path,
    *,
    options: ProbeOptions | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> EncoderProbe:
    """Load the frozen encoder, embed the traces and fit the head."""
    opts = options or ProbeOptions()
    probe = EncoderProbe.untrained(encoder_dir, opts)
    return probe.fit(traces, progress=progress, log=log)


def fit_head(
    anti: Any, sym: Any, y: Any, opts: ProbeOptions, *, n_scalar: int = N_SCALAR
) -> tuple[_Head, float, float]:
    """Fit the swap-equivariant head on one order's features and targets
    (indices into A, B[, tie]); the flipped order is added here. Returns
    (head, training loss, training accuracy over both orders)."""
    import torch

    torch.manual_seed(opts.seed)
    # Swap augmentation: the flipped order negates anti and swaps A/B labels.
    flip = torch.tensor([1, 0, 2][: opts.labels])
    anti2, sym2, y2 = torch.cat([anti, -anti]), torch.cat([sym, sym]), torch.cat([y, flip[y]])
    head = _Head(anti.shape[1], sym.shape[1], opts.labels, n_scalar=n_scalar)
    head.fit_scaling(anti2, sym2)
    optim = torch.optim.LBFGS(head.params(), max_iter=opts.max_iter, line_search_fn="strong_wolfe")

    def closure() -> Any:
        optim.zero_grad()
        loss = torch.nn.functional.cross_entropy(head.logits(anti2, sym2), y2)
        loss = loss + head.penalty(opts.l2_scalar, opts.l2_embedding)
        loss.backward()
        return loss

    optim.step(closure)  # type: ignore[no-untyped-call]
    with torch.no_grad():
        logits = head.logits(anti2, sym2)
        loss = float(torch.nn.functional.cross_entropy(logits, y2))
        acc = float((logits.argmax(-1) == y2).float().mean())
    if not math.isfinite(loss):
        raise RuntimeError("probe training diverged (loss is not finite)")
    return head, loss, acc


def _fit(
    probe: EncoderProbe, traces: Sequence[PairwiseTrace], progress: bool, log: Callable[[str], None] | None
) -> EncoderProbe:
    import torch

    opts = probe.options
    pairs = [t for t in traces if isinstance(t, PairwiseTrace)]
    if len(pairs) != len(traces):
        raise ValueError(f"the probe takes pairwise traces; got {len(traces) - len(pairs)} of another kind")
    if opts.labels == 2:
        pairs = [t for t in pairs if t.winner != "tie"]
    if len(pairs) < 2:
        raise ValueError(f"need at least two usable pairwise traces, got {len(pairs)}")
    anti, sym = probe._pair_features([t.to_input() for t in pairs], progress=progress)
    y = torch.tensor(_targets(pairs, opts.labels))
    n_lex = len(_lexical("", "") if opts.lexical == 1 else _lexical_v2("", ""))
    head, loss, acc = fit_head(anti, sym, y, opts, n_scalar=1 + n_lex)
    if log is not None:
        log(f"probe head fitted: loss {loss:.4f}, training accuracy {acc:.3f} over {len(pairs)} pairs x 2 orders")
    probe.head = head
    probe.metrics = {"train_loss": loss, "train_accuracy": acc, "train_pairs": float(len(pairs))}
    return probe
