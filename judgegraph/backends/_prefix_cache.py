"""Reuse of the attention cache of a prompt head that many judge prompts share.

A judge's prompts begin alike: the chat template's header, the system message
and the template's opening sentences are the same for every item, and items on
one question share the question too. On CPU the prompt pass is most of a short
judgement's cost, so computing that head once and starting each ``generate``
from a copy of its cache saves its share of every prompt.

The shared head is found from the token ids themselves: the longest common
prefix of the prompts of one call, or of a lone prompt and the one before it.
Prompts are tokenised whole and then split, so the model sees exactly the ids
it would see without the cache.
"""

from __future__ import annotations

import copy
import inspect
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

__all__ = ["PrefixCache", "cache_kwarg"]


def cache_kwarg(model: Any) -> str:
    """The name the model's ``forward`` takes its KV cache under: transformers
    renamed ``past_key_values`` to ``cache`` (5.2x), the old name is deprecated."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def output_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token id lists."""
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs):
            return i
    return n


class PrefixCache:
    """A few cached prompt heads (least recently used dropped first).

    ``min_tokens``: a head shorter than this is not worth a cache entry.
    Every prompt keeps at least one token outside the head, since ``generate``
    needs an input to continue from.
    """

    def __init__(self, model: Any, *, device: str, min_tokens: int = 32, capacity: int = 4) -> None:
        self._model = model
        self._device = device
        self.min_tokens = min_tokens
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._last: list[int] | None = None
        self.usable = True
        self.hits = 0  # prompts started from a cached head; for tests and benchmarks
        self.tokens_saved = 0

    def head_for(self, seqs: Sequence[list[int]]) -> tuple[int, Any | None]:
        """(head length, cache of one sequence) to start these prompts from;
        (0, None) when no head is cached or worth caching. Call under the
        backend's compute lock: building a head runs the model."""
        if not self.usable:
            return 0, None
        limit = min(len(s) for s in seqs) - 1
        best: tuple[int, ...] | None = None
        for key in self._entries:
            if len(key) <= limit and (best is None or len(key) > len(best)):
                if all(tuple(s[: len(key)]) == key for s in seqs):
                    best = key
        # A longer head shared by this call (or by a lone prompt and its
        # predecessor) than the best cached one is built and kept.
        pool = list(seqs) if len(seqs) > 1 or self._last is None else [seqs[0], self._last]
        self._last = list(seqs[-1])
        # A lone first prompt shares nothing yet: its whole text is no head.
        shared = min(common_prefix(pool), limit) if len(pool) > 1 else 0
        if shared >= self.min_tokens and (best is None or shared > len(best) + self.min_tokens):
            built = self._build(tuple(seqs[0][:shared]))
            if built is None:
                return 0, None
            best = tuple(seqs[0][:shared])
            self._entries[best] = built
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        if best is None:
            return 0, None
        self._entries.move_to_end(best)
        self.hits += len(seqs)
        self.tokens_saved += len(best) * len(seqs)
        return len(best), self._entries[best]

    def _build(self, head: tuple[int, ...]) -> Any:
        import torch

        ids = torch.tensor([list(head)], device=self._device)
        with torch.inference_mode():
            out = self._model(input_ids=ids, use_cache=True)
        cache = output_cache(out)
        # A model whose cache cannot be repeated per row (recurrent state, a
        # custom class) runs without the prefix cache from here on: it only
        # ever saves time, it never changes an output.
        if cache is None or not hasattr(cache, "batch_repeat_interleave"):
            self.usable = False
            self._entries.clear()
            return None
        return cache

    @staticmethod
    def copy_for(cache: Any, batch: int) -> Any:
        """A private copy of a one-sequence cache, repeated to ``batch`` rows
        (``generate`` appends to the cache it is given)."""
        mine = copy.deepcopy(cache)
        if batch > 1:
            mine.batch_repeat_interleave(batch)
        return mine
