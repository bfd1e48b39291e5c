"""The byte-level BPE tokenizer every tiny checkpoint of tests/gpu is built with:
trained here on a small corpus, so nothing is downloaded. Each model wraps it with
its own special tokens and tokenizer class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Sentences of the kind the tiny models are asked to write: every tokenizer
# learns their words, so the text a test plants decodes without byte soup.
DOCUMENT_SENTENCES = [
    "Invoice number 2041 was issued on the third of March to Harbour Supplies Ltd.",
    "The total amount due is four hundred and twelve euros, payable within thirty days.",
    "Table 3 lists the quarterly revenue by region: north, south, east and west.",
    "Each page of the scanned report is transcribed into Markdown in reading order.",
    "Figures and charts keep their captions; headers and footers are left out.",
    "The committee met on Tuesday and approved the budget for the next fiscal year.",
    "Section 2.1 describes the method; section 2.2 reports the results in detail.",
    "Payment terms: net thirty. Late payments accrue interest at two percent a month.",
    "The warehouse inventory counted 1,250 pallets, 38 of them damaged in transit.",
    "Signed by the director of operations and witnessed by the company secretary.",
]


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
