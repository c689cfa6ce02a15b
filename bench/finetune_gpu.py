"""Training throughput of the generative SFT path on one GPU: tokens/s and MFU in bf16.

One command, no hub access: a ~1.5B Qwen2-architecture model (Qwen2-1.5B's
shapes) is built from its config with random weights, and trained through
``judgegraph.finetune.train_sft`` (TRL SFTTrainer, packing on) on judge
prompts rendered from synthetic traces, once with LoRA (r=16, all linear
layers) and once as full fine-tuning. Throughput is timed over the steps
after a warm-up, from the trainer's own count of non-padding input tokens.

Packing: by default rows are "wrapped" (batch x seq_len dense rows, SDPA's
causal flash kernel), the layout the FLOP formula below assumes. "bfd" packs
whole examples and is what exact judge training uses; TRL then flattens the
batch into one row of batch x seq_len tokens with a block-diagonal mask, and
SDPA computes attention over that whole row unless the model uses a varlen
kernel (--attn flex_attention, or flash_attention_2 where flash-attn is
installed). Run both to see what exactness costs on your kernels.

MFU = model FLOPs per second / the GPU's dense bf16 peak. Model FLOPs per
token (PaLM's convention, no recomputation counted):
    full SFT: 6 N + 12 L d s
    LoRA:     4 N + 12 L d s   (no weight gradients for the frozen matrices)
with N the matmul parameters (all but the input embedding, lm_head included),
L layers, d hidden size, s sequence length. tests/test_bench_finetune_gpu.py
checks both against torch's FLOP counter; LoRA's own adapter FLOPs (about 2%
at r=16 on this model) are left out, so LoRA's MFU is slightly understated.

    python bench/finetune_gpu.py                      # one H200: well under 10 minutes
    python bench/finetune_gpu.py --tiny               # CPU smoke run of the same path (fp32)
    python bench/finetune_gpu.py --modes lora --steps 40 --batch 16
    python bench/finetune_gpu.py --modes full --packing bfd --attn flex_attention
    python bench/finetune_gpu.py --arch smollm2-135m      # SmolLM2's shapes (Llama), random weights
    python bench/finetune_gpu.py --model-dir .judgegraph/models/SmolLM2-135M-Instruct   # its real weights
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gpu_shapes import ARCHS, PEAK_TFLOPS, QWEN2_1_5B, SMOLLM2_135M, TINY

__all__ = ["ARCHS", "PEAK_TFLOPS", "QWEN2_1_5B", "SMOLLM2_135M", "TINY", "main"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="a 2-layer model on CPU in fp32: checks the path, not speed")
    p.add_argument(
        "--arch",
        choices=sorted(ARCHS),
        default="qwen2-1.5b",
        help="shapes of the model built from config with random weights (smollm2-135m: a Llama)",
    )
    p.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="train this pretrained folder instead (e.g. the converted SmolLM2 from tests/_smollm2.py)",
    )
    p.add_argument("--modes", default="lora,full", help="comma-separated: lora, full")
    p.add_argument("--steps", type=int, default=30, help="timed optimizer steps per mode")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--batch", type=int, default=8, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=2048, help="packed sequence length")
    p.add_argument("--packing", choices=("wrapped", "bfd"), default="wrapped", help="TRL packing strategy")
    p.add_argument("--attn", default="sdpa", help="attn_implementation: sdpa, flex_attention, flash_attention_2")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--peak-tflops", type=float, default=None, help="override the GPU's dense bf16 peak")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    if args.tiny:
        # A judge prompt is ~500 tokens with the tiny tokenizer: keep whole examples in a sequence.
        args.batch, args.seq_len = min(args.batch, 2), min(args.seq_len, 1024)
        args.steps, args.warmup = min(args.steps, 4), min(args.warmup, 1)
    return args


def pretrained_shape(path: Path) -> dict[str, Any]:
    """The shape keys the FLOP formula needs, read from a pretrained folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path)
    shapes = {k: getattr(config, k) for k in SMOLLM2_135M if hasattr(config, k)}
    rope = getattr(config, "rope_parameters", None) or {}
    if "rope_theta" not in shapes and "rope_theta" in rope:
        shapes["rope_theta"] = rope["rope_theta"]  # transformers 5 keeps it with the other RoPE settings
    with torch.device("meta"):  # shapes only, no weights
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "matmul_params": matmul_params(model, shapes),
        **shapes,
    }


