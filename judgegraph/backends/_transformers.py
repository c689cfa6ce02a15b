"""In-process judge model with transformers: the embedded default.

Concurrent ``generate`` calls are gathered into batches (up to
``max_batch_size``, waiting at most ``batch_wait_s`` for company) and run in a
worker thread, so the event loop stays free while the model computes.

A gathered batch is run as one or more ``generate`` calls of prompts of similar
length (``max_padding``): every prompt is padded to the longest in its call, and
on CPU the prompt pass is compute-bound, so a padded position costs as much as a
real one; each extra call costs one more decoding loop instead.

The prompt head that calls share (chat header, system message, the template's
opening) is computed once and each call starts from a copy of its attention
cache (``prefix_cache``; see ``_prefix_cache``).
"""

from __future__ import annotations

import asyncio
import copy
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from judgegraph.pretrained import pretrained_source
from judgegraph.types import JSONValue, Pricing, Usage

from ._prefix_cache import PrefixCache, cache_kwarg, output_cache
from ._protocol import BackendError, Capabilities, GenerateRequest, GenerateResult, MissingExtraError, TokenLogprob
from ._tgi import chatml_prompt

__all__ = ["TransformersBackend"]

_Pending = tuple[GenerateRequest, "asyncio.Future[GenerateResult]"]


