"""Builds a tiny Llama checkpoint and BPE tokenizer on disk, no download.

vLLM's CPU build serves it like any Hugging Face folder, so the real adapter,
bridge and accounting run end to end in seconds. The shapes are the smallest
vLLM's CPU attention accepts (head_dim >= 32).

A purely random model loops on every prompt and never says end-of-sequence,
which would send every page down the repetition retry. So the weights stay
random except for planted transitions: embeddings of unit scale dominate the
residual stream (the random layers add a few percent), and each lm_head row we
plant points along the embedding of the token that should precede it. Greedy
decoding then follows a chain we chose:

    last prompt token -> page's own tokens -> the prompt's first tokens
    (shared by every page, so ngram prompt lookup finds and accepts them)
    -> a shared tail -> </s>

and a loop prompt enters a short cycle instead, runs to max_tokens and repeats
n-grams: the case the repetition guard exists for.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path

from tiny_tokenizer import DOCUMENT_SENTENCES

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]
VOCAB_SIZE = 512
HIDDEN = 128
SEED = 0
PLANT_GAIN = 1.0  # lm_head row norm; the planted logit is about sqrt(HIDDEN) x this
SHARED_PREFIX_TOKENS = 8  # prompt tokens every page's output walks through
TAIL_TOKENS = 6
CYCLE_TOKENS = 3

# Enough text for a 512-token byte-level BPE to learn real merges.
CORPUS = DOCUMENT_SENTENCES


@dataclass(frozen=True)
class TinyModelPlan:
    """What was planted, so tests can check the engine against it."""

    path: Path
    eos_token_id: int
    expected_token_ids: dict[str, list[int]]  # prompt -> greedy output, </s> included
    loop_prompts: tuple[str, ...]
    cycle_token_ids: tuple[int, ...]


def build_tokenizer(target: Path) -> object:
    from tiny_tokenizer import train_byte_level_bpe
    from transformers import PreTrainedTokenizerFast

    tokenizer = train_byte_level_bpe(CORPUS, VOCAB_SIZE, SPECIAL_TOKENS, unk_token="<unk>")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    fast.save_pretrained(target)
    return fast


def build_tiny_llama(
    target: Path,
    *,
    prompts: list[str],
    loop_prompts: list[str],
    max_tokens: int,
) -> TinyModelPlan:
    """Write the tokenizer and a planted LlamaForCausalLM to `target`.

    Every prompt must end in a different token (greedy decoding here follows
    the last token), and all prompts must start with the same
    SHARED_PREFIX_TOKENS tokens, none repeated.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    target.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(target)
    encode = tokenizer.encode  # type: ignore[attr-defined]
    eos = int(tokenizer.eos_token_id)  # type: ignore[attr-defined]

    encoded = {p: list(encode(p, add_special_tokens=False)) for p in prompts + loop_prompts}
    shared = encoded[prompts[0]][:SHARED_PREFIX_TOKENS]
    if len(set(shared)) != len(shared):
        raise ValueError("the shared prompt prefix repeats a token")
    for prompt, ids in encoded.items():
        if ids[:SHARED_PREFIX_TOKENS] != shared:
            raise ValueError(f"{prompt!r} does not start with the shared prefix")
    last_tokens = [ids[-1] for ids in encoded.values()]
    if len(set(last_tokens)) != len(last_tokens) or set(last_tokens) & set(shared):
        raise ValueError("prompts must end in distinct tokens outside the shared prefix")

    used = {tok for ids in encoded.values() for tok in ids}
    free = [t for t in range(len(SPECIAL_TOKENS), VOCAB_SIZE) if t not in used]
    random.Random(SEED).shuffle(free)

    successor: dict[int, int] = {}
    tail = [free.pop() for _ in range(TAIL_TOKENS)]
    _plant_chain(successor, [*shared, *tail, eos])
    expected: dict[str, list[int]] = {}
    for number, prompt in enumerate(prompts):
        # Pages differ in how many own tokens they emit before the shared part,
        # so outputs (and token counts) differ from page to page.
        own = [free.pop() for _ in range(2 + number % 5)]
        chain = [encoded[prompt][-1], *own, *shared, *tail, eos]
        _plant_chain(successor, chain)
        expected[prompt] = chain[1:]
    cycle = [free.pop() for _ in range(CYCLE_TOKENS)]
    for prompt in loop_prompts:
        _plant_chain(successor, [encoded[prompt][-1], cycle[0]])
        walk = [cycle[i % CYCLE_TOKENS] for i in range(max_tokens)]
        expected[prompt] = walk
    _plant_chain(successor, [*cycle, cycle[0]])

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,  # type: ignore[attr-defined]
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,  # type: ignore[attr-defined]
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)  # float32, torch's default
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed.normal_(0.0, 1.0)
        unit = embed / embed.norm(dim=1, keepdim=True)
        head = model.lm_head.weight
        for source, following in successor.items():
            head[following] += PLANT_GAIN * unit[source]
    model.save_pretrained(target, safe_serialization=True)
    return TinyModelPlan(
        path=target,
        eos_token_id=eos,
        expected_token_ids=expected,
        loop_prompts=tuple(loop_prompts),
        cycle_token_ids=tuple(cycle),
    )


