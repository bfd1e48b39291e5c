"""A born-digital multi-page invoice with a running header and page-number footers."""

from __future__ import annotations

from pathlib import Path

import pymupdf

INVOICE_NUMBER = "INV-2024-0042"
RUNNING_HEADER = f"ACME Supplies Ltd - Invoice {INVOICE_NUMBER}"
TOTAL = "EUR 1,234.56"


def invoice_with_running_header(path: Path, pages: int = 3) -> Path:
    """Every page: the header with the invoice number at the top, "Page n of N" at the
    bottom. The invoice number is printed nowhere else; the total only on the last page."""
    document = pymupdf.open()
    for number in range(1, pages + 1):
        page = document.new_page(width=595, height=842)
        page.insert_text((50, 40), RUNNING_HEADER, fontsize=9)
        page.insert_text((50, 100), f"Delivery notes, part {number}", fontsize=16)
        y = 140
        for item in range(8):
            line = f"Pallet {number}-{item}: {item + 2 * number} crates checked and signed."
            page.insert_text((50, y), line, fontsize=11)
            y += 22
        if number == pages:
            page.insert_text((50, y + 20), f"Total due: {TOTAL}", fontsize=12)
        page.insert_text((270, 810), f"Page {number} of {pages}", fontsize=9)
    document.save(path)
    return path
