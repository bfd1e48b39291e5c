"""Completion callbacks through the real API, worker, Redis, Postgres and S3, to a real
HTTP receiver on loopback. The test settings compress the retry schedule to
0.5, 1, 1, 1 s (five attempts) and allowlist the host 127.0.0.1, nothing else.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import httpx
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from pagemill.queue import publish_finalize
from pagemill.storage import ObjectStore
from pagemill.webhooks import signing
from tests.conftest import make_client_key, wait_for_job
from tests.support.services import free_port
from tests.webhooks.conftest import (
    INVOICE,
    all_settled,
    client_secret,
    deliveries,
    sql,
    submit_with_webhook,
    wait_for_deliveries,
)
from tests.webhooks.receiver import Answer, Receiver
from tests.webhooks.test_outbox import job_ready_to_finalize

pytestmark = pytest.mark.usefixtures("worker_process")


def test_completion_is_delivered_signed_with_thin_payload_and_links(
    api: httpx.Client, api_key: str, receiver: Receiver, s3: ObjectStore
) -> None:
    job_id = submit_with_webhook(api, receiver.url(), metadata=json.dumps({"order": "A-17"}))
    job = wait_for_job(api, job_id)
    [received] = receiver.wait_for(1)
    secret = client_secret(api_key)

    event = Webhook(secret).verify(received.body, received.headers)
    assert event["type"] == "job.succeeded"
    data = event["data"]
    assert data["job_id"] == job_id and data["status"] == "succeeded"
    assert data["pages"] == {"total": 1, "succeeded": 1, "failed": 0, "cancelled": 0, "running": 0}
    assert Decimal(data["cost_usd"]) == Decimal(job["cost_usd"]) > 0
    assert data["license_use"] == job["license_use"]
    assert data["metadata"] == {"order": "A-17"}
    assert data["error"] is None
    links = data["links"]
    # PAGEMILL_API_BASE_URL is the worker's default here; the paths are what matter.
    assert httpx.URL(links["job"]).path == f"/v1/jobs/{job_id}"
    markdown = api.get(f"/v1/jobs/{job_id}/markdown").text
    assert api.get(httpx.URL(links["markdown"]).path).text == markdown
    presigned = links["markdown_presigned"]
    expires_at = datetime.fromisoformat(presigned["expires_at"])
    assert timedelta(days=6) < expires_at - datetime.now(UTC) <= timedelta(days=7)
    assert httpx.get(presigned["url"]).text == markdown
    assert "manifest_presigned" in links

    # What a forger or a replaying attacker could send does not verify.
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(received.body.replace(b"succeeded", b"failed"), received.headers)
    old = signing.headers(
        [secret], received.headers["webhook-id"], int(time.time()) - 600, received.body.decode()
    )
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify(received.body, old)

    [delivery] = deliveries(api, job_id)
    assert delivery["event_id"] == received.headers["webhook-id"]
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 1
    [attempt] = delivery["attempt_log"]
    assert attempt["status_code"] == 200 and attempt["response_body"] == "ok"
    assert attempt["destination"] == f"127.0.0.1:{receiver.port}"
    assert attempt["latency_ms"] >= 0 and attempt["error"] is None
    assert received.headers["content-type"] == "application/json"


def test_failing_receiver_gets_the_event_after_retries_with_the_same_id(
    api: httpx.Client, api_key: str, receiver: Receiver
) -> None:
    with_redirect_target = Receiver()
    try:
        receiver.answers = [
            Answer(500, body=b"x" * 5000),
            Answer(302, {"location": with_redirect_target.url()}),
            Answer(429, {"retry-after": "2"}),
        ]
        job_id = submit_with_webhook(api, receiver.url())
        received = receiver.wait_for(4)
        settled = wait_for_deliveries(api, job_id, all_settled)
        time.sleep(1.5)  # nothing more arrives
        assert len(receiver.requests) == 4
        assert with_redirect_target.requests == []  # the redirect was not followed
    finally:
        with_redirect_target.close()

    secret = client_secret(api_key)
    assert len({request.headers["webhook-id"] for request in received}) == 1
    assert len({request.body for request in received}) == 1
    for request in received:
        Webhook(secret).verify(request.body, request.headers)
    assert received[3].at - received[2].at >= 2.0  # Retry-After: 2 was honoured

    [delivery] = settled
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 4
    log = delivery["attempt_log"]
    assert [attempt["status_code"] for attempt in log] == [500, 302, 429, 200]
    assert len(log[0]["response_body"]) == 2048  # the first 2 KB is kept
    assert "redirects are not followed" in log[1]["error"]
    assert [attempt["number"] for attempt in log] == [1, 2, 3, 4]


def test_receiver_down_throughout_ends_dead_and_shows_in_the_ops_view(
    api: httpx.Client, api_url: str
) -> None:
    job_id = submit_with_webhook(api, f"http://127.0.0.1:{free_port()}/hook")
    [delivery] = wait_for_deliveries(api, job_id, all_settled)
    assert delivery["status"] == "dead"
    assert delivery["attempts"] == 5  # the first try and four retries
    assert all("ConnectError" in attempt["error"] for attempt in delivery["attempt_log"])
    assert delivery["last_error"].startswith("gave up after 5 attempts")

    refused = api.get("/v1/ops/webhook-deliveries")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only"
    admin = {"Authorization": f"Bearer {make_client_key(admin=True)}"}
    ops = httpx.get(f"{api_url}/v1/ops/webhook-deliveries", headers=admin).json()
    [listed] = [found for found in ops["deliveries"] if found["id"] == delivery["id"]]
    assert listed["status"] == "dead" and listed["job_id"] == job_id
    assert listed["client_name"].startswith("client-")


def test_internal_destinations_are_refused_and_logged(
    api: httpx.Client, api_key: str, receiver: Receiver, s3: ObjectStore
) -> None:
    # A name is looked up at delivery time, and refused for what it resolves to then.
    named = receiver.url(host="localhost")
    jobs = {submit_with_webhook(api, named): "a loopback address, not allowlisted"}
    # Internal addresses written out are refused at submit now
    # (tests/api/test_internal_destinations.py); delivery still refuses them, for jobs
    # stored before that check.
    for url, reason in {
        "http://169.254.169.254/latest/meta-data/": "metadata",
        "http://10.0.0.1/hook": "a private address",
    }.items():
        job_id = job_ready_to_finalize(s3, api_key, url)
        publish_finalize(str(job_id))
        jobs[str(job_id)] = reason
    for job_id, reason in jobs.items():
        [delivery] = wait_for_deliveries(api, job_id, all_settled)
        assert delivery["status"] == "dead" and delivery["attempts"] == 1
        [attempt] = delivery["attempt_log"]
        assert attempt["error"].startswith("destination refused")
        assert reason in attempt["error"]
        assert attempt["destination"] is None and attempt["status_code"] is None
    assert receiver.requests == []


def test_replay_sends_the_same_event_freshly_signed_with_both_secrets_after_rotation(
    api: httpx.Client, api_key: str, api_url: str, receiver: Receiver
) -> None:
    job_id = submit_with_webhook(api, receiver.url())
    [first] = receiver.wait_for(1)
    [original] = wait_for_deliveries(api, job_id, all_settled)
    old_secret = client_secret(api_key)
    assert len(first.headers["webhook-signature"].split(" ")) == 1

    rotated = api.post("/v1/webhooks/secret/rotate")
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["secret"]
    assert new_secret.startswith("whsec_") and new_secret != old_secret
    assert rotated.json()["previous_secret_expires_at"] is not None

    time.sleep(1.1)  # so the replay's timestamp differs
    replayed = api.post(f"/v1/webhook-deliveries/{original['id']}/replay")
    assert replayed.status_code == 202, replayed.text
    assert replayed.json()["replay_of"] == original["id"]
    _, second = receiver.wait_for(2)

    assert second.headers["webhook-id"] == first.headers["webhook-id"]
    assert second.body == first.body
    assert second.headers["webhook-timestamp"] != first.headers["webhook-timestamp"]
    assert second.headers["webhook-signature"] != first.headers["webhook-signature"]
    assert len(second.headers["webhook-signature"].split(" ")) == 2
    Webhook(old_secret).verify(second.body, second.headers)  # receivers not yet switched
    Webhook(new_secret).verify(second.body, second.headers)  # and those that have

    found = wait_for_deliveries(api, job_id, lambda found: len(found) == 2 and all_settled(found))
    assert [delivery["status"] for delivery in found] == ["succeeded", "succeeded"]

    stranger = {"Authorization": f"Bearer {make_client_key()}"}
    other = httpx.post(f"{api_url}/v1/webhook-deliveries/{original['id']}/replay", headers=stranger)
    assert other.status_code == 404


def test_gone_disables_the_endpoint_until_a_replay(api: httpx.Client, receiver: Receiver) -> None:
    receiver.answers = [Answer(410)]
    first_job = submit_with_webhook(api, receiver.url())
    [gone] = wait_for_deliveries(api, first_job, all_settled)
    assert gone["status"] == "dead" and gone["attempts"] == 1
    assert gone["endpoint_disabled_at"] is not None
    assert "410" in gone["last_error"]

    second_job = submit_with_webhook(api, receiver.url())
    [skipped] = wait_for_deliveries(api, second_job, all_settled)
    assert skipped["status"] == "dead"
    assert skipped["attempt_log"][0]["error"].startswith("endpoint disabled")
    assert len(receiver.requests) == 1

    assert api.post(f"/v1/webhook-deliveries/{skipped['id']}/replay").status_code == 202
    receiver.wait_for(2)
    found = wait_for_deliveries(api, second_job, lambda found: all_settled(found[-1:]))
    assert found[-1]["status"] == "succeeded" and found[-1]["endpoint_disabled_at"] is None


def test_cancel_sends_job_cancelled(api: httpx.Client, api_key: str, receiver: Receiver) -> None:
    job_id = submit_with_webhook(api, receiver.url(), engine="rapidocr")
    assert api.delete(f"/v1/jobs/{job_id}").status_code == 200
    [received] = receiver.wait_for(1)
    event = Webhook(client_secret(api_key)).verify(received.body, received.headers)
    assert event["type"] == "job.cancelled"
    assert event["data"]["pages"]["total"] == 1
    assert "markdown" not in event["data"]["links"]
    time.sleep(1)
    assert len(receiver.requests) == 1


def test_no_webhook_url_no_event(api: httpx.Client) -> None:
    with INVOICE.open("rb") as handle:
        job = api.post("/v1/jobs", files={"file": (INVOICE.name, handle)}, data={"pages": "1"})
    wait_for_job(api, job.json()["id"])
    assert sql("SELECT count(*) FROM webhook_events WHERE job_id = %s", job.json()["id"]) == [(0,)]
