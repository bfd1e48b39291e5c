"""Webhook fixtures: a loopback receiver, and helpers to submit a job that calls it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import SAMPLES, TEST_ENV
from tests.webhooks.receiver import Receiver, running_receiver

INVOICE = SAMPLES / "invoice-multipage.pdf"


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    with running_receiver() as found:
        yield found


def sql(query: str, *params: Any) -> list[tuple[Any, ...]]:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


def client_secret(api_key: str) -> str:
    [(secret,)] = sql(
        "SELECT webhook_secret FROM clients WHERE api_key_prefix = %s", api_key.split("_")[1]
    )
    return str(secret)


def submit_with_webhook(api: httpx.Client, webhook_url: str, **data: str) -> str:
    """A one-page born-digital job (quick: the text layer), calling `webhook_url`."""
    with INVOICE.open("rb") as handle:
        response = api.post(
            "/v1/jobs",
            files={"file": (INVOICE.name, handle)},
            data={"pages": "1", "webhook_url": webhook_url, **data},
        )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def deliveries(api: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    response = api.get(f"/v1/jobs/{job_id}/webhook-deliveries")
    assert response.status_code == 200, response.text
    return list(response.json()["deliveries"])


def wait_for_deliveries(
    api: httpx.Client,
    job_id: str,
    done: Callable[[list[dict[str, Any]]], bool],
    timeout_s: float = 90,
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        found = deliveries(api, job_id)
        if found and done(found):
            return found
        time.sleep(0.3)
    raise TimeoutError(f"deliveries of job {job_id} still {found}")


def all_settled(found: list[dict[str, Any]]) -> bool:
    return all(delivery["status"] != "pending" for delivery in found)
