"""Every engine, declared once.

An engine is its module under worker/engines/ and one entry in ENGINES: its name, whether
it runs on a CPU or a GPU, whether its model may forbid commercial use, the queues its
pages wait in, the resolution it reads pages at, the licence of its model, and how to
build it. The API's engine choices, the settings' allowed values, the queue a page is
published to, the licence checks at submit and at worker start, and the command line's
choices are all read from here.

What needs the engine's code or configuration is a dotted path, "module:attribute",
resolved by worker.engines.registry: this module (and the API, which reads it) never
imports an engine or its models.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pagemill.domain import LicenseUse, Stage

# The CPU engines read pages at 150 dpi: 10 pt body text is about 21 px high,
# where rapidocr's recogniser reads well, and an A4 page stays under 2.2 megapixels.
CPU_ENGINE_RENDER_DPI = 150

# A job's engine choice that is not an engine: each page routed by worker.engines.router.
AUTO = "auto"


class EngineKind(StrEnum):
    cpu = "cpu"
    gpu = "gpu"


@dataclass(frozen=True)
class QueueFamily:
    """The stages (queue names before the deployment's prefix) an engine's pages wait in."""

    stage: str
    # Where commercial pages of a licence-gated engine wait instead: only workers whose
    # licence basis permits commercial use consume it, so a commercial page can never be
    # picked up by a worker that may not process it.
    commercial_stage: str | None = None

    @property
    def stages(self) -> tuple[str, ...]:
        return (
            (self.stage,) if self.commercial_stage is None else (self.stage, self.commercial_stage)
        )


CPU_OCR_QUEUES = QueueFamily(Stage.ocr.value)
GPU_OCR_QUEUES = QueueFamily("ocr-gpu", commercial_stage="ocr-gpu-commercial")


@dataclass(frozen=True)
class LicenceBasis:
    """Under which licence an engine's model may be used."""

    model: str
    model_license: str  # SPDX identifier
    model_permits_commercial: bool


@dataclass(frozen=True)
class EngineSpec:
    name: str
    kind: EngineKind
    # False for the one engine that reads the PDF's text layer and never the pixels.
    reads_pixels: bool
    # Its model may forbid commercial use: commercial pages need a licensed worker.
    licence_gated: bool
    queues: QueueFamily
    # Dots per inch, or "module:function" giving it from the engine's configuration.
    render_dpi: int | str
    # The model's licence, or "module:function" giving it from the engine's configuration.
    licence: LicenceBasis | str
    # "module:callable" that builds the engine, loading its models.
    factory: str

    def __post_init__(self) -> None:
        if self.licence_gated and self.queues.commercial_stage is None:
            raise ValueError(f"{self.name} is licence-gated: its queues need a commercial stage")


ENGINES: tuple[EngineSpec, ...] = (
    EngineSpec(
        name="textlayer",
        kind=EngineKind.cpu,
        reads_pixels=False,
        licence_gated=False,
        queues=CPU_OCR_QUEUES,
        render_dpi=CPU_ENGINE_RENDER_DPI,
        # The text layer is read by PyMuPDF's own code and layout models.
        licence=LicenceBasis("pymupdf4llm (PyMuPDF 2.0)", "AGPL-3.0-or-later", True),
        factory="worker.engines.textlayer:TextLayerEngine",
    ),
    EngineSpec(
        name="rapidocr",
        kind=EngineKind.cpu,
        reads_pixels=True,
        licence_gated=False,
        queues=CPU_OCR_QUEUES,
        render_dpi=CPU_ENGINE_RENDER_DPI,
        # rapidocr and its bundled PP-OCR models are Apache-2.0.
        licence=LicenceBasis("rapidocr 3.10.0 PP-OCR", "Apache-2.0", True),
        factory="worker.engines.rapidocr:RapidOcrEngine",
    ),
    EngineSpec(
        name="vllm",
        kind=EngineKind.gpu,
        reads_pixels=True,
        licence_gated=True,
        queues=GPU_OCR_QUEUES,
        # Both follow the model profile PAGEMILL_VLLM_PROFILE names.
        render_dpi="worker.engines.vllm.profiles:configured_render_dpi",
        licence="worker.engines.vllm.profiles:configured_licence",
        factory="worker.engines.vllm.engine:VllmEngine",
    ),
)
# The OCR engine `auto` sends pages without a usable text layer to, unless configured.
DEFAULT_OCR_ENGINE = "rapidocr"

BY_NAME: dict[str, EngineSpec] = {spec.name: spec for spec in ENGINES}
ENGINE_NAMES = tuple(BY_NAME)
# What a job may ask for.
ENGINE_CHOICES = (AUTO, *ENGINE_NAMES)
CPU_ENGINES = tuple(spec.name for spec in ENGINES if spec.kind is EngineKind.cpu)
GPU_ENGINES = frozenset(spec.name for spec in ENGINES if spec.kind is EngineKind.gpu)
# Engines that read pixels; a job that names one has every page read by it.
OCR_ENGINES = tuple(spec.name for spec in ENGINES if spec.reads_pixels)
CPU_OCR_ENGINES = tuple(name for name in OCR_ENGINES if name in CPU_ENGINES)
(TEXT_LAYER_ENGINE,) = (spec.name for spec in ENGINES if not spec.reads_pixels)
# What runs with no GPU and no worker registry: a deployment's default engine, and the
# command line's in-process pipeline.
LOCAL_ENGINE_CHOICES = (AUTO, *CPU_ENGINES)
LICENCE_GATED_ENGINES = frozenset(spec.name for spec in ENGINES if spec.licence_gated)
QUEUE_FAMILIES: tuple[QueueFamily, ...] = tuple(dict.fromkeys(spec.queues for spec in ENGINES))
# The stages only a worker with a commercial licence basis may consume.
COMMERCIAL_STAGES = tuple(
    family.commercial_stage for family in QUEUE_FAMILIES if family.commercial_stage is not None
)
GPU_STAGES = tuple(
    dict.fromkeys(
        stage for spec in ENGINES if spec.name in GPU_ENGINES for stage in spec.queues.stages
    )
)

if DEFAULT_OCR_ENGINE not in CPU_OCR_ENGINES:
    raise ValueError(f"the default OCR engine {DEFAULT_OCR_ENGINE!r} must be a CPU OCR engine")


def engine_spec(name: str) -> EngineSpec:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}") from None


def ocr_stage(engine: str | None, license_use: str | None) -> str:
    """The stage an OCR page of this engine is published to; None is the CPU OCR stage."""
    queues = CPU_OCR_QUEUES if engine not in BY_NAME else BY_NAME[engine].queues
    if queues.commercial_stage is not None and license_use == LicenseUse.commercial:
        return queues.commercial_stage
    return queues.stage


def describe_choices(choices: tuple[str, ...]) -> str:
    """'auto, textlayer, rapidocr or vllm (GPU)': choices as the API and CLI help say them."""
    named = [f"{name} (GPU)" if name in GPU_ENGINES else name for name in choices]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"
