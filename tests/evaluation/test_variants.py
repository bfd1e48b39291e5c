"""Scanned variants: reproducible, degraded as named, with the text layer as reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from cli.evaluation.degrade import VARIANT_KINDS, degrade
from cli.evaluation.discovery import discover
from cli.evaluation.evaluate import VariantOptions, plan_evaluation
from cli.evaluation.variants import make_variants

PARAGRAPH = "Quarterly report of the harbour office, with the tonnage landed per month."


def born_digital(path: Path, pages: int) -> None:
    document = pymupdf.open()
    for number in range(1, pages + 1):
        # A6, to keep the test quick: noisy page images compress slowly.
        page = document.new_page(width=298, height=421)
        page.insert_textbox(pymupdf.Rect(20, 30, 280, 90), f"Page {number}. {PARAGRAPH}")
        page.insert_text((20, 120), "Second line of the page, read after the first.")
    document.save(path)


def image_only(path: Path) -> None:
    document = pymupdf.open()
    page = document.new_page(width=200, height=100)
    pixmap = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 400, 200), False)
    pixmap.clear_with(255)
    page.insert_image(page.rect, pixmap=pixmap)
    document.save(path)


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    (root / "letters").mkdir(parents=True)
    born_digital(root / "letters/one.pdf", pages=1)
    (root / "letters/one.json").write_text(json.dumps({"invoice_number": "Page 1"}))
    born_digital(root / "three.pdf", pages=3)
    (root / "three.json").write_text(json.dumps({"invoice_number": "Page 3"}))
    image_only(root / "scan.pdf")
    return root


def test_variants_of_born_digital_pdfs_only(source: Path, tmp_path: Path) -> None:
    made = make_variants(source, tmp_path / "out", ("noise", "rotate-90"), max_pages=2)
    names = sorted(path.relative_to(tmp_path / "out").as_posix() for path in made.created)
    assert names == [
        "letters/one.noise.pdf",
        "letters/one.rotate-90.pdf",
        "three.noise.pdf",
        "three.rotate-90.pdf",
    ]
    assert made.notes == ["scan.pdf: no variants, page 1: no usable text layer (0 characters)"]
    with pymupdf.open(tmp_path / "out/three.noise.pdf") as variant:
        assert variant.page_count == 2  # max_pages
        # Image only: the router will send it to OCR.
        assert all(page.get_text().strip() == "" for page in variant)
        assert len(variant[0].get_images()) == 1
    # The reference is the source's text layer for the pages the variant has.
    reference = " ".join((tmp_path / "out/three.noise.txt").read_text().split())
    assert f"Page 1. {PARAGRAPH}" in reference and f"Page 2. {PARAGRAPH}" in reference
    assert "Page 3." not in reference
    assert reference.index("Page 1.") < reference.index("Second line") < reference.index("Page 2.")
    # Invoice fields describe the whole document: copied only where every page is there.
    assert (tmp_path / "out/letters/one.noise.json").read_text() == json.dumps(
        {"invoice_number": "Page 1"}
    )
    assert not (tmp_path / "out/three.noise.json").exists()
    # The variants are a folder `pagemill eval` reads as it is.
    cases = {case.name: case.variant for case in discover(tmp_path / "out").cases}
    assert cases["letters/one.rotate-90.pdf"] == "rotate-90"


def test_the_same_seed_gives_the_same_files(source: Path, tmp_path: Path) -> None:
    kinds = ("noise", "skew")
    first = make_variants(source, tmp_path / "a", kinds, max_pages=1, seed=3).created
    again = make_variants(source, tmp_path / "b", kinds, max_pages=1, seed=3).created
    other = make_variants(source, tmp_path / "c", kinds, max_pages=1, seed=4).created
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]
    assert all(a.read_bytes() != c.read_bytes() for a, c in zip(first, other, strict=True))


def test_rotations_turn_the_page_clockwise(source: Path, tmp_path: Path) -> None:
    kinds = ("clean", "rotate-90", "rotate-180", "rotate-270")
    make_variants(source, tmp_path / "out", kinds, max_pages=1)
    boxes = {}
    for kind in kinds:
        with pymupdf.open(tmp_path / f"out/three.{kind}.pdf") as variant:
            boxes[kind] = variant[0].rect
    clean = boxes["clean"]
    assert (boxes["rotate-90"].width, boxes["rotate-90"].height) == pytest.approx(
        (clean.height, clean.width)
    )
    assert boxes["rotate-180"] == clean
    # Clockwise by 90: the text, at the top left of the page, ends up at the top right.
    with pymupdf.open(tmp_path / "out/three.rotate-90.pdf") as variant:
        pixmap = variant[0].get_pixmap(dpi=30, colorspace=pymupdf.csGRAY)
    ink = np.frombuffer(pixmap.samples, dtype=np.uint8).reshape(pixmap.height, pixmap.width) < 128
    rows, columns = np.nonzero(ink)
    assert columns.mean() > pixmap.width * 0.6 and rows.mean() < pixmap.height * 0.6


def test_an_evaluation_plan_adds_the_kinds_asked_for(source: Path, tmp_path: Path) -> None:
    (source / "letters/one.md").write_text("reference")
    options = VariantOptions(kinds=("blur", "rotate-180"), max_pages=1)
    plan = plan_evaluation(source, tmp_path / "work", "auto", options)
    assert [(case.name, case.variant) for case in plan.cases] == [
        ("letters/one.pdf", "original"),
        ("three.pdf", "original"),
        ("variants/letters/one.blur.pdf", "blur"),
        ("variants/letters/one.rotate-180.pdf", "rotate-180"),
        ("variants/three.blur.pdf", "blur"),
        ("variants/three.rotate-180.pdf", "rotate-180"),
    ]
    assert plan_evaluation(source, tmp_path / "none", "auto", None).cases == plan.cases[:2]


@pytest.mark.parametrize("kind", VARIANT_KINDS)
def test_each_kind_is_seeded_and_all_but_clean_change_the_page(kind: str) -> None:
    page = Image.new("L", (300, 200), 255)
    page.paste(0, (40, 60, 260, 80))  # a bar of ink
    first = degrade(page, kind, np.random.default_rng(1))
    again = degrade(page, kind, np.random.default_rng(1))
    assert first.tobytes() == again.tobytes()
    changed = first.size != page.size or first.tobytes() != page.tobytes()
    assert changed == (kind != "clean")
