"""Loop detection after the fact, and the retry decision.

vLLM refuses custom logits processors together with speculative decoding, so
the n-gram guard cannot run on the fast path. Instead the fast path runs
unguarded, and a page whose output was truncated (finish_reason "length") or
repeats an n-gram too often is retried once on a non-speculative path with
the guard on. Loops are rare, so the retry costs little on average; greedy
decoding makes the speculative output identical to the plain one, so only the
looping pages change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worker.engines.vllm.profiles import RepetitionSpec


@dataclass(frozen=True)
class LoopVerdict:
    looping: bool
    reasons: tuple[str, ...] = ()  # "length", "repeated_ngram"
    max_ngram_repeats: int = 0  # occurrences of the most repeated n-gram

    def as_dict(self) -> dict[str, Any]:
        return {
            "looping": self.looping,
            "reasons": list(self.reasons),
            "max_ngram_repeats": self.max_ngram_repeats,
        }


def max_ngram_repeats(
    token_ids: Sequence[int], n: int, ignore: frozenset[int] = frozenset()
) -> int:
    """How often the most frequent n-gram occurs (overlaps count).

    N-grams made only of `ignore` tokens are skipped: table cell tags repeat
    in any real table and are no sign of a loop.
    """
    if n < 1 or len(token_ids) < n:
        return 0
    counts: Counter[tuple[int, ...]] = Counter()
    for start in range(len(token_ids) - n + 1):
        gram = tuple(token_ids[start : start + n])
        if ignore and all(token in ignore for token in gram):
            continue
        counts[gram] += 1
    return max(counts.values(), default=0)


def detect_loop(
    token_ids: Sequence[int], finish_reason: str | None, spec: RepetitionSpec
) -> LoopVerdict:
    reasons: list[str] = []
    if finish_reason == "length":
        # Ran out of tokens: on a document page that almost always means the
        # decoder got stuck, and a cut page is wrong either way.
        reasons.append("length")
    repeats = max_ngram_repeats(
        token_ids, spec.detect_ngram_size, frozenset(spec.whitelist_token_ids)
    )
    if repeats >= spec.detect_min_repeats:
        reasons.append("repeated_ngram")
    return LoopVerdict(looping=bool(reasons), reasons=tuple(reasons), max_ngram_repeats=repeats)
