"""A no-repeat-n-gram logits processor for the guarded (non-speculative) path.

Same contract as DeepSeek-OCR's NGramPerReqLogitsProcessor, so profiles can
pick either through the same SamplingParams.extra_args: `ngram_size`,
`window_size`, `whitelist_token_ids`. A request without `ngram_size` is left
alone. The token that would complete an n-gram already produced within the
last `window_size` tokens is banned, which breaks a loop as it starts.

vLLM loads this class by name inside its engine (and refuses it when
speculative decoding is on), so this module imports vLLM and torch at the top
and nothing in pagemill imports it directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from vllm import SamplingParams  # type: ignore[import-not-found]
from vllm.v1.sample.logits_processor import (  # type: ignore[import-not-found]
    AdapterLogitsProcessor,
    RequestLogitsProcessor,
)


def banned_next_tokens(
    output_ids: list[int], ngram_size: int, window_size: int, whitelist: frozenset[int]
) -> set[int]:
    """Tokens that would repeat an n-gram seen in the last `window_size` tokens."""
    if ngram_size < 1 or len(output_ids) < ngram_size - 1:
        return set()
    if ngram_size == 1:
        recent = output_ids[-window_size:]
        return set(recent) - whitelist
    prefix = output_ids[len(output_ids) - (ngram_size - 1) :]
    first = max(0, len(output_ids) - window_size)
    last = len(output_ids) - ngram_size  # start of the newest complete n-gram
    banned: set[int] = set()
    for start in range(first, last + 1):
        # Cheap test on the token before the candidate before the full compare.
        if output_ids[start + ngram_size - 2] != prefix[-1]:
            continue
        if output_ids[start : start + ngram_size - 1] == prefix:
            banned.add(output_ids[start + ngram_size - 1])
    return banned - whitelist


class _RequestGuard:
    def __init__(self, ngram_size: int, window_size: int, whitelist: frozenset[int]) -> None:
        self.ngram_size = ngram_size
        self.window_size = window_size
        self.whitelist = whitelist

    def __call__(self, output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        banned = banned_next_tokens(output_ids, self.ngram_size, self.window_size, self.whitelist)
        if banned:
            logits[list(banned)] = float("-inf")
        return logits


class NoRepeatNGramLogitsProcessor(AdapterLogitsProcessor):  # type: ignore[misc]
    @classmethod
    def validate_params(cls, params: SamplingParams) -> None:
        args: dict[str, Any] = params.extra_args or {}
        size = args.get("ngram_size")
        if size is None:
            return
        window = args.get("window_size", 100)
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"ngram_size must be a positive integer, got {size!r}")
        if not isinstance(window, int) or window < size:
            raise ValueError(f"window_size must be an integer >= ngram_size, got {window!r}")
        if not isinstance(args.get("whitelist_token_ids", ()), Iterable):
            raise ValueError("whitelist_token_ids must be a list of token ids")

    def is_argmax_invariant(self) -> bool:
        # Banning the argmax changes the greedy choice: that is the point.
        return False

    def new_req_logits_processor(self, params: SamplingParams) -> RequestLogitsProcessor | None:
        args: dict[str, Any] = params.extra_args or {}
        size = args.get("ngram_size")
        if size is None:
            return None
        window = int(args.get("window_size", 100))
        whitelist = frozenset(int(t) for t in args.get("whitelist_token_ids") or ())
        return _RequestGuard(int(size), window, whitelist)