class TransformersBackend:
    name = "transformers"

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str | None = None,
        max_batch_size: int = 8,
        batch_wait_s: float = 0.005,
        max_padding: float | Literal["auto"] | None = "auto",
        prefix_cache: bool = True,
        pricing: Pricing | None = None,
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise MissingExtraError("TransformersBackend", "local") from None
        self.model = str(model_path)
        self.pricing = pricing
        self.capabilities = Capabilities(structured_output=False, logprobs=True)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        # A .gguf file loads (de-quantised) through gguf_file=; see judgegraph.pretrained.
        folder, gguf = pretrained_source(model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(folder, **gguf)
        self.tokenizer.padding_side = "left"  # decoder-only batching pads on the left
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **gguf)
        self._model = model.to(self.device)
        self._model.eval()
        # Prompt plus output must fit the model's context; a request that does
        # not fails alone and says so (running it would pad its whole batch and
        # give a silently degraded answer past the trained positions).
        self.max_context: int | None = getattr(self._model.config, "max_position_embeddings", None)
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        # A gathered batch is split (prompts sorted by length) where padding
        # to the longest would add more than this share of the real prompt
        # tokens; None never splits. "auto": 0.25 on CPU, where the prompt pass
        # dominates; never on GPU, where decoding steps dominate and a second
        # call would repeat them.
        if max_padding == "auto":
            max_padding = None if self.device.startswith("cuda") else 0.25
        if max_padding is not None and max_padding < 0:
            raise ValueError(f"max_padding must be >= 0 or None, got {max_padding}")
        self.max_padding: float | None = max_padding
        # Off only to compare against: a model whose cache cannot be repeated
        # per row stops using it by itself (see PrefixCache._build).
        self.prefix_cache: PrefixCache | None = PrefixCache(self._model, device=self.device) if prefix_cache else None
        self._cache_kw = cache_kwarg(self._model)
        self.batches_run = 0  # gathered batches; observable, for tests and benchmarks
        self.generate_calls = 0  # model.generate calls those batches were run as
        # One computation at a time: generation and value scoring share the
        # cores, and running both at once only makes each slower.
        self._compute = threading.Lock()
        self._digit_ids: Any = None
        self._queue: asyncio.Queue[_Pending] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.model!r}, device={self.device!r})"

    # Constructor arguments that cannot change an answer (every other one
    # changes identity()).
    IDENTITY_EXCLUDED: ClassVar[Mapping[str, str]] = {
        "max_batch_size": "how calls are gathered",
        "batch_wait_s": "how calls are gathered",
        "max_padding": "how a gathered batch is split",
        "prefix_cache": "a cached prompt head, computed once",
        "pricing": "cost only",
    }

    def identity(self) -> dict[str, JSONValue]:
        """The model folder (a relative path names different folders from
        different places) and the device, which sets the dtype. Batching and
        the prefix cache change speed, not answers."""
        path = Path(self.model)
        return {"server": f"local:{path.resolve() if path.exists() else self.model}", "device": self.device}

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        if self.max_context is not None:
            n = len(self.tokenizer(self._prompt(request))["input_ids"])
            if n + request.max_tokens > self.max_context:
                raise BackendError(
                    f"prompt is {n} tokens, plus max_tokens {request.max_tokens}: over "
                    f"{self.model}'s context of {self.max_context} tokens"
                )
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            self._loop, self._queue = loop, asyncio.Queue()
            self._worker = loop.create_task(self._drain())
        assert self._queue is not None
        fut: asyncio.Future[GenerateResult] = loop.create_future()
        await self._queue.put((request, fut))
        return await fut

    async def _drain(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            batch = [await queue.get()]
            # Calls already waiting join at once, whatever the clock says: a batch
            # gathered from calls made together never depends on how fast this
            # process was scheduled. Only further company is waited for.
            while len(batch) < self.max_batch_size and not queue.empty():
                batch.append(queue.get_nowait())
            deadline = time.perf_counter() + self.batch_wait_s
            while len(batch) < self.max_batch_size:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), left))
                except TimeoutError:
                    break
            started = time.perf_counter()
            try:
                results = await asyncio.to_thread(self._run_batch, [r for r, _ in batch])
            except Exception as exc:  # a failed batch fails its callers, not the worker
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            latency = time.perf_counter() - started
            for (_, fut), res in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(
                        GenerateResult(res.text, res.model, res.usage, res.tokens, res.finish_reason, 1, latency)
                    )

    def _prompt(self, request: GenerateRequest) -> str:
        msgs = [{"role": m.role, "content": m.content} for m in request.messages]
        if getattr(self.tokenizer, "chat_template", None):
            out = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            return str(out)
        return chatml_prompt(request.messages)

    async def avalue_logprobs(self, request: GenerateRequest, prefix: str, values: Sequence[str]) -> list[float]:
        """log P(each value's tokens, then a token that does not start with a
        digit | prompt + ``prefix``): the exact score distribution on scales
        whose values span several tokens ("10")."""
        return await asyncio.to_thread(self._value_logprobs, self._prompt(request) + prefix, list(values))

    def _value_logprobs(self, context: str, values: list[str]) -> list[float]:
        import torch

        tok = self.tokenizer
        seqs = [list(tok(context + v)["input_ids"]) for v in values]
        # Tokenised with the value, so a space merged into the first digit
        # (" 1") splits the same way it would in generation.
        common = min(len(s) for s in seqs) - 1
        for i in range(common):
            if len({s[i] for s in seqs}) > 1:
                common = i
                break
        with self._compute, torch.inference_mode():
            digits = self._digit_mask()
            start, cached = self._head([seqs[0][:common]])
            head = self._model(
                input_ids=torch.tensor([seqs[0][start:common]], device=self.device), use_cache=True, **cached
            )
            first = head.logits[0, -1].float().log_softmax(-1)
            out: list[float] = []
            for seq in seqs:
                rest = seq[common:]
                step = self._model(
                    input_ids=torch.tensor([rest], device=self.device),
                    use_cache=True,
                    **{self._cache_kw: copy.deepcopy(output_cache(head))},
                )
                lps = step.logits[0].float().log_softmax(-1)
                total = float(first[rest[0]]) + sum(float(lps[j - 1, rest[j]]) for j in range(1, len(rest)))
                ends = 1.0 - float(lps[-1].exp()[digits].sum())
                out.append(total + float(torch.tensor(max(ends, 1e-30)).log()))
        return out

    def _head(self, seqs: list[list[int]]) -> tuple[int, dict[str, Any]]:
        """Where these prompts' own computation starts, and the ``generate`` /
        ``forward`` keyword with a private copy of the cached head before it."""
        if self.prefix_cache is None:
            return 0, {}
        n, cache = self.prefix_cache.head_for(seqs)
        if cache is None:
            return 0, {}
        return n, {self._cache_kw: PrefixCache.copy_for(cache, len(seqs))}

    def _digit_mask(self) -> Any:
        """Ids of the tokens whose text starts with a digit (they continue a number)."""
        if self._digit_ids is None:
            import torch

            pieces = self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))])
            self._digit_ids = torch.tensor(
                [i for i, p in enumerate(pieces) if re.match(r"\d", p)], dtype=torch.long, device=self.device
            )
        return self._digit_ids

    def _run_batch(self, requests: list[GenerateRequest]) -> list[GenerateResult]:
        with self._compute:
            return self._run_batch_locked(requests)

    def _run_batch_locked(self, requests: list[GenerateRequest]) -> list[GenerateResult]:
        self.batches_run += 1
        seqs = [list(ids) for ids in self.tokenizer([self._prompt(r) for r in requests])["input_ids"]]
        done: dict[int, GenerateResult] = {}
        for group in self._groups([len(s) for s in seqs]):
            outs = self._generate([requests[i] for i in group], [seqs[i] for i in group])
            done.update(zip(group, outs, strict=True))
        return [done[i] for i in range(len(requests))]

    def _groups(self, lengths: list[int]) -> list[list[int]]:
        """Indices of one gathered batch, grouped into ``generate`` calls:
        ascending by prompt length, a new call starting where padding to the
        newcomer's length would exceed ``max_padding`` of the real tokens."""
        if self.max_padding is None or len(lengths) < 2:
            return [list(range(len(lengths)))]
        groups: list[list[int]] = []
        current: list[int] = []
        real = 0
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            n = lengths[i]  # the longest so far: the group would pad to it
            if current and (len(current) + 1) * n > (1 + self.max_padding) * (real + n):
                groups.append(current)
                current, real = [], 0
            current.append(i)
            real += n
        groups.append(current)
        return groups

    def _generate(self, requests: list[GenerateRequest], seqs: list[list[int]]) -> list[GenerateResult]:
        import torch

        self.generate_calls += 1
        tok = self.tokenizer
        start, cached = self._head(seqs)
        # [cached head][left padding][rest of the prompt]: padding sits after
        # the head, and positions come from the mask, so each prompt's tokens
        # keep the positions they have unpadded.
        width = max(len(s) for s in seqs) - start
        pad = tok.pad_token_id
        rows = [s[:start] + [pad] * (width + start - len(s)) + s[start:] for s in seqs]
        masks = [[1] * start + [0] * (width + start - len(s)) + [1] * (len(s) - start) for s in seqs]
        enc = {
            "input_ids": torch.tensor(rows, device=self.device),
            "attention_mask": torch.tensor(masks, device=self.device),
        }
        max_new = max(r.max_tokens for r in requests)
        temperature = max(r.temperature for r in requests)
        gen_kwargs: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            gen_kwargs = {"do_sample": True, "temperature": temperature}
        with torch.inference_mode():
            out = self._model.generate(
                **enc,
                max_new_tokens=max_new,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=tok.pad_token_id,
                **cached,
                **gen_kwargs,
            )
        prompt_len = enc["input_ids"].shape[1]
        # (steps, batch, vocab) -> log-probabilities per step
        logprobs = torch.stack(out.scores, dim=1).float().log_softmax(-1)
        results = []
        for i, req in enumerate(requests):
            results.append(
                self._one(req, out.sequences[i, prompt_len:], logprobs[i], int(enc["attention_mask"][i].sum()))
            )
        return results

    def _one(self, req: GenerateRequest, ids: Any, logprobs: Any, n_prompt: int) -> GenerateResult:
        tok = self.tokenizer
        stop_ids = {tok.eos_token_id, tok.pad_token_id}
        ids_list: list[int] = []
        finish = "length"
        for t in ids.tolist()[: req.max_tokens]:
            if t in stop_ids:
                finish = "stop"
                break
            ids_list.append(t)
        # Token texts by incremental decoding, so multi-byte characters that
        # span tokens still add up to the decoded string.
        texts: list[str] = []
        prev = ""
        for k in range(len(ids_list)):
            cur = str(tok.decode(ids_list[: k + 1], skip_special_tokens=True))
            texts.append(cur[len(prev) :])
            prev = cur
        text = prev
        for s in req.stop:
            cut = text.find(s)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        tokens = None
        if req.logprobs:
            kept, pos = [], 0
            k_top = max(req.top_logprobs, 1)
            for k, piece in enumerate(texts):
                if pos >= len(text):
                    break
                row = logprobs[k]
                top_v, top_i = row.topk(k_top)
                alts = tuple((str(tok.decode([int(j)])), float(v)) for v, j in zip(top_v, top_i, strict=True))
                kept.append(TokenLogprob(piece, float(row[ids_list[k]]), alts))
                pos += len(piece)
            tokens = tuple(kept)
        usage = Usage(prompt_tokens=n_prompt, completion_tokens=len(ids_list))
        return GenerateResult(text, self.model, usage, tokens, finish)
