"""The byte-level BPE tokenizer every tiny checkpoint of tests/gpu is built with:
trained here on a small corpus, so nothing is downloaded. Each model wraps it with
its own special tokens and tokenizer class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def train_byte_level_bpe(
    corpus: Sequence[str],
    vocab_size: int,
    special_tokens: Sequence[str],
    unk_token: str | None = None,
) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=unk_token))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    # Four passes over the corpus: enough merges for every word the tests plant.
    tokenizer.train_from_iterator(list(corpus) * 4, trainer=trainer)
    return tokenizer
