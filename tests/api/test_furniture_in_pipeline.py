"""Running headers, footers and page numbers through the real API, worker, Postgres and S3,
in each of the three furniture modes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from pagemill.storage import JobKeys, ObjectStore
from tests.api.test_jobs_pipeline import page_rows, submit
from tests.conftest import wait_for_job
from tests.support.running_headers import (
    INVOICE_NUMBER,
    RUNNING_HEADER,
    TOTAL,
    invoice_with_running_header,
)

PAGES = 3


def furniture_of(pages: list[dict[str, Any]]) -> list[list[tuple[str, str, bool]]]:
    return [
        [(item["text"], item["kind"], item["in_document"]) for item in page["furniture"]]
        for page in pages
    ]


def expected_furniture(header_stays: list[bool], numbers_stay: bool) -> list[list[Any]]:
    return [
        [
            (RUNNING_HEADER, "running", header_stays[n - 1]),
            (f"Page {n} of {PAGES}", "page_number", numbers_stay),
        ]
        for n in range(1, PAGES + 1)
    ]


@pytest.mark.parametrize(
    ("form", "mode", "header_stays", "numbers_stay"),
    [
        ({}, "separate", [True, False, False], False),  # the default
        ({"furniture": "separate"}, "separate", [True, False, False], False),
        ({"furniture": "inline"}, "inline", [True, True, True], True),
        # Dropped, but the header is the only place the invoice number is printed,
        # so its first occurrence stays.
        ({"furniture": "drop"}, "drop", [True, False, False], False),
    ],
    ids=["default", "separate", "inline", "drop"],
)
def test_furniture_modes_end_to_end(
    api: httpx.Client,
    worker_process: subprocess.Popen[bytes],
    s3: ObjectStore,
    tmp_path: Path,
    form: dict[str, str],
    mode: str,
    header_stays: list[bool],
    numbers_stay: bool,
) -> None:
    path = invoice_with_running_header(tmp_path / "running-header.pdf", PAGES)
    response = submit(api, path, **form)
    assert response.status_code == 202, response.text
    assert response.json()["furniture"] == mode
    job = wait_for_job(api, response.json()["id"])
    assert job["status"] == "succeeded", job
    assert job["furniture"] == mode

    document = api.get(f"/v1/jobs/{job['id']}/markdown").text
    assert INVOICE_NUMBER in document  # never lost, whatever the mode
    assert TOTAL in document
    assert document.count(RUNNING_HEADER) == sum(header_stays)
    for n in range(1, PAGES + 1):
        assert (f"Page {n} of {PAGES}" in document) is numbers_stay
        assert f"<!-- page {n} -->" in document

    expected = expected_furniture(header_stays, numbers_stay)
    assert furniture_of(job["page_details"]) == expected  # the page status
    manifest = json.loads(s3.get_bytes(JobKeys(job["id"]).manifest))
    assert manifest["furniture"] == mode
    assert furniture_of(manifest["pages"]) == expected
    rows = page_rows(job["id"])
    assert [[(i["text"], i["kind"], i["in_document"]) for i in r["furniture"]] for r in rows] == (
        expected
    )
    assert [item["position"] for item in manifest["pages"][1]["furniture"]] == ["top", "bottom"]

    # A page's own Markdown is the engine's, furniture and all.
    page_two = api.get(f"/v1/jobs/{job['id']}/pages/2/markdown").text
    assert RUNNING_HEADER in page_two and f"Page 2 of {PAGES}" in page_two