def make_noisy_draft(source: Path, target: Path, *, noise_std_ratio: float) -> Path:
    """Copy `source` with Gaussian noise on every 2-D weight.

    The noise is that share of each weight's own standard deviation: a draft
    model that agrees with the target only part of the time, so acceptance is
    neither 0 nor 100%.
    """
    import shutil

    import torch
    from transformers import LlamaForCausalLM

    target.mkdir(parents=True, exist_ok=True)
    model = LlamaForCausalLM.from_pretrained(source, torch_dtype=torch.float32)
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() == 2:
                noise = torch.randn(weight.shape, generator=generator)
                weight.add_(noise * weight.std() * noise_std_ratio)
    model.save_pretrained(target, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (source / name).exists():
            shutil.copy(source / name, target / name)
    return target


def _plant_chain(successor: dict[int, int], chain: list[int]) -> None:
    for here, following in itertools.pairwise(chain):
        if successor.get(here, following) != following:
            raise ValueError(f"token {here} already leads elsewhere")
        successor[here] = following


# The prompt of the tiny text profile. It must start with the same tokens for
# every page (they are the shared part of every planted chain) and end in a
# different token per page: pages 1..9 end in their digit, page 10 in "0".
PROMPT = "Document transcription task, plain text only. Transcribe page {page_number}"
NORMAL_PAGES = range(1, 10)
LOOP_PAGE = 10
MAX_TOKENS = 48
DRAFT_NOISE = 2.5  # share of each weight's std; accepts about 65% of drafts here


def build_for_tests(target: Path) -> TinyModelPlan:
    return build_tiny_llama(
        target,
        prompts=[PROMPT.format(page_number=n) for n in NORMAL_PAGES],
        loop_prompts=[PROMPT.format(page_number=LOOP_PAGE)],
        max_tokens=MAX_TOKENS,
    )


def tiny_profile(speculative_config: dict[str, object] | None) -> object:
    """A text profile for the tiny model, run on vLLM's CPU build."""
    from worker.engines.vllm.profiles import (
        PAGEMILL_NGRAM_GUARD,
        ModelProfile,
        RepetitionSpec,
        SamplingSpec,
    )

    return ModelProfile(
        name="tiny-llama",
        weights_subdir="target",
        source="built by tests/gpu/gpu_tiny_model.py",
        licence="MIT",
        commercial_use_permitted=True,
        input_kind="text",
        prompt=PROMPT,
        render_dpi=72,
        sampling=SamplingSpec(temperature=0.0, max_tokens=MAX_TOKENS),
        speculative_config=speculative_config,
        # The guard bans any repeated 3-gram within the whole (48-token)
        # output, and detection counts 3-grams, so a guarded output can be
        # checked for having no repeat at all.
        repetition=RepetitionSpec(
            detect_ngram_size=3,
            detect_min_repeats=3,
            guard_logits_processor=PAGEMILL_NGRAM_GUARD,
            guard_ngram_size=3,
            guard_window_size=MAX_TOKENS,
        ),
        # vLLM's CPU build: no CUDA graphs, fp32 so greedy decoding is exact.
        engine_kwargs={"enforce_eager": True, "dtype": "float32"},
    )
