"""Build the sample documents in samples/ from third-party test documents.

samples/invoice-multipage.pdf: a three-page born-digital letter around a real
vendor invoice (invoice2data's Odoo demo invoice, MIT): cover letter, invoice, terms.
samples/scanned-invoice.png: the same invoice as a 150 dpi greyscale scan with
sensor noise and JPEG artefacts, so it has no text layer at all.
samples/scanned-sentence.pdf: an image-only PDF from docling's tests (MIT).

Run: python scripts/make_samples.py CORPUS_DIR
"""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path

import pymupdf
from PIL import Image, ImageFilter

ROOT = Path(__file__).resolve().parents[1]
COVER = """Azure Interior
4557 De Silva St, Fremont CA 94538

Dear Mitchell Admin,

Please find enclosed our invoice for the goods delivered in March 2023.
The amount is due within fifteen days of the invoice date. Should you have
any question about this invoice, reply to azure.Interior24@example.com.

Kind regards,
The accounts team"""
TERMS = """General terms and conditions

1. Payment. Invoices are payable within fifteen days unless agreed otherwise.
2. Delivery. Goods travel at the risk of the buyer once handed to the carrier.
3. Returns. Unused goods may be returned within thirty days in their packaging.
4. Disputes. Any dispute is settled by the courts of the seller's seat."""


def text_page(document: pymupdf.Document, text: str) -> None:
    page = document.new_page(width=595, height=842)
    page.insert_textbox(pymupdf.Rect(72, 72, 523, 770), text, fontsize=11, fontname="helv")


def make_multipage_invoice(corpus: Path) -> None:
    invoice = pymupdf.open(corpus / "invoice2data/tests/compare/AzureInterior.pdf")
    document = pymupdf.open()
    text_page(document, COVER)
    document.insert_pdf(invoice)
    text_page(document, TERMS)
    document.save(ROOT / "samples/invoice-multipage.pdf", garbage=3, deflate=True)


def make_scanned_invoice(corpus: Path) -> None:
    invoice = pymupdf.open(corpus / "invoice2data/tests/compare/AzureInterior.pdf")
    pixmap = invoice[0].get_pixmap(dpi=150, colorspace=pymupdf.csGRAY)
    image = Image.frombytes("L", (pixmap.width, pixmap.height), pixmap.samples)
    rng = random.Random(7)
    noisy = image.point(lambda value: value).filter(ImageFilter.GaussianBlur(0.6))
    pixels = noisy.load()
    assert pixels is not None
    for _ in range(noisy.width * noisy.height // 200):
        x, y = rng.randrange(noisy.width), rng.randrange(noisy.height)
        pixels[x, y] = rng.randrange(0, 256)
    buffer = io.BytesIO()
    noisy.save(buffer, format="JPEG", quality=70)
    Image.open(buffer).save(ROOT / "samples/scanned-invoice.png", dpi=(150, 150))


def main() -> None:
    corpus = Path(sys.argv[1])
    (ROOT / "samples").mkdir(exist_ok=True)
    make_multipage_invoice(corpus)
    make_scanned_invoice(corpus)
    source = corpus / "docling/tests/data/ocr/sources/ocr_test.pdf"
    (ROOT / "samples/scanned-sentence.pdf").write_bytes(source.read_bytes())


if __name__ == "__main__":
    main()
