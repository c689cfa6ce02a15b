"""Model shapes and GPU peaks for bench/finetune_gpu.py: the configs its models
are built from (random weights, no hub access) and the dense bf16 peaks its
MFU divides by."""

from __future__ import annotations

from typing import Any

# Dense bf16 peak, TFLOPS (vendor figures, no sparsity).
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "H800": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0}

QWEN2_1_5B: dict[str, Any] = {
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
# SmolLM2-135M-Instruct (Llama): the real model the CPU tests fine-tune (tests/_smollm2.py).
SMOLLM2_135M: dict[str, Any] = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "rope_theta": 100_000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}
ARCHS: dict[str, dict[str, Any]] = {"qwen2-1.5b": QWEN2_1_5B, "smollm2-135m": SMOLLM2_135M}
TINY: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 4096,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}
