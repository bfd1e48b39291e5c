"""A tiny DeepSeek-OCR folder for vLLM's dummy loader: config and tokenizer, no weights.

vLLM's `DeepseekOCRForCausalLM` builds its vision encoders at full size
whatever the config says (SAM ViT-B and CLIP-L, 24 layers 1024 wide; about
400M parameters) and takes the 1024 px global view, the 640 px tiles and so
the image token counts from module constants. Only the projector and the
DeepSeek-V2 MoE language model follow config.json, so only they can be tiny.
A loadable checkpoint would still carry the 400M vision parameters (1.6 GB in
float32), too much to build or keep for a test; the tests therefore run this
architecture with `load_format="dummy"`: vLLM fills every weight with small
random values instead of reading safetensors. The processor, the image
tokens, the vision encoders, the projector, the MoE routing and experts, the
sampler and the repetition guard all run; the weight names are not checked.

config.json has the published keys (`language_config`, `projector_config`,
`vision_config`, `tile_tag`, `global_view_pos`, `candidate_resolutions`), only
the language model shrunk: hidden 64 in 2 heads of 32 (vLLM's CPU attention
needs head_dim >= 32), 2 layers, the first dense and the second MoE with 4
routed experts (top 2) and 1 shared, no MLA, as DeepSeek-OCR has none. The
tokenizer is a byte-level BPE trained here holding DeepSeek-OCR's special
tokens (<image>, <|grounding|>, <|ref|>, <|det|>, ...).
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB_SIZE = 640  # at most: the BPE merges the corpus allows, plus the tokens below
HIDDEN = 64
BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
PAD = "<\uff5c\u2581pad\u2581\uff5c>"
SPECIAL_TOKENS = [BOS, EOS, PAD, "<image>", "<|grounding|>", "<|ref|>", "<|/ref|>", "<|det|>"]
SPECIAL_TOKENS += ["<|/det|>", "<td>", "</td>"]

CORPUS = [
    "Convert the document to markdown. Free OCR.",
    "Transcribe the provided document image into a clean Markdown format, preserving "
    "the natural reading order.",
    "Invoice number 2041 was issued on the third of March to Harbour Supplies Ltd.",
    "Table 3 lists the quarterly revenue by region: north, south, east and west.",
    "The total amount due is four hundred and twelve euros, payable within thirty days.",
]


def build_tokenizer(target: Path) -> None:
    from tiny_tokenizer import train_byte_level_bpe
    from transformers import PreTrainedTokenizerFast

    tokenizer = train_byte_level_bpe(CORPUS, VOCAB_SIZE, SPECIAL_TOKENS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, pad_token=PAD
    )
    fast.save_pretrained(target)
    # As published: DeepSeek-OCR names the Llama tokenizer class, and vLLM's
    # DeepSeek-OCR processor accepts only that one.
    config_path = target / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "LlamaTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2))


def build_tiny_deepseek_ocr(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    build_tokenizer(target)
    from transformers import AutoTokenizer

    vocab_size = len(AutoTokenizer.from_pretrained(target))
    language = {
        "architectures": ["DeepseekV2ForCausalLM"],
        "bos_token_id": 0,
        "eos_token_id": 1,
        "first_k_dense_replace": 1,
        "hidden_size": HIDDEN,
        "intermediate_size": 128,
        "kv_lora_rank": None,
        "lm_head": True,
        "max_position_embeddings": 8192,
        "moe_intermediate_size": 32,
        "n_group": 1,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_attention_heads": 2,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "q_lora_rank": None,
        "qk_nope_head_dim": 0,
        "qk_rope_head_dim": 0,
        "rm_head": False,
        "topk_group": 1,
        "topk_method": "greedy",
        "torch_dtype": "float32",
        "use_mla": False,
        "v_head_dim": 0,
        "vocab_size": vocab_size,
    }
    config = {
        "architectures": ["DeepseekOCRForCausalLM"],
        "model_type": "deepseek_vl_v2",
        "candidate_resolutions": [[1024, 1024]],
        "global_view_pos": "head",
        "tile_tag": "2D",
        "language_config": language,
        # SAM's 1024 and CLIP's 1024 channels, concatenated, into the language model.
        "projector_config": {
            "input_dim": 2048,
            "model_type": "mlp_projector",
            "n_embed": HIDDEN,
            "projector_type": "linear",
        },
        # Read by nothing in vLLM (the encoders are fixed); kept as published.
        "vision_config": {
            "image_size": 1024,
            "mlp_ratio": 3.7362,
            "model_name": "deeplip_b_l",
            "model_type": "vision",
            "width": {
                "clip-l-14-224": {"heads": 16, "image_size": 224, "layers": 24, "patch_size": 14},
                "sam_vit_b": {
                    "downsample_channels": [512, 1024],
                    "global_attn_indexes": [2, 5, 8, 11],
                    "heads": 12,
                    "layers": 12,
                    "width": 768,
                },
            },
        },
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "float32",
        "vocab_size": vocab_size,
    }
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target
