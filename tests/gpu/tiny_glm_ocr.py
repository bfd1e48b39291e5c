"""Builds a tiny GLM-OCR checkpoint (GlmOcrForConditionalGeneration) with an MTP layer.

The folder holds what zai-org/GLM-OCR's folder holds, shrunk: config.json
written by transformers' own `GlmOcrConfig` (with `num_nextn_predict_layers`),
safetensors with the weight names the HF class saves, the MTP layer appended
by hand as the next layer index (the HF class has no module for it and drops
it), the Glm46V processor files with GLM-OCR's pixel limits (unshrunk, so a
page gets as many image tokens as on the real model), and a byte-level BPE
tokenizer trained here that holds GLM's special tokens. vLLM then runs it
through its own GLM-OCR processor, vision tower, M-RoPE language model and
`glm_ocr_mtp` draft.

The weights are random, except that the answer is planted, as in
gpu_tiny_model.py: token embeddings dominate the residual stream (GLM's
sandwich norms after attention and MLP are scaled down so the random layers
add a few percent), and each planted lm_head row points along the embedding
of the token before it, so greedy decoding follows a chain of distinct tokens
(TEST_ANSWER_TOKENS, or BENCH_ANSWER_TOKENS for the benchmark) from the
prompt's last token to <|endoftext|>. Every page gets the same answer; the
image shows in the prompt tokens.

The MTP layer comes in three kinds (MTP_KINDS):

* "random": HF's own initialisation, as an untrained draft: it accepts
  almost nothing.
* "follow": rigged to predict what the target will say next: eh_proj passes
  the input token's embedding through and the layer's block is nearly
  silent, so the shared head (the planted lm_head) names the planted
  successor. It accepts almost every draft.
* "noisy": "follow" with its block's output norms turned up, so its random
  attention and MLP drown the planted signal part of the time: acceptance
  in between, which makes the accounting testable away from 0 and 100 %.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tiny_tokenizer import DOCUMENT_SENTENCES

MtpKind = Literal["random", "follow", "noisy"]
MTP_KINDS: tuple[MtpKind, ...] = ("random", "follow", "noisy")

SEED = 0
VOCAB_SIZE = 1024
TEXT_HIDDEN = 128  # 4 heads of 32: vLLM's CPU attention needs head_dim >= 32
TEXT_LAYERS = 2
TEXT_HEADS = 4
TEXT_KV_HEADS = 2
VISION_HIDDEN = 64
VISION_HEADS = 2
PATCH_SIZE = 14
MERGE_SIZE = 2
# vLLM sizes the vision merger's MLP from the text intermediate_size, and the
# merger's output is the text embedding: so intermediate = 3 x out_hidden and
# out_hidden = the text hidden size, as on the published model (1024 / 4608
# there would not divide; GLM-OCR's real sizes are 1536 out, 4608 merger).
TEXT_INTERMEDIATE = 3 * TEXT_HIDDEN
TEST_ANSWER_TOKENS = 64  # the tests' pages: enough steps to measure acceptance
BENCH_ANSWER_TOKENS = 300  # the benchmark's: a fixed few hundred tokens, so engine time dominates
LAYER_NORM_GAIN = 0.05  # post-attention / post-MLP norm weights: layers add ~5 %
NOISY_MTP_GAIN = 2.5  # the noisy MTP's block norms; tuned to accept part of the drafts
PLANT_GAIN = 1.0

# GLM-OCR's image processor limits (pixels, not edges): shortest_edge is the
# minimum area, longest_edge the maximum, as in its preprocessor_config.json.
MIN_PIXELS = 12544
MAX_PIXELS = 9633792

# GLM's added tokens (GLM-4 / GLM-V), in the published order.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|image|>",
    "<|video|>",
    "<|pad|>",
]

CORPUS = [
    "Text Recognition: transcribe the document image in reading order.",
    "Table Recognition and Formula Recognition return HTML tables and LaTeX.",
    *DOCUMENT_SENTENCES,
    "Quarterly revenue report for the northern region, by month and product line.",
    "Shipping address, billing address, purchase order, delivery note and receipt.",
]


@dataclass(frozen=True)
class TinyGlmOcr:
    """What was built, so tests can check the engine against it."""

    path: Path  # the target checkpoint, with the MTP layer of kind `mtp_kind`
    mtp_kind: MtpKind
    answer_token_ids: tuple[int, ...]  # the greedy answer, <|endoftext|> last
    eos_token_id: int
    image_token_id: int

    def with_mtp(self, kind: MtpKind) -> TinyGlmOcr:
        """The sibling folder whose MTP layer is of another kind (same target)."""
        return TinyGlmOcr(
            self.path.parent / kind,
            kind,
            self.answer_token_ids,
            self.eos_token_id,
            self.image_token_id,
        )


def build_tokenizer(target: Path) -> object:
    from tiny_tokenizer import train_byte_level_bpe
    from transformers import PreTrainedTokenizerFast

    tokenizer = train_byte_level_bpe(CORPUS, VOCAB_SIZE, SPECIAL_TOKENS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    fast.save_pretrained(target)
    return fast


def _save_processor(target: Path, tokenizer: object) -> None:
    from transformers import Glm46VImageProcessor, Glm46VProcessor, Glm46VVideoProcessor

    size = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
    image_processor = Glm46VImageProcessor(
        size=size, patch_size=PATCH_SIZE, temporal_patch_size=2, merge_size=MERGE_SIZE
    )
    video_processor = Glm46VVideoProcessor(
        patch_size=PATCH_SIZE, temporal_patch_size=2, merge_size=MERGE_SIZE
    )
    processor = Glm46VProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
    )
    processor.save_pretrained(target)


def build_tiny_glm_ocr(root: Path, *, answer_tokens: int = TEST_ANSWER_TOKENS) -> TinyGlmOcr:
    """Write the checkpoint once per MTP kind under `root` (root/<kind>).

    The target model is the same in all; only the MTP layer differs. Greedy
    decoding follows the planted chain from the "\n" every GLM-OCR prompt
    ends with (after <|assistant|>).
    """
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import GlmOcrConfig, GlmOcrForConditionalGeneration

    first = root / MTP_KINDS[0]
    first.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(first)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}  # type: ignore[attr-defined]
    eos = ids["<|endoftext|>"]
    start = tokenizer.encode("\n", add_special_tokens=False)  # type: ignore[attr-defined]
    assert len(start) == 1, "a byte-level BPE has every byte as a token"

    special = set(ids.values())
    free = [t for t in range(VOCAB_SIZE) if t not in special and t != start[0]]
    random.Random(SEED).shuffle(free)
    answer = [*free[:answer_tokens], eos]
    chain = [start[0], *answer]

    torch.manual_seed(SEED)
    head_dim = TEXT_HIDDEN // TEXT_HEADS
    config = GlmOcrConfig(
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": TEXT_HIDDEN,
            "intermediate_size": TEXT_INTERMEDIATE,
            "num_hidden_layers": TEXT_LAYERS,
            "num_attention_heads": TEXT_HEADS,
            "num_key_value_heads": TEXT_KV_HEADS,
            "max_position_embeddings": 16384,
            # GLM-OCR's M-RoPE, its sections scaled to head_dim / 2.
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16],
                "partial_rotary_factor": 1.0,
            },
            "eos_token_id": eos,
            "pad_token_id": eos,
        },
        vision_config={
            "depth": 2,
            "hidden_size": VISION_HIDDEN,
            "num_heads": VISION_HEADS,
            "intermediate_size": 2 * VISION_HIDDEN,
            "out_hidden_size": TEXT_HIDDEN,
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": 2,
        },
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"],
        eos_token_id=eos,
        pad_token_id=eos,
    )
    # Read by vLLM to build the glm_ocr_mtp draft; transformers keeps it as is.
    config.text_config.num_nextn_predict_layers = 1
    model = GlmOcrForConditionalGeneration(config)  # float32, torch's default
    language = model.model.language_model
    with torch.no_grad():
        embed = language.embed_tokens.weight
        embed.normal_(0.0, 1.0)
        unit = embed / embed.norm(dim=1, keepdim=True)
        for layer in language.layers:
            layer.post_self_attn_layernorm.weight.fill_(LAYER_NORM_GAIN)
            layer.post_mlp_layernorm.weight.fill_(LAYER_NORM_GAIN)
        head = model.lm_head.weight
        for here, following in itertools.pairwise(chain):
            head[following] += PLANT_GAIN * unit[here]
    model.save_pretrained(first, safe_serialization=True)
    _save_processor(first, tokenizer)
    (first / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [eos], "pad_token_id": eos}, indent=2)
    )

    weights_file = first / "model.safetensors"
    target_weights = load_file(weights_file)
    for kind in MTP_KINDS:
        folder = root / kind
        if folder != first:
            shutil.copytree(first, folder, dirs_exist_ok=True)
        mtp = _mtp_layer(kind, target_weights, TEXT_LAYERS)
        save_file(
            {**target_weights, **mtp}, folder / "model.safetensors", metadata={"format": "pt"}
        )
    return TinyGlmOcr(first, MTP_KINDS[0], tuple(answer), eos, ids["<|image|>"])


def _mtp_layer(kind: MtpKind, weights: dict[str, Any], index: int) -> dict[str, Any]:
    """The MTP layer's tensors, named as the published checkpoint names them.

    `model.language_model.layers.<index>.` + the decoder block's own names
    (self_attn.*, mlp.*, the four norms) and the MTP parts: eh_proj (input
    embedding and previous hidden state, concatenated, to hidden), enorm,
    hnorm, and shared_head.norm / shared_head.head.
    """
    import torch as t

    generator = t.Generator().manual_seed(SEED + 1 + MTP_KINDS.index(kind))
    prefix = "model.language_model.layers."
    template = f"{prefix}0."
    layer: dict[str, t.Tensor] = {}
    for name, tensor in weights.items():  # the block: shaped like a decoder layer
        if name.startswith(template):
            assert isinstance(tensor, t.Tensor)
            fresh = t.randn(tensor.shape, generator=generator) * 0.02
            if name.endswith("layernorm.weight"):
                fresh = t.ones(tensor.shape)
            layer[f"{prefix}{index}." + name[len(template) :]] = fresh
    hidden = TEXT_HIDDEN
    own = f"{prefix}{index}."
    lm_head = weights["lm_head.weight"]
    assert isinstance(lm_head, t.Tensor)
    layer[own + "enorm.weight"] = t.ones(hidden)
    layer[own + "hnorm.weight"] = t.ones(hidden)
    layer[own + "shared_head.norm.weight"] = t.ones(hidden)
    layer[own + "shared_head.head.weight"] = lm_head.clone()
    if kind == "random":
        layer[own + "eh_proj.weight"] = t.randn((hidden, 2 * hidden), generator=generator) * 0.02
        return layer
    # Pass the input token's embedding through, drop the previous hidden state.
    layer[own + "eh_proj.weight"] = t.cat([t.eye(hidden), t.zeros(hidden, hidden)], dim=1)
    gain = LAYER_NORM_GAIN if kind == "follow" else NOISY_MTP_GAIN
    for norm in ("post_self_attn_layernorm", "post_mlp_layernorm"):
        layer[own + f"{norm}.weight"] = t.full((hidden,), gain)
    if kind == "noisy":
        # Random weights large enough that the block's output varies a lot
        # from token to token, not only in scale.
        for name in list(layer):
            if name.endswith(("_proj.weight", "gate_up_proj.weight")) and "eh_proj" not in name:
                layer[name] = t.randn(layer[name].shape, generator=generator) * 0.2
    return layer
