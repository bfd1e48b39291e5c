"""Each engine is declared once, in pagemill.engines.catalog, and everything else reads
that declaration: the registry builds from it, the API offers its choices, pages are
queued by its families, and submit and worker start check its licence-gated set."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from pagemill import queue
from pagemill.domain import LicenseUse
from pagemill.engines import catalog
from pagemill.engines.catalog import EngineKind, LicenceBasis
from pagemill.jobs import service
from pagemill.settings import Settings
from tests.support.services import ROOT
from worker import registration
from worker.engines.base import Engine
from worker.engines.registry import build_engine, licence_basis, render_dpi_for

# Where an engine's name may be written: the catalogue, and the engine's own code.
CATALOGUE = Path("pagemill/engines/catalog.py")
# Names that are also Python distributions, listed as such in a worker's version report.
DISTRIBUTION_NAMES = Counter(
    {("worker/registration.py", "rapidocr"): 1, ("worker/registration.py", "vllm"): 1}
)


@pytest.mark.parametrize("name", catalog.ENGINE_NAMES)
def test_every_entry_builds_as_declared(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = catalog.engine_spec(name)
    if spec.kind is EngineKind.gpu:
        # Built, not started: vLLM is imported and loads its weights on the first page,
        # and there is no GPU here. A profile whose licence permits commercial use needs no opt-in.
        monkeypatch.setenv("PAGEMILL_VLLM_PROFILE", "glm-ocr")
    engine = build_engine(name)
    assert isinstance(engine, Engine)
    assert engine.name == name
    assert engine.render_dpi == render_dpi_for(name)
    assert isinstance(licence_basis(name), LicenceBasis)
    if spec.kind is EngineKind.gpu:
        assert licence_basis(name).model == "glm-ocr"


def test_an_unknown_engine_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown engine 'tesseract'"):
        build_engine("tesseract")
    with pytest.raises(ValueError, match="unknown engine 'tesseract'"):
        render_dpi_for("tesseract")


def test_the_api_offers_the_catalogue_choices() -> None:
    from api.app import create_app

    schema = create_app().openapi()
    form_ref = schema["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["multipart/form-data"][
        "schema"
    ]["$ref"]
    form = schema["components"]["schemas"][form_ref.rsplit("/", 1)[-1]]
    described = form["properties"]["engine"]["description"]
    assert described == "auto, textlayer, rapidocr or vllm (GPU)."
    assert described == f"{catalog.describe_choices(catalog.ENGINE_CHOICES)}."
    assert service.ENGINE_CHOICES is catalog.ENGINE_CHOICES
    assert service.LICENCE_GATED_ENGINES is catalog.LICENCE_GATED_ENGINES


@pytest.mark.parametrize("name", catalog.ENGINE_NAMES)
def test_pages_are_queued_by_the_engines_family(name: str) -> None:
    queues = catalog.engine_spec(name).queues
    commercial = queue.ocr_stage(name, LicenseUse.commercial)
    assert queue.ocr_stage(name, LicenseUse.non_commercial) == queues.stage
    assert commercial == (queues.commercial_stage or queues.stage)
    assert (commercial != queues.stage) == (name in catalog.LICENCE_GATED_ENGINES)


def test_the_queue_families_are_the_known_ones() -> None:
    assert queue.ocr_stage(None, None) == "ocr"
    assert catalog.ocr_stage("vllm", "commercial") == "ocr-gpu-commercial"
    assert catalog.ocr_stage("vllm", "non_commercial") == "ocr-gpu"
    assert catalog.GPU_STAGES == ("ocr-gpu", "ocr-gpu-commercial")
    assert catalog.COMMERCIAL_STAGES == ("ocr-gpu-commercial",)
    assert {"vllm"} == catalog.LICENCE_GATED_ENGINES


def test_a_worker_on_a_gpu_family_runs_that_engine() -> None:
    settings = Settings(queue_prefix="t-")
    for spec in catalog.ENGINES:
        consumed = [settings.queue(stage) for stage in spec.queues.stages]
        expected = spec.name if spec.kind is EngineKind.gpu else settings.ocr_engine
        assert registration.engine_for_queues(consumed, settings) == expected


def test_settings_take_only_engines_that_run_without_a_gpu() -> None:
    for name in catalog.ENGINE_CHOICES:
        if name in catalog.LOCAL_ENGINE_CHOICES:
            assert Settings(default_engine=name).default_engine == name
        else:
            with pytest.raises(ValidationError, match="must be one of auto, textlayer, rapidocr"):
                Settings(default_engine=name)
    for name in catalog.ENGINE_NAMES:
        if name in catalog.CPU_OCR_ENGINES:
            assert Settings(ocr_engine=name).ocr_engine == name
        else:
            with pytest.raises(ValidationError):
                Settings(ocr_engine=name)


def test_a_licence_gated_engine_needs_a_commercial_queue() -> None:
    with pytest.raises(ValueError, match="licence-gated"):
        catalog.EngineSpec(
            name="gated",
            kind=EngineKind.gpu,
            reads_pixels=True,
            licence_gated=True,
            queues=catalog.CPU_OCR_QUEUES,
            render_dpi=150,
            licence=LicenceBasis("m", "CC-BY-NC-4.0", False),
            factory="worker.engines.textlayer:TextLayerEngine",
        )


def engine_names_written(root: Path) -> Counter[tuple[str, str]]:
    """(file, engine name) for each string constant that is exactly an engine's name, in
    the code of the service's packages outside the catalogue and the engines' own code."""
    # An engine's module, or the whole package of an engine that has one of its own.
    own_code = {Path(spec.factory.partition(":")[0].replace(".", "/")) for spec in catalog.ENGINES}
    found: Counter[tuple[str, str]] = Counter()
    for package in ("api", "cli", "pagemill", "worker"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            if relative == CATALOGUE or any(
                relative.with_suffix("") == module
                or (module.parent.name != "engines" and relative.is_relative_to(module.parent))
                for module in own_code
            ):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in catalog.BY_NAME:
                    found[(str(relative), node.value)] += 1
    return found


def test_engine_names_are_written_only_in_the_catalogue() -> None:
    assert engine_names_written(ROOT) == DISTRIBUTION_NAMES


def test_the_scan_finds_a_name_written_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "form.py").write_text('ENGINES = ("auto", "vllm")\n')
    (tmp_path / "worker" / "engines").mkdir(parents=True)
    (tmp_path / "worker" / "engines" / "textlayer.py").write_text('name = "textlayer"\n')
    assert engine_names_written(tmp_path) == Counter({("api/form.py", "vllm"): 1})
