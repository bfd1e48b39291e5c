"""Builds a tiny Qwen2.5-VL checkpoint (olmOCR-2's architecture) on disk, no download.

The folder holds what a published Qwen2.5-VL folder holds: config.json written
by transformers' own `Qwen2_5_VLConfig` (only the sizes shrunk), safetensors
with the weight names `Qwen2_5_VLForConditionalGeneration` saves, the image
processor's preprocessor_config.json (the published pixel limits, unshrunk, so
a page gets as many image tokens as on olmOCR-2), a video processor, and a
byte-level BPE tokenizer trained here that holds Qwen2.5-VL's special tokens
(<|im_start|>, <|vision_start|>, <|image_pad|>, ...). vLLM then runs it through
its own Qwen2.5-VL processor and model class: image resizing to 28 px
multiples, the vision transformer with window attention, the patch merger and
M-RoPE.

The weights are random, except that the language model's answer is planted,
as in gpu_tiny_model.py: token embeddings of unit scale dominate the residual
stream, and each planted lm_head row points along the embedding of the token
that precedes it, so greedy decoding (and olmOCR-2's temperature 0.1) follows
a chain from the prompt's last token to <|im_end|>. The chain is an olmOCR
answer, YAML front matter above the page text; its front-matter lines are
single tokens of this vocabulary, because a chain cannot visit a token twice.
The answer is the same for every page; the image shows in the prompt tokens.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

SEED = 0
VOCAB_SIZE = 1024  # BPE merges plus the special and answer tokens below
TEXT_HIDDEN = 128  # vLLM's CPU attention needs head_dim >= 32: 4 heads of 32
VISION_HIDDEN = 64
PATCH_SIZE = 14
MERGE_SIZE = 2
PLANT_GAIN = 1.0

# Qwen2.5-VL's added tokens, in the published order.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
FRONT_MATTER_TOKENS = [
    "---\nprimary_language: en",
    "\nis_rotation_valid: True",
    "\nrotation_correction: 0",
    "\nis_table: False",
    "\nis_diagram: False",
    "\n---\n",
]
PAGE_TEXT = "Quarterly revenue report"
FRONT_MATTER = {
    "primary_language": "en",
    "is_rotation_valid": "True",
    "rotation_correction": "0",
    "is_table": "False",
    "is_diagram": "False",
}

CORPUS = [
    "Attached is one page of a document that you must process.",
    "Just return the plain text representation of this document as if you were reading it.",
    "Convert equations to LateX and tables to HTML. Label figures with markdown syntax.",
    "Return your output as markdown, with a front matter section on top.",
    "You are a helpful assistant.",
    "Quarterly revenue report for the northern region, by month and product line.",
    "Invoice number 2041 was issued on the third of March to Harbour Supplies Ltd.",
    "The total amount due is four hundred and twelve euros, payable within thirty days.",
]


@dataclass(frozen=True)
class TinyQwenVl:
    path: Path
    image_token_id: int
    eos_token_id: int
    answer: str  # the raw text the planted chain decodes to


def build_tokenizer(target: Path) -> object:
    from tiny_tokenizer import train_byte_level_bpe
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tokenizer = train_byte_level_bpe(CORPUS, VOCAB_SIZE - len(FRONT_MATTER_TOKENS), SPECIAL_TOKENS)
    tokenizer.add_tokens([AddedToken(t, normalized=False) for t in FRONT_MATTER_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens={
            "image_token": "<|image_pad|>",
            "video_token": "<|video_pad|>",
            "vision_bos_token": "<|vision_start|>",
            "vision_eos_token": "<|vision_end|>",
        },
    )
    fast.save_pretrained(target)
    return fast


def build_tiny_qwen_vl(target: Path, prompt: str) -> TinyQwenVl:
    """Write a planted tiny Qwen2.5-VL whose answer to `prompt` is an olmOCR page."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    target.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(target)
    ids = tokenizer.convert_tokens_to_ids  # type: ignore[attr-defined]
    encode = tokenizer.encode  # type: ignore[attr-defined]
    eos = ids("<|im_end|>")

    answer_ids = [ids(t) for t in FRONT_MATTER_TOKENS] + list(
        encode(PAGE_TEXT, add_special_tokens=False)
    )
    last_prompt_token = encode(prompt, add_special_tokens=False)[-1]
    chain = [last_prompt_token, *answer_ids, eos]
    if len(set(chain)) != len(chain):
        raise ValueError("the planted answer visits a token twice")

    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),  # type: ignore[arg-type]
            "hidden_size": TEXT_HIDDEN,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 32768,
            "max_window_layers": 2,
            # M-RoPE splits each head's 16 rotary pairs into time, height and
            # width, as Qwen2.5-VL's [16, 24, 24] splits its 64.
            "rope_parameters": {
                "rope_type": "default",
                "mrope_section": [4, 6, 6],
                "rope_theta": 1000000.0,
            },
            "bos_token_id": ids("<|endoftext|>"),
            "eos_token_id": eos,
            "pad_token_id": ids("<|endoftext|>"),
            "tie_word_embeddings": False,
        },
        vision_config={
            "depth": 2,
            "hidden_size": VISION_HIDDEN,
            "intermediate_size": 128,
            "num_heads": 2,
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [1],
            "out_hidden_size": TEXT_HIDDEN,
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(SEED)
    model = Qwen2_5_VLForConditionalGeneration(config)
    with torch.no_grad():
        embed = model.get_input_embeddings().weight
        embed.normal_(0.0, 1.0)
        unit = embed / embed.norm(dim=1, keepdim=True)
        head = model.get_output_embeddings().weight
        for source, following in itertools.pairwise(chain):
            head[following] += PLANT_GAIN * unit[source]
    model.generation_config.eos_token_id = [eos, ids("<|endoftext|>")]
    model.generation_config.pad_token_id = ids("<|endoftext|>")
    model.save_pretrained(target, safe_serialization=True)

    # The published processor's settings: patches of 14 px merged 2 x 2, so
    # one image token per 28 x 28 px, between 4 and 16,384 tokens an image.
    image_processor = Qwen2VLImageProcessor(
        min_pixels=3136,
        max_pixels=12845056,
        patch_size=PATCH_SIZE,
        merge_size=MERGE_SIZE,
        temporal_patch_size=2,
    )
    processor = Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(),
    )
    processor.save_pretrained(target)
    answer = tokenizer.decode(answer_ids)  # type: ignore[attr-defined]
    return TinyQwenVl(target, ids("<|image_pad|>"), eos, answer)


def image_tokens_for(width: int, height: int) -> int:
    """Image tokens Qwen2.5-VL's processor gives a width x height image.

    Its smart_resize rounds each side to a multiple of 28 px (patch 14 x merge 2)
    within the pixel limits, then one token stands for each 28 x 28 px.
    """
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    factor = PATCH_SIZE * MERGE_SIZE
    resized_h, resized_w = smart_resize(
        height, width, factor=factor, min_pixels=3136, max_pixels=12845056
    )
    return (resized_h // factor) * (resized_w // factor)
