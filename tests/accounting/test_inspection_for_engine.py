"""Inspection draws a page for its ink only where the job's engine would read the page by
OCR: a page read from its text layer is priced by its lines, so drawing it would cost
API CPU for nothing. The quote comes out the same either way."""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from pagemill.documents.inspect import inspect_document, inspect_untrusted
from pagemill.settings import Settings
from tests.accounting.test_quote import HISTORY_INKS, add_ocr_history, mixed_pdf, on_the_line
from tests.accounting.test_quote_measures import add_history
from tests.accounting.test_quote_words import history as words_history
from tests.conftest import RUN_ID, TMP_ROOT, make_client_key
from tests.support import services

BORN_DIGITAL = (1, 2, 3)  # mixed_pdf: the sample invoice's three pages, then a scan
SCAN = 4


@pytest.fixture()
def mixed(tmp_path: Path) -> Path:
    return mixed_pdf(tmp_path / "mixed.pdf")


def inks(path: Path, requested_engine: str | None) -> dict[int, float | None]:
    info = inspect_document(path, requested_engine=requested_engine)
    return {number: info.ink_of(number) for number in range(1, info.page_count + 1)}


def test_under_auto_only_the_page_bound_for_ocr_is_drawn(mixed: Path) -> None:
    measured = inks(mixed, "auto")
    assert all(measured[n] is None for n in BORN_DIGITAL)
    assert measured[SCAN] is not None and measured[SCAN] > 0


def test_a_job_that_asks_for_ocr_has_every_page_drawn(mixed: Path) -> None:
    measured = inks(mixed, "rapidocr")
    assert all(measured[n] is not None for n in (*BORN_DIGITAL, SCAN))
    # The same measure as when the engine is not known.
    assert measured == inks(mixed, None)


def test_a_job_that_asks_for_the_text_layer_has_no_page_drawn(mixed: Path) -> None:
    assert set(inks(mixed, "textlayer").values()) == {None}


def paths(path: Path, requested_engine: str | None) -> dict[int, int | None]:
    info = inspect_document(path, requested_engine=requested_engine)
    measured = {n: info.facts_of(n) for n in range(1, info.page_count + 1)}
    return {n: None if facts is None else facts.drawn_paths for n, facts in measured.items()}


def test_paths_are_counted_only_where_the_text_layer_engine_reads_the_page(
    mixed: Path,
) -> None:
    under_auto = paths(mixed, "auto")
    assert all(under_auto[n] is not None for n in BORN_DIGITAL)
    assert under_auto[SCAN] is None
    assert set(paths(mixed, "rapidocr").values()) == {None}
    assert paths(mixed, "textlayer") == paths(mixed, None)
    assert all(count is not None for count in paths(mixed, None).values())


def test_the_sandboxed_inspection_passes_the_engine_on(mixed: Path) -> None:
    auto = inspect_untrusted(mixed, Settings(), "auto")
    assert auto.ink_of(1) is None and auto.ink_of(SCAN) is not None
    unknown = inspect_untrusted(mixed, Settings())
    assert unknown.ink_of(1) is not None


@pytest.mark.parametrize("engine", ["auto", "rapidocr", "textlayer"])
def test_the_quote_is_what_it_was_with_every_page_drawn(db: str, mixed: Path, engine: str) -> None:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope

    add_ocr_history(HISTORY_INKS, on_the_line)
    # Text layer pages whose cost runs with their words, rows and paths, so a page
    # inspected without its paths would be priced otherwise.
    add_history("textlayer", words_history())
    settings = Settings()
    numbers = [1, 2, 3, 4]
    with session_scope() as session:
        for_engine = quote_usd(
            session,
            settings,
            inspect_document(mixed, requested_engine=engine),
            numbers,
            engine,
            "rapidocr",
        )
        every_page = quote_usd(
            session, settings, inspect_document(mixed), numbers, engine, "rapidocr"
        )
    assert for_engine == every_page
    assert for_engine > Decimal(0)


@pytest.fixture(scope="module")
def unserved_api(database_url: str, redis_client: Any, s3: Any) -> Iterator[str]:
    """An API whose queues no worker reads: the jobs it takes stay queued, so the pages
    of one cannot become history that prices the next."""
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_QUEUE_PREFIX": f"t{RUN_ID}unserved-",
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
    }
    api = services.start_api(env, TMP_ROOT / "unserved-api.log", port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        services.stop(api)


def test_a_submitted_job_is_quoted_as_with_every_page_drawn(
    unserved_api: str, db: str, mixed: Path
) -> None:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope

    add_ocr_history(HISTORY_INKS, on_the_line)
    settings = Settings()
    headers = {"Authorization": f"Bearer {make_client_key()}"}
    with httpx.Client(base_url=unserved_api, headers=headers) as api:
        for engine in ("auto", "rapidocr"):
            response = api.post(
                "/v1/jobs",
                files={"file": (mixed.name, mixed.read_bytes(), "application/pdf")},
                data={"engine": engine, "cache": "false"},
            )
            assert response.status_code == 202, response.text
            ocr_engine = engine if engine != "auto" else settings.ocr_engine
            with session_scope() as session:
                expected = quote_usd(
                    session, settings, inspect_document(mixed), [1, 2, 3, 4], engine, ocr_engine
                )
            assert Decimal(response.json()["quote_usd"]) == expected
