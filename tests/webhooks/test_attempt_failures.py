"""Whatever goes wrong inside an attempt is that attempt's outcome: it is logged, it
counts toward dead, and no delivery stays pending for ever."""

from __future__ import annotations

import ipaddress
import uuid
from datetime import timedelta

import httpx
import pytest

from pagemill.db.session import session_factory
from pagemill.domain import DeliveryStatus
from pagemill.queue import publish_finalize
from pagemill.settings import Settings, get_settings
from pagemill.storage import ObjectStore
from pagemill.webhooks import repository, sender, ssrf
from pagemill.webhooks.service import attempt_delivery
from tests.conftest import make_client_key
from tests.webhooks.conftest import all_settled, sql, wait_for_deliveries
from tests.webhooks.test_outbox import job_ready_to_finalize, reaper_paused
from worker.stages.context import StageContext
from worker.stages.finalize import finalize_job

pytestmark = pytest.mark.usefixtures("worker_process")


@pytest.mark.parametrize(
    ("stored_url", "says"),
    [
        ("http://0251.0376.0251.0376/", "169.254.169.254"),
        ("http://127.0.0.1/x\r\nX-Injected: 1", "control characters"),
        ("http://[::1/", "not a valid URL"),
        ("http://127.0.0.1:99999/", "port"),
    ],
)
def test_a_stored_url_the_client_cannot_send_to_ends_dead_with_its_attempt_logged(
    api: httpx.Client, api_url: str, api_key: str, s3: ObjectStore, stored_url: str, says: str
) -> None:
    # Stored as older releases accepted it at submission; the worker ends the job.
    job_id = job_ready_to_finalize(s3, api_key, stored_url)
    publish_finalize(str(job_id))
    [delivery] = wait_for_deliveries(api, str(job_id), all_settled, timeout_s=60)
    assert delivery["status"] == "dead" and delivery["attempts"] == 1
    [attempt] = delivery["attempt_log"]
    assert attempt["error"].startswith("invalid webhook URL") and says in attempt["error"]
    assert attempt["destination"] is None and attempt["status_code"] is None

    admin = {"Authorization": f"Bearer {make_client_key(admin=True)}"}
    ops = httpx.get(f"{api_url}/v1/ops/webhook-deliveries", headers=admin).json()
    assert delivery["id"] in {found["id"] for found in ops["deliveries"]}


def finalized_delivery(store: ObjectStore, api_key: str, url: str) -> uuid.UUID:
    """A pending delivery nobody has published a message for."""
    job_id = job_ready_to_finalize(store, api_key, url)
    ctx = StageContext(settings=get_settings(), sessions=session_factory(), store=store)
    finalize_job(ctx, job_id)
    [(delivery_id,)] = sql(
        "SELECT d.id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id "
        "WHERE e.job_id = %s",
        job_id,
    )
    return uuid.UUID(str(delivery_id))


def no_wait_settings() -> Settings:
    return Settings(webhook_retry_schedule_s=[0, 0], webhook_retry_jitter=0)


def test_any_exception_in_an_attempt_is_logged_and_counts_toward_dead(
    api: httpx.Client, api_key: str, s3: ObjectStore
) -> None:
    def broken_send(*_: object) -> sender.SendResult:
        raise RuntimeError("the HTTP client broke")

    def public(url: str, *_: object) -> ssrf.Destination:
        return ssrf.Destination(httpx.URL(url), ipaddress.ip_address("93.184.215.14"))

    sessions = session_factory()
    with reaper_paused():
        delivery_id = finalized_delivery(s3, api_key, "https://hooks.example.com/in")
        runs = [
            attempt_delivery(sessions, no_wait_settings(), delivery_id, broken_send, public)
            for _ in range(4)
        ]
    assert [run.status for run in runs] == [
        DeliveryStatus.pending,
        DeliveryStatus.pending,
        DeliveryStatus.dead,
        None,  # settled: a late duplicate message does nothing
    ]
    with sessions.begin() as session:
        view = repository.get_delivery(session, delivery_id, None)
        assert view is not None
        assert [attempt.number for attempt in view.attempts] == [1, 2, 3]
        assert all("RuntimeError: the HTTP client broke" in (a.error or "") for a in view.attempts)
        assert view.delivery.last_error is not None
        assert view.delivery.last_error.startswith("gave up after 3 attempts")


def test_attempts_lost_mid_flight_are_logged_and_count_toward_dead(
    api: httpx.Client, api_key: str, s3: ObjectStore
) -> None:
    sessions = session_factory()
    with reaper_paused():
        delivery_id = finalized_delivery(s3, api_key, "https://hooks.example.com/in")
        # Three claims whose workers died before recording anything (lease of zero:
        # each is due again at once).
        for _ in range(3):
            with sessions.begin() as session:
                assert repository.claim_delivery(session, delivery_id, timedelta(0)) is not None
        run = attempt_delivery(sessions, no_wait_settings(), delivery_id)
    assert run.status is DeliveryStatus.dead
    with sessions.begin() as session:
        view = repository.get_delivery(session, delivery_id, None)
        assert view is not None
        assert [attempt.number for attempt in view.attempts] == [1, 2, 3]
        assert all((attempt.error or "").startswith("lost") for attempt in view.attempts)
        assert view.delivery.status is DeliveryStatus.dead
        assert view.delivery.last_error == "gave up after 3 attempts: the last one was lost"
