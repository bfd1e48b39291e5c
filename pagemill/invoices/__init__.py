"""Invoice data from the blocks layer: header fields, line items and their arithmetic.

Pure functions of `PageBlocks`: no Celery, database or object store. The workers'
finalize stage and `pagemill convert --extract invoice` call `extract_invoices`.
"""

from pagemill.invoices.extract import extract_invoices
from pagemill.invoices.schemas import InvoiceDocument

__all__ = ["InvoiceDocument", "extract_invoices"]