def build_model(path: Path, *, tiny: bool, arch: str = "qwen2-1.5b") -> dict[str, Any]:
    """Tokenizer from the tiny builder (offline BPE), weights from the chosen architecture's config."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, Qwen2Config

    from judgegraph.tiny_model import build_tiny_model

    tok_dir = build_tiny_model(path.parent / "tokenizer-src", vocab_size=2048)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    shapes = dict(TINY if tiny else ARCHS[arch])
    config_cls = LlamaConfig if arch == "smollm2-135m" and not tiny else Qwen2Config
    config = config_cls(
        **shapes, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id
    )
    cuda = torch.cuda.is_available() and not tiny
    dtype = torch.bfloat16 if cuda else torch.float32
    with torch.device("cuda" if cuda else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)  # type: ignore[no-untyped-call]
    model.save_pretrained(path)
    tok.save_pretrained(path)
    n_all = sum(p.numel() for p in model.parameters())
    n_matmul = matmul_params(model, shapes)
    del model
    if cuda:
        torch.cuda.empty_cache()
    return {"params": n_all, "matmul_params": n_matmul, **shapes}


def matmul_params(model: Any, shape: dict[str, Any]) -> int:
    """Parameters that take part in a matmul per token: all but the input
    embedding (a lookup), plus the lm_head, which a tied model shares with it."""
    n_all = sum(p.numel() for p in model.parameters())
    n_embed = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight
    n_head = head.numel() if head is model.get_input_embeddings().weight else 0
    return int(n_all - n_embed + n_head)


def flops_per_token(mode: str, *, matmul_params: int, layers: int, hidden: int, seq_len: int) -> float:
    """Model FLOPs per trained token (PaLM's convention; see the module docstring)."""
    weights = (6 if mode == "full" else 4) * matmul_params
    return float(weights + 12 * layers * hidden * seq_len)


def make_dataset(n_traces: int) -> Any:
    from judgegraph.finetune import DatasetConfig, build_dataset, synthetic_traces

    traces = synthetic_traces(n_traces, kind="pairwise", instructions=max(n_traces // 4, 2), seed=0)
    # Long rationales make realistic completions; the loss stays on the completion.
    filler = "The first answer addresses the question directly while the second drifts. " * 6
    traces = [t.model_copy(update={"rationale": filler + f"Answer {t.winner} is better."}) for t in traces]
    return build_dataset(traces, DatasetConfig(formats=("pairwise-choice",), phrasings=3, validation_fraction=0))


class Timer:
    """A TrainerCallback that times steps after the warm-up and reads the token count."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.t0: float | None = None
        self.tokens0 = 0
        self.t1 = 0.0
        self.tokens1 = 0
        self.steps = 0
        self.losses: list[float] = []

    def callback(self) -> Any:
        from transformers import TrainerCallback

        timer = self

        class _Cb(TrainerCallback):  # type: ignore[misc]
            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                _sync()
                if state.global_step == timer.warmup:
                    timer.t0, timer.tokens0 = time.perf_counter(), int(state.num_input_tokens_seen)
                elif state.global_step > timer.warmup:
                    timer.t1, timer.tokens1 = time.perf_counter(), int(state.num_input_tokens_seen)
                    timer.steps = state.global_step - timer.warmup

            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
                if logs and "loss" in logs:
                    timer.losses.append(float(logs["loss"]))

        return _Cb()


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_flops(override: float | None) -> tuple[float | None, str]:
    import torch

    if not torch.cuda.is_available():
        return (override * 1e12 if override else None), "cpu"
    name = torch.cuda.get_device_name(0)
    if override:
        return override * 1e12, name
    for key, tflops in PEAK_TFLOPS.items():
        if key in name:
            return tflops * 1e12, name
    return None, name


def run_mode(
    mode: str, model_dir: Path, ds: Any, shape: dict[str, Any], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    import torch

    from judgegraph.finetune import SFTOptions, train_sft

    cuda = torch.cuda.is_available() and not args.tiny
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    opts = SFTOptions(
        method=mode,  # type: ignore[arg-type]
        lora_r=16,
        lora_alpha=32,
        learning_rate=2e-4 if mode == "lora" else 1e-5,
        warmup_steps=0,
        max_steps=args.warmup + args.steps,
        batch_size=args.batch,
        max_length=args.seq_len,
        packing=True,
        packing_strategy=args.packing,
        attn_implementation=args.attn,
        bf16=cuda,
        gradient_checkpointing=args.gradient_checkpointing,
        logging_steps=1,
        save_steps=10**9,
        save_total_limit=1,
    )
    timer = Timer(args.warmup)
    started = time.perf_counter()
    train_sft(model_dir, ds, work / f"run-{mode}", options=opts, progress=False, callbacks=[timer.callback()])
    wall = time.perf_counter() - started
    if timer.t0 is None or timer.steps == 0:
        raise RuntimeError(f"{mode}: no timed steps (warm-up {args.warmup}, steps {args.steps})")
    if not any(loss > 0 for loss in timer.losses):
        raise RuntimeError(f"{mode}: the loss stayed 0: completions were cut off at seq_len {args.seq_len}")
    seconds = timer.t1 - timer.t0
    tokens = timer.tokens1 - timer.tokens0
    tok_s = tokens / seconds
    per_token = flops_per_token(
        mode,
        matmul_params=shape["matmul_params"],
        layers=shape["num_hidden_layers"],
        hidden=shape["hidden_size"],
        seq_len=args.seq_len,
    )
    peak, device = peak_flops(args.peak_tflops)
    return {
        "mode": mode,
        "device": device,
        "dtype": "bf16" if cuda else "fp32",
        "batch": args.batch,
        "seq_len": args.seq_len,
        "packing": args.packing,
        "attn": args.attn,
        "gradient_checkpointing": args.gradient_checkpointing,
        "timed_steps": timer.steps,
        "step_s": seconds / timer.steps,
        "tokens_per_s": tok_s,
        "tokens_per_step": tokens / timer.steps,
        "model_tflops_per_s": per_token * tok_s / 1e12,
        "mfu": per_token * tok_s / peak if peak else None,
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "wall_s": wall,
    }


def _free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_mode_safely(
    mode: str, model_dir: Path, ds: Any, shape: dict[str, Any], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """One mode's result, or its error: device time is scarce, so one failing
    mode must not cost the others' figures. Out of memory without gradient
    checkpointing is retried once with it (the result says so)."""
    import torch

    try:
        try:
            r = run_mode(mode, model_dir, ds, shape, args, work)
        except torch.cuda.OutOfMemoryError:
            if args.gradient_checkpointing:
                raise
            print(f"{mode}: out of memory; retrying with gradient checkpointing", flush=True)
            _free_gpu()
            r = run_mode(
                mode, model_dir, ds, shape, argparse.Namespace(**{**vars(args), "gradient_checkpointing": True}), work
            )
    except Exception as exc:  # reported, and the next mode still runs
        _free_gpu()
        print(f"{mode}: failed: {type(exc).__name__}: {exc}", flush=True)
        return {"mode": mode, "error": f"{type(exc).__name__}: {exc}"}
    _free_gpu()
    mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
    print(json.dumps(r), flush=True)
    print(f"{mode}: {r['tokens_per_s']:,.0f} tokens/s, MFU {mfu}, step {r['step_s']:.3f} s", flush=True)
    return r


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not args.tiny and not torch.cuda.is_available():
        print("no CUDA GPU here: run with --tiny to check the path on CPU", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ("lora", "full")]
    if bad:
        print(f"unknown mode(s) {bad}; use lora and/or full", file=sys.stderr)
        return 2
    total = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="jg-ft-bench-"))
    try:
        t = time.perf_counter()
        if args.model_dir is not None:
            model_dir = args.model_dir
            shape = pretrained_shape(model_dir)
            print(f"pretrained {shape['params'] / 1e9:.3f}B-parameter model from {model_dir}", flush=True)
        else:
            model_dir = work / "model"
            shape = build_model(model_dir, tiny=args.tiny, arch=args.arch)
            print(
                f"built {shape['params'] / 1e9:.3f}B-parameter {args.arch} from config "
                f"in {time.perf_counter() - t:.0f} s",
                flush=True,
            )
        # Enough examples for every step of the longest run, packed.
        need = (args.warmup + args.steps) * args.batch * args.seq_len
        ds = make_dataset(max(64, need // 350 + 64))
        results: list[dict[str, Any]] = []
        for mode in modes:
            results.append(run_mode_safely(mode, model_dir, ds, shape, args, work))
            if args.out:  # after each mode: a run cut short still leaves what it measured
                args.out.write_text(json.dumps({"shape": shape, "results": results}, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n| mode | device | batch x seq | packing, attention | tokens/s | model TFLOP/s | MFU | peak mem GiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            continue
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
        mem = f"{r['peak_mem_gib']:.1f}" if r["peak_mem_gib"] is not None else "n/a"
        ckpt = " (checkpointing)" if r["gradient_checkpointing"] else ""
        print(
            f"| {r['mode']}{ckpt} | {r['device']} | {r['batch']} x {r['seq_len']} | {r['packing']}, {r['attn']} | "
            f"{r['tokens_per_s']:,.0f} | "
            f"{r['model_tflops_per_s']:.1f} | {mfu} | {mem} |"
        )
    failed = [r for r in results if "error" in r]
    for r in failed:
        print(f"{r['mode']}: FAILED: {r['error']}")
    print(f"\ntotal wall time {time.perf_counter() - total:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
