"""How a job and its pages are described to callers: in manifest.json and over HTTP."""

from __future__ import annotations

from typing import Any

import orjson

from pagemill.db.models import Job, Page
from pagemill.jobs.metadata import renderable_metadata
from pagemill.quality.score import Verdict, job_score, job_verdict


def build_manifest(job: Job, pages: list[Page]) -> dict[str, Any]:
    return {
        "job_id": str(job.id),
        "source": {
            "filename": job.source_filename,
            "kind": job.source_kind.value if job.source_kind else None,
            "url": job.source_url,
            "sha256": job.source_sha256,
            "pages": job.document_pages,
            "extraction_restricted": job.source_extraction_restricted,
        },
        "license_use": job.license_use.value,
        "metadata": renderable_metadata(job.caller_metadata),
        "furniture": job.furniture,
        "quality": job_quality(pages),
        "pages": [page_summary(page) for page in pages],
    }


def manifest_json(manifest: dict[str, Any]) -> bytes:
    """manifest.json's bytes: indented for people, UTF-8 unescaped."""
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)


def page_summary(page: Page) -> dict[str, Any]:
    """Per-page facts, as both manifest.json and the job status report them."""
    return {
        "number": page.number,
        "status": page.status.value,
        "attempts": page.attempts,
        "engine": page.engine,
        "engine_reason": page.engine_reason,
        "device_kind": page.device_kind,
        "wall_seconds": page.wall_seconds,
        "device_seconds": page.device_seconds,
        # The old name of device_seconds, kept for one release.
        "compute_seconds": page.device_seconds,
        "cost_usd": str(page.cost_usd) if page.cost_usd is not None else None,
        "output_chars": page.output_chars,
        # Null for a page read from its text layer: prepare renders only what OCR reads.
        "image": None
        if page.image_width_px is None
        else {
            "width_px": page.image_width_px,
            "height_px": page.image_height_px,
            "dpi": page.image_dpi,
        },
        "text_layer_chars": page.text_chars,
        "tokens": {"prompt": page.prompt_tokens, "output": page.output_tokens},
        "speculation": {
            "steps": page.spec_steps,
            "draft_tokens": page.spec_draft_tokens,
            "accepted_tokens": page.spec_accepted_tokens,
        },
        "repetition_retried": page.repetition_retried,
        "licence": {
            "use": page.license_use.value if page.license_use else None,
            "model": page.model,
            "model_license": page.model_license,
            "deployment_license_reference": page.deployment_license_reference,
            "permits_commercial": page.basis_permits_commercial,
        },
        "worker_id": page.worker_id,
        "quality": {
            "verdict": page.verdict,
            "score": page.quality_score,
            "repair": page.repair,
            "blank": page.blank,
            "checks": page.quality_checks,
        },
        # Running headers, footers and page numbers, and whether each is in document.md.
        "furniture": page.furniture,
        "error": page.error,
    }


def job_quality(pages: list[Page]) -> dict[str, Any]:
    """The job's mean page score and its worst page's verdict."""
    scored = [page for page in pages if page.quality_score is not None]
    verdicts = [Verdict(page.verdict) for page in scored if page.verdict]
    return {
        "score": job_score(page.quality_score for page in scored if page.quality_score is not None),
        "verdict": job_verdict(verdicts).value if verdicts else None,
        "pages_by_verdict": {
            verdict.value: sum(1 for v in verdicts if v is verdict) for verdict in Verdict
        },
    }
