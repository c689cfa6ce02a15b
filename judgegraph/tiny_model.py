"""Build a tiny causal LM offline: a BPE tokenizer trained on the spot and a
2-layer Llama or Qwen2 config, saved with ``save_pretrained``.

It judges nothing well untrained. It exists so the in-process path, the
serving path (vLLM serves it) and fine-tuning can all be exercised on a
machine with no hub access, in seconds.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from .types import MissingExtraError

__all__ = ["CHATML_TEMPLATE", "build_tiny_model", "default_corpus"]

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]


def default_corpus(n: int = 20000, seed: int = 0) -> list[str]:
    """Generated lines that cover judge prompts' vocabulary, numbers and markers."""
    rng = random.Random(seed)
    words = (
        "the answer response question instruction reference rubric score result feedback better worse "
        "correct wrong helpful clear tie first second grade criterion assistant user system explain "
        "compare which follows more less accurate complete relevant detail why because"
    ).split()
    lines = []
    for _ in range(n):
        k = rng.randint(3, 12)
        body = " ".join(rng.choice(words) for _ in range(k))
        lines.append(f"{body} {rng.randint(0, 999)} [RESULT] {rng.randint(1, 10)} [SCORES] A B TIE ⟦begin⟧ ⟦end⟧")
    return lines


def build_tiny_model(
    path: str | Path,
    *,
    arch: Literal["qwen2", "llama"] = "qwen2",
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    vocab_size: int = 2048,
    corpus: Iterable[str] | None = None,
    seed: int = 0,
) -> Path:
    """Write tokenizer + randomly initialised model to ``path``; return it.

    Head size is hidden_size / num_heads; keep it >= 32 if vLLM will serve it.
    """
    try:
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config
    except ImportError:
        raise MissingExtraError("build_tiny_model", "local") from None

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    # Digits split one by one, so every score is its own token.
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(list(corpus) if corpus is not None else default_corpus(seed=seed), trainer)
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token=None,
        unk_token=None,
    )
    tok.chat_template = CHATML_TEMPLATE
    tok.save_pretrained(out)

    common = {
        "vocab_size": len(tok),
        "hidden_size": hidden_size,
        "intermediate_size": hidden_size * 4,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_heads,
        "max_position_embeddings": 2048,
        "pad_token_id": tok.pad_token_id,
        "eos_token_id": tok.eos_token_id,
        "bos_token_id": tok.eos_token_id,
        "tie_word_embeddings": True,
    }
    config = Qwen2Config(**common) if arch == "qwen2" else LlamaConfig(**common)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out)
    return out
