"""finalize's part for a job with extract=invoice: its pages' blocks in, invoice.json out.

Each page's blocks are the ones its engine gave, kept beside its Markdown. A page read
before those were kept has none; for a page read from its text layer they are made
from its one-page PDF, and an image page without them is left out.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from pagemill.documents.blocks import PageBlocks
from pagemill.engines.catalog import TEXT_LAYER_ENGINE
from pagemill.storage import JobKeys, ObjectStore

log = logging.getLogger(__name__)


def store_invoice(
    store: ObjectStore, job_id: uuid.UUID, results: Iterable[tuple[int, int | None]]
) -> bool:
    """Writes invoice.json from the pages' results, each a page number and the attempt
    whose objects are its result (pages.result_attempt); False (and nothing written) when
    the extraction itself failed, which leaves the job's Markdown as it is: the invoice
    route says it is unavailable."""
    # Loaded by the jobs that ask for it: its date and currency data are not small.
    from pagemill.invoices import extract_invoices

    keys = JobKeys(job_id)
    pages = [
        blocks for number, attempt in results if (blocks := _blocks(store, keys, number, attempt))
    ]
    try:
        document = extract_invoices(pages)
    # A document that breaks the extraction must not cost its caller the Markdown.
    except Exception:
        log.exception("job %s: invoice extraction failed", job_id)
        return False
    store.put_bytes(keys.invoice, document.model_dump_json(indent=2).encode(), "application/json")
    return True


def _blocks(
    store: ObjectStore, keys: JobKeys, number: int, attempt: int | None
) -> PageBlocks | None:
    blocks_key = keys.page_blocks(number, attempt)
    if store.exists(blocks_key):
        return PageBlocks.model_validate_json(store.get_bytes(blocks_key))
    if store.exists(keys.page_pdf(number)):
        # Loaded only here: finalize workers otherwise never load PyMuPDF.
        from worker.engines.blocks_textlayer import blocks_from_text_layer

        return blocks_from_text_layer(
            store.get_bytes(keys.page_pdf(number)), number, TEXT_LAYER_ENGINE
        )
    return None
