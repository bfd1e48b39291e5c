"""Turns a page into the prompt vLLM takes, per the profile."""

from __future__ import annotations

import io
from typing import Any

from worker.engines.base import PageInput
from worker.engines.vllm.profiles import ImageSpec, ModelProfile


def build_prompt(profile: ModelProfile, page: PageInput) -> dict[str, Any]:
    """vLLM's prompt dict: the text, plus the page image for image models."""
    if profile.input_kind == "text":
        # Text models stand in for OCR models where no image path can run
        # (the CPU test build has no torchvision); the page number makes the
        # prompt, and so the output, differ from page to page.
        return {"prompt": profile.prompt.format(page_number=page.facts.number)}
    prompt: dict[str, Any] = {
        "prompt": profile.prompt,
        "multi_modal_data": {"image": prepare_image(page.require_image(), profile.image)},
    }
    if profile.image.mm_processor_kwargs:
        prompt["mm_processor_kwargs"] = dict(profile.image.mm_processor_kwargs)
    return prompt


def prepare_image(png: bytes, spec: ImageSpec) -> Any:
    """Decode the rendered page; downscale it if the model wants fewer pixels.

    Returns a PIL image in RGB (vision encoders take three channels; rendered
    pages may be grey or carry alpha).
    """
    from PIL import Image

    with Image.open(io.BytesIO(png)) as source:
        image = source.convert("RGB")
    longest = max(image.size)
    if spec.longest_side_px is not None and longest > spec.longest_side_px:
        scale = spec.longest_side_px / longest
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    return image
