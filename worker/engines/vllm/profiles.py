"""Model profiles: everything model-specific, as data.

The adapter is the same for every model; a profile says which weights, which
prompt, how the page image is prepared, how to sample, whether and how to
speculate, how to guard against loops, and under which licence the weights
may be used. Adding a model is adding an entry here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pagemill.engines.catalog import LicenceBasis

InputKind = Literal["image", "text"]
OutputFormat = Literal["markdown", "deepseek_grounding", "yaml_front_matter"]

# pagemill's own no-repeat-n-gram processor, for models without one of their own.
PAGEMILL_NGRAM_GUARD = "worker.engines.vllm.ngram_guard:NoRepeatNGramLogitsProcessor"
# DeepSeek-OCR's, shipped inside vLLM. Its module imports torchvision, which is
# fine on a GPU install and impossible on the CPU test install.
DEEPSEEK_NGRAM_GUARD = "vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"


@dataclass(frozen=True)
class ImageSpec:
    """How the rendered page becomes the model's image input."""

    longest_side_px: int | None = None  # downscale to this before sending; None: as rendered
    # What the model's own processor then does with it, for reference and the
    # bench report; vLLM's processor for the architecture applies it.
    base_view_px: int | None = None  # the global view
    tile_px: int | None = None  # local tiles cut from the full-resolution page
    max_tiles: int = 0
    mm_processor_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SamplingSpec:
    temperature: float = 0.0  # greedy: speculative output is then identical to plain
    max_tokens: int = 8192
    skip_special_tokens: bool = False
    stop_token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class RepetitionSpec:
    """Loop detection after the fact, and the guard used for the retry."""

    detect_ngram_size: int = 20  # tokens in an n-gram that counts as repeated
    detect_min_repeats: int = 4  # this many occurrences of one n-gram = a loop
    guard_logits_processor: str | None = PAGEMILL_NGRAM_GUARD
    guard_ngram_size: int = 30  # the guard bans a token completing a seen n-gram
    guard_window_size: int = 90  # ...seen within this many recent tokens
    whitelist_token_ids: tuple[int, ...] = ()  # tokens never banned nor counted

    def guard_extra_args(self) -> dict[str, Any]:
        """SamplingParams.extra_args that switch the guard on for one request."""
        return {
            "ngram_size": self.guard_ngram_size,
            "window_size": self.guard_window_size,
            "whitelist_token_ids": list(self.whitelist_token_ids),
        }


@dataclass(frozen=True)
class ModelProfile:
    name: str
    weights_subdir: str  # folder under VllmSettings.weights_dir
    source: str  # where the weights are published, for the operator
    licence: str  # SPDX identifier
    commercial_use_permitted: bool
    input_kind: InputKind
    # Raw prompt in the model's own format. Image profiles include the image
    # placeholder; text profiles may use {page_number}.
    prompt: str
    render_dpi: int
    image: ImageSpec = field(default_factory=ImageSpec)
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    speculative_config: dict[str, Any] | None = None
    repetition: RepetitionSpec = field(default_factory=RepetitionSpec)
    output_format: OutputFormat = "markdown"
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # extra AsyncEngineArgs

    def with_speculative_tokens(self, k: int) -> ModelProfile:
        if self.speculative_config is None:
            return self
        return replace(
            self, speculative_config={**self.speculative_config, "num_speculative_tokens": k}
        )


# DeepSeek-OCR's vLLM recipe: no prefix caching (every page image differs) and
# no multimodal processor cache (a page is seen once).
_DEEPSEEK_ENGINE_KWARGS: dict[str, Any] = {
    "enable_prefix_caching": False,
    "mm_processor_cache_gb": 0,
}
# Its repetition guard settings; 128821 and 128822 are <td> and </td>, which
# legitimately repeat in tables.
_DEEPSEEK_REPETITION = RepetitionSpec(
    detect_ngram_size=30,
    detect_min_repeats=4,
    guard_logits_processor=DEEPSEEK_NGRAM_GUARD,
    guard_ngram_size=30,
    guard_window_size=90,
    whitelist_token_ids=(128821, 128822),
)
# vLLM's DeepSeek-OCR processor: a 1024 px global view plus 640 px tiles
# (it allows 2 to 6; jina-ocr-v1's own processor allows up to 9).
_DEEPSEEK_IMAGE = ImageSpec(base_view_px=1024, tile_px=640, max_tiles=6)

JINA_OCR_V1 = ModelProfile(
    name="jina-ocr-v1",
    weights_subdir="jina-ocr-v1",
    source="jinaai/jina-ocr-v1",
    licence="CC-BY-NC-4.0",
    commercial_use_permitted=False,
    input_kind="image",
    # Prompt as given on a third-party model card; not confirmed by Jina.
    prompt=(
        "<image>\nTranscribe the provided document image into a clean Markdown "
        "format, preserving the natural reading order."
    ),
    render_dpi=144,  # an A4 page at 144 dpi is 1191 x 1684: a 2 x 3 grid of 640 px tiles
    image=_DEEPSEEK_IMAGE,
    sampling=SamplingSpec(temperature=0.0, max_tokens=8192),
    # FastMTP: one dense draft block applied recursively drafts 3 tokens; the
    # draft weights live in the same checkpoint, so no draft `model`. Needs
    # the model's registration plugin (see docs/gpu.md).
    speculative_config={"method": "mtp", "num_speculative_tokens": 3},
    # Same decoder as DeepSeek-OCR, so the same guard and (we assume) tokenizer.
    repetition=_DEEPSEEK_REPETITION,
    engine_kwargs=dict(_DEEPSEEK_ENGINE_KWARGS),
)

