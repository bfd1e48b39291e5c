"""What an upload's inspection measures: a page's size as it will be rendered
(/UserUnit included) and every frame of a multi-image file, not only the first."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import pymupdf
import pytest
from PIL import Image

from pagemill.documents.inspect import DocumentRejected, inspect_untrusted
from pagemill.domain import SourceKind
from pagemill.settings import Settings
from pagemill.storage import JobKeys, ObjectStore
from tests.api.test_auth_and_input import count_rows, stored_objects
from worker.render import render_pages


def user_unit_pdf(side_pt: float, user_unit: float) -> bytes:
    document = pymupdf.open()
    page = document.new_page(width=side_pt, height=side_pt)
    page.insert_text((10, 20), "A page drawn in large units.", fontsize=8)
    document.xref_set_key(page.xref, "UserUnit", str(user_unit))
    return document.tobytes()


def multi_frame(format_: str, sizes: list[tuple[int, int]]) -> bytes:
    # One-bit frames compress to almost nothing, so a 400 Mpx frame costs a few KB.
    mode = "1" if format_ == "TIFF" else "RGB"
    options = {"compression": "group4"} if format_ == "TIFF" else {}
    first, *rest = [Image.new(mode, size, 1 if mode == "1" else (255, 255, 255)) for size in sizes]
    buffer = io.BytesIO()
    first.save(buffer, format=format_, save_all=True, append_images=rest, **options)
    return buffer.getvalue()


def inspect_bytes(tmp_path: Path, body: bytes, settings: Settings | None = None) -> object:
    path = tmp_path / "upload"
    path.write_bytes(body)
    return inspect_untrusted(path, settings or Settings())


def test_user_unit_scales_the_page_size(tmp_path: Path) -> None:
    # 14,000 units of 75 pt each: a page of over 1,000,000 pt a side.
    with pytest.raises(DocumentRejected) as rejected:
        inspect_bytes(tmp_path, user_unit_pdf(14_000, 75))
    assert rejected.value.code == "page_too_large"
    assert "1050000 x 1050000 points" in rejected.value.message


def test_a_user_unit_page_within_the_limit_is_accepted_and_renders_within_budget(
    tmp_path: Path,
) -> None:
    settings = Settings()
    body = user_unit_pdf(settings.max_page_side_pt / 75, 75)  # exactly the largest side
    info = inspect_bytes(tmp_path, body, settings)
    assert getattr(info, "page_count", None) == 1
    source = tmp_path / "largest.pdf"
    source.write_bytes(body)
    [page] = render_pages(source, SourceKind.pdf, [1], 200, settings.max_render_pixels)
    assert page.facts.width_pt == pytest.approx(settings.max_page_side_pt)
    assert page.image_width_px is not None and page.image_height_px is not None
    assert page.image_width_px * page.image_height_px <= settings.max_render_pixels
    # The image is the whole page at its stated resolution, not a corner of it.
    assert page.image_width_px == pytest.approx(page.facts.width_pt / 72 * page.image_dpi, abs=2)


def test_a_pixel_budget_too_small_for_the_largest_page_is_refused() -> None:
    # At 1 dpi a 14,400 pt page is 200 x 200 px: a smaller budget could not hold it.
    with pytest.raises(ValueError, match="MAX_RENDER_PIXELS"):
        Settings(max_page_side_pt=14_400, max_render_pixels=30_000)


@pytest.mark.parametrize("format_", ["TIFF", "MPO"])
def test_every_frame_is_checked_not_only_the_first(tmp_path: Path, format_: str) -> None:
    small_then_huge = [(100, 100), (20_000, 20_000) if format_ == "TIFF" else (12_000, 9_000)]
    with pytest.raises(DocumentRejected) as rejected:
        inspect_bytes(tmp_path, multi_frame(format_, small_then_huge), Settings())
    assert rejected.value.code == "image_too_large"
    assert "Page 2" in rejected.value.message


def test_frames_within_the_limit_are_pages(tmp_path: Path) -> None:
    info = inspect_bytes(tmp_path, multi_frame("TIFF", [(100, 100), (300, 200), (50, 80)]))
    assert getattr(info, "page_count", None) == 3


@pytest.mark.parametrize("format_", ["TIFF", "MPO", "WEBP", "PNG"])
def test_prepare_renders_every_frame_inspection_counted_at_its_own_size(
    tmp_path: Path, format_: str
) -> None:
    # Animated WebP and PNG frames share one canvas; TIFF and MPO frames each have theirs.
    varied = format_ in ("TIFF", "MPO")
    sizes = [(100, 80), (300, 200), (50, 90)] if varied else [(120, 90)] * 3
    frames = [Image.new("RGB", size, (80 * n, 200 - 60 * n, 40)) for n, size in enumerate(sizes)]
    source = tmp_path / "frames"
    frames[0].save(source, format=format_, save_all=True, append_images=frames[1:])
    info = inspect_untrusted(source, Settings())
    assert info.page_count == 3
    rendered = render_pages(source, info.kind, [1, 2, 3], 200, Settings().max_render_pixels)
    assert [(page.image_width_px, page.image_height_px) for page in rendered] == sizes


def test_the_api_refuses_them_and_stores_nothing(api: httpx.Client, s3: ObjectStore) -> None:
    before = stored_objects(s3)
    cases = [
        ("units.pdf", user_unit_pdf(14_000, 75), "page_too_large"),
        ("frames.tif", multi_frame("TIFF", [(100, 100), (20_000, 20_000)]), "image_too_large"),
    ]
    for name, body, code in cases:
        response = api.post("/v1/jobs", files={"file": (name, body)})
        assert response.status_code == 422, (name, response.text)
        assert response.json()["error"]["code"] == code
    assert count_rows("jobs") == 0
    assert stored_objects(s3) == before


def encrypted_pdf(user_password: str, permissions: int) -> bytes:
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), "The owner would rather this sentence stayed put.", fontsize=11)
    return document.tobytes(
        encryption=pymupdf.PDF_ENCRYPT_AES_256,
        owner_pw="owner-secret",
        user_pw=user_password,
        permissions=permissions,
    )


def test_a_pdf_that_needs_a_password_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentRejected) as rejected:
        inspect_bytes(tmp_path, encrypted_pdf("user-secret", -1))
    assert rejected.value.code == "encrypted_document"


@pytest.mark.parametrize(("permissions", "restricted"), [(0, True), (-1, False)])
def test_a_pdf_that_opens_without_a_password_is_accepted_and_its_restriction_known(
    tmp_path: Path, permissions: int, restricted: bool
) -> None:
    info = inspect_bytes(tmp_path, encrypted_pdf("", permissions))
    assert getattr(info, "page_count", None) == 1
    assert getattr(info, "extraction_restricted", None) is restricted


def test_the_owners_restriction_is_reported_with_the_job_and_in_its_manifest(
    api: httpx.Client, worker_process: object, s3: ObjectStore
) -> None:
    from tests.conftest import wait_for_job

    submitted = api.post("/v1/jobs", files={"file": ("owned.pdf", encrypted_pdf("", 0))})
    assert submitted.status_code == 202, submitted.text
    assert submitted.json()["source"]["extraction_restricted"] is True
    job = wait_for_job(api, submitted.json()["id"])
    assert job["status"] == "succeeded", job
    assert job["source"]["extraction_restricted"] is True
    assert "stayed put" in api.get(f"/v1/jobs/{job['id']}/markdown").text
    manifest = json.loads(s3.get_bytes(JobKeys(job["id"]).manifest))
    assert manifest["source"]["extraction_restricted"] is True
    plain = api.post("/v1/jobs", files={"file": ("plain.pdf", encrypted_pdf("", -1))})
    assert plain.json()["source"]["extraction_restricted"] is False
