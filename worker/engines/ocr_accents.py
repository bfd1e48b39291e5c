"""No accents the page does not have: rapidocr's recogniser, decoded with doubt for accents.

rapidocr 3.10 ships one recogniser, PP-OCRv6 small, a multilingual model (its `en`,
`de` and `fr` settings all load the same file). On clean scans it reads accents right;
on noisy ones it puts accents on plain letters ("ánd", "véndors", "PÉRMISSI0N"). At each
such frame the plain letter is close behind: measured on noisy English scans, the
invented accent had 0.4-0.9 of the probability and its plain letter 0.02-0.48, where a
real accent (German and French scans, clean, noisy, JPEG, photographed) had 0.97-1.0
and its plain letter under 0.01. So an accented letter is read only when it beats its
plain letter many times over; otherwise the plain letter takes both shares.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

# An accent must have this many times its plain letter's probability at its frame.
ACCENT_OVER_PLAIN = 50.0


def plain_letter(character: str) -> str | None:
    """The letter without its marks when `character` is a Latin letter with diacritics."""
    if len(character) != 1 or not character.isalpha() or character.isascii():
        return None
    base = unicodedata.normalize("NFD", character)[0]
    return base if base.isascii() and base.isalpha() else None


class AccentPairs:
    """The accented letters of the recogniser's alphabet, each with its plain letter."""

    def __init__(self, alphabet: Sequence[str]) -> None:
        index = {character: position for position, character in enumerate(alphabet)}
        # plain_of[i] is the plain letter's index for accented letter i, else -1.
        self.plain_of = np.full(len(alphabet), -1, dtype=np.int64)
        for position, character in enumerate(alphabet):
            base = plain_letter(character)
            if base is not None and base in index:
                self.plain_of[position] = index[base]

    def settle(self, probabilities: np.ndarray) -> np.ndarray:
        """`probabilities` (batch, frames, alphabet), changed in place: where an accented
        letter is read with less than ACCENT_OVER_PLAIN times its plain letter's
        probability, the plain letter takes both shares. Only the frames an accent wins
        are looked at, a few in a thousand."""
        best = probabilities.argmax(axis=2)
        plain = self.plain_of[best]
        batch, frame = np.nonzero(plain >= 0)
        if batch.size == 0:
            return probabilities
        accented, plain = best[batch, frame], plain[batch, frame]
        p_accented = probabilities[batch, frame, accented]
        p_plain = probabilities[batch, frame, plain]
        doubtful = p_accented < ACCENT_OVER_PLAIN * p_plain
        batch, frame = batch[doubtful], frame[doubtful]
        probabilities[batch, frame, plain[doubtful]] += p_accented[doubtful]
        probabilities[batch, frame, accented[doubtful]] = 0.0
        return probabilities


def doubt_accents(recogniser: Any) -> None:
    """Makes a rapidocr TextRecognizer decode with `AccentPairs.settle` first."""
    decode = recogniser.postprocess_op
    pairs = AccentPairs(decode.character)
    original = type(decode).__call__

    class _Settled(type(decode)):  # type: ignore[misc]
        def __call__(self, preds: np.ndarray, *args: Any, **kwargs: Any) -> Any:
            return original(self, pairs.settle(preds), *args, **kwargs)

    decode.__class__ = _Settled