DEEPSEEK_OCR = ModelProfile(
    name="deepseek-ocr",
    weights_subdir="DeepSeek-OCR",
    source="deepseek-ai/DeepSeek-OCR",
    licence="MIT",
    commercial_use_permitted=True,
    input_kind="image",
    prompt="<image>\n<|grounding|>Convert the document to markdown.",
    render_dpi=144,
    image=_DEEPSEEK_IMAGE,
    sampling=SamplingSpec(temperature=0.0, max_tokens=8192),
    speculative_config=None,
    repetition=_DEEPSEEK_REPETITION,
    output_format="deepseek_grounding",
    engine_kwargs=dict(_DEEPSEEK_ENGINE_KWARGS),
)

OLMOCR_2 = ModelProfile(
    name="olmocr-2",
    weights_subdir="olmOCR-2-7B-1025-FP8",
    source="allenai/olmOCR-2-7B-1025-FP8",
    licence="Apache-2.0",
    commercial_use_permitted=True,
    input_kind="image",
    # Qwen2.5-VL chat format; the text is olmOCR's own v4 prompt, placed before
    # the image as olmOCR's pipeline does.
    prompt=(
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n"
        "Attached is one page of a document that you must process. Just return "
        "the plain text representation of this document as if you were reading "
        "it naturally. Convert equations to LateX and tables to HTML.\n"
        "If there are any figures or charts, label them with the following "
        "markdown syntax ![Alt text describing the contents of the figure]"
        "(page_startx_starty_width_height.png)\n"
        "Return your output as markdown, with a front matter section on top "
        "specifying values for the primary_language, is_rotation_valid, "
        "rotation_correction, is_table, and is_diagram parameters."
        "<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        "<|im_start|>assistant\n"
    ),
    render_dpi=120,  # then downscaled: olmOCR-2 was trained on 1288 px pages
    image=ImageSpec(longest_side_px=1288),
    # olmOCR's pipeline samples at 0.1; greedy would make retries pointless there.
    sampling=SamplingSpec(temperature=0.1, max_tokens=8000, skip_special_tokens=True),
    speculative_config=None,
    repetition=RepetitionSpec(detect_ngram_size=20, detect_min_repeats=4),
    output_format="yaml_front_matter",
    engine_kwargs={"limit_mm_per_prompt": {"image": 1}, "mm_processor_cache_gb": 0},
)

GLM_OCR = ModelProfile(
    name="glm-ocr",
    weights_subdir="GLM-OCR",
    source="zai-org/GLM-OCR",
    licence="MIT",  # as the model card states
    commercial_use_permitted=True,
    input_kind="image",
    # GLM-V's chat format with the image first and the card's "Text
    # Recognition:" task prompt, as vLLM's recipe sends it. Rendered by hand
    # from the GLM-V chat template; compare with the checkpoint's own
    # chat_template when the weights arrive.
    prompt=(
        "[gMASK]<sop><|user|>\n<|begin_of_image|><|image|><|end_of_image|>"
        "Text Recognition:<|assistant|>\n"
    ),
    # The processor resizes to multiples of 28 px between 12,544 and
    # 9,633,792 pixels (its preprocessor_config), so an A4 page at 144 dpi
    # (1191 x 1684) keeps its resolution: about 2,550 image tokens.
    render_dpi=144,
    image=ImageSpec(),
    sampling=SamplingSpec(temperature=0.0, max_tokens=8192),
    # GLM-OCR's built-in MTP layer; vLLM maps the architecture to its
    # glm_ocr_mtp draft. K=1 as in vLLM's recipe for this model.
    speculative_config={"method": "mtp", "num_speculative_tokens": 1},
    repetition=RepetitionSpec(detect_ngram_size=20, detect_min_repeats=4),
    # One page image per prompt and no video: vLLM then reserves and profiles
    # memory for neither a second image nor a video.
    engine_kwargs={"limit_mm_per_prompt": {"image": 1, "video": 0}, "mm_processor_cache_gb": 0},
)

PROFILES: dict[str, ModelProfile] = {
    p.name: p for p in (JINA_OCR_V1, DEEPSEEK_OCR, OLMOCR_2, GLM_OCR)
}


def get_profile(name: str) -> ModelProfile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown model profile {name!r} (known: {known})") from None


def configured_profile() -> ModelProfile:
    """The profile PAGEMILL_VLLM_PROFILE names."""
    from worker.engines.vllm.settings import VllmSettings

    return get_profile(VllmSettings().profile)


def configured_render_dpi() -> int:
    """The engine's render dpi in the catalogue (pagemill.engines.catalog)."""
    return configured_profile().render_dpi


def configured_licence() -> LicenceBasis:
    """The engine's licence in the catalogue (pagemill.engines.catalog)."""
    profile = configured_profile()
    return LicenceBasis(profile.name, profile.licence, profile.commercial_use_permitted)
