"""500 jobs submitted at once by 20 clients, through real workers: every job ends,
page and cost counts are exact, and the only errors are the intended 429s."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import httpx
import pymupdf
import pytest

from tests.api.test_auth_and_input import count_rows
from tests.chaos.conftest import db_rows
from tests.conftest import make_client_key

CLIENTS = 20
JOBS_PER_CLIENT = 25


def invoice_pdf(client_number: int, job_number: int) -> bytes:
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text(
        (72, 100),
        f"Invoice C{client_number:02d}-{job_number:03d}\n"
        f"Total due: {client_number}.{job_number:02d} EUR\n"
        "Payment within thirty days of the invoice date, by bank transfer.",
        fontsize=12,
    )
    return document.tobytes()


def submit_all(api_url: str, client_number: int, key: str) -> tuple[list[str], Counter[int]]:
    statuses: Counter[int] = Counter()
    job_ids: list[str] = []
    with httpx.Client(
        base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as client:
        for job_number in range(JOBS_PER_CLIENT):
            body = invoice_pdf(client_number, job_number)
            while True:
                response = client.post(
                    "/v1/jobs",
                    files={"file": ("invoice.pdf", body)},
                    headers={"Idempotency-Key": f"c{client_number}-j{job_number}"},
                )
                statuses[response.status_code] += 1
                if response.status_code != 429:
                    break
                time.sleep(float(response.headers["retry-after"]))
            assert response.status_code == 202, response.text
            job_ids.append(response.json()["id"])
    return job_ids, statuses


@pytest.mark.timeout(2700)
def test_500_jobs_from_20_clients(api_url: str, db: str, worker_process: Any) -> None:
    keys = [make_client_key(f"load-{n:02d}") for n in range(CLIENTS)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(lambda n: submit_all(api_url, n, keys[n]), range(CLIENTS)))
    job_ids = [job_id for ids, _ in results for job_id in ids]
    statuses = sum((counts for _, counts in results), Counter())
    assert len(set(job_ids)) == CLIENTS * JOBS_PER_CLIENT
    assert set(statuses) <= {202, 429}, statuses

    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        [(open_jobs,)] = db_rows(
            "SELECT count(*) FROM jobs WHERE status NOT IN ('succeeded', 'failed', 'cancelled')"
        )
        if open_jobs == 0:
            break
        time.sleep(2)
    by_status = dict(db_rows("SELECT status::text, count(*) FROM jobs GROUP BY status"))
    assert by_status == {"succeeded": CLIENTS * JOBS_PER_CLIENT}, by_status
    assert count_rows("pages") == CLIENTS * JOBS_PER_CLIENT
    [(priced, attempts, total)] = db_rows(
        "SELECT count(*) FILTER (WHERE cost_usd > 0), max(attempts), sum(cost_usd) FROM pages"
    )
    assert priced == CLIENTS * JOBS_PER_CLIENT
    assert attempts == 1
    per_client = db_rows(
        "SELECT j.client_id, count(p.id), sum(p.cost_usd) FROM jobs j "
        "JOIN pages p ON p.job_id = j.id GROUP BY j.client_id"
    )
    assert len(per_client) == CLIENTS
    assert all(pages == JOBS_PER_CLIENT for _, pages, _ in per_client)
    assert sum((cost for *_, cost in per_client), Decimal(0)) == total
