"""Signatures, the retry policy and the address check, without any service."""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from pagemill.domain import DeliveryStatus
from pagemill.settings import Settings
from pagemill.webhooks import signing, ssrf
from pagemill.webhooks.sender import SendResult, parse_retry_after
from pagemill.webhooks.service import decide

BODY = json.dumps({"type": "job.succeeded", "data": {"job_id": "j1"}}, separators=(",", ":"))


def test_signature_verifies_with_the_standard_webhooks_library() -> None:
    secret = signing.new_secret()
    assert secret.startswith("whsec_")
    now = int(time.time())
    headers = signing.headers([secret], "evt-1", now, BODY)
    assert Webhook(secret).verify(BODY, headers) == json.loads(BODY)
    # Byte for byte what the reference implementation computes.
    expected = Webhook(secret).sign("evt-1", datetime.fromtimestamp(now, UTC), BODY)
    assert headers["webhook-signature"] == expected


def test_tampered_body_wrong_secret_and_old_or_future_timestamps_fail() -> None:
    secret = signing.new_secret()
    now = int(time.time())
    headers = signing.headers([secret], "evt-1", now, BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace("succeeded", "failed"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify(BODY, signing.headers([secret], "evt-1", now - 600, BODY))
    with pytest.raises(WebhookVerificationError, match="too new"):
        Webhook(secret).verify(BODY, signing.headers([secret], "evt-1", now + 600, BODY))
    # The id is signed too: a replay of the body under another id fails.
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, {**headers, "webhook-id": "evt-2"})


def test_rotation_signs_with_both_secrets() -> None:
    old, new = signing.new_secret(), signing.new_secret()
    headers = signing.headers([new, old], "evt-1", int(time.time()), BODY)
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(BODY, headers)
    Webhook(new).verify(BODY, headers)


def settings(**overrides: Any) -> Settings:
    return Settings(webhook_retry_schedule_s=[5, 300, 1800], webhook_retry_jitter=0.2, **overrides)


def test_only_2xx_succeeds_and_410_disables() -> None:
    config = settings()
    for code in (200, 201, 204, 299):
        assert decide(SendResult(status_code=code), 1, config).status is DeliveryStatus.succeeded
    for code in (301, 302, 400, 404, 500):
        assert decide(SendResult(status_code=code), 1, config).status is DeliveryStatus.pending
    gone = decide(SendResult(status_code=410), 1, config)
    assert gone.status is DeliveryStatus.dead and gone.disable_endpoint
    refused = decide(SendResult(error="destination refused"), 1, config, final=True)
    assert refused.status is DeliveryStatus.dead and not refused.disable_endpoint


def test_backoff_follows_the_schedule_with_jitter_then_dies() -> None:
    config = settings()
    failed = SendResult(status_code=500)
    for attempt, base in enumerate([5, 300, 1800], start=1):
        low = decide(failed, attempt, config, rng=lambda: 0.0).retry_in_s
        high = decide(failed, attempt, config, rng=lambda: 0.999999).retry_in_s
        assert low == pytest.approx(base * 0.8)
        assert high == pytest.approx(base * 1.2, rel=1e-5)
    last = decide(SendResult(error="ConnectError: refused"), 4, config)
    assert last.status is DeliveryStatus.dead
    assert last.last_error == "gave up after 4 attempts: ConnectError: refused"


def test_default_schedule_spans_about_a_day() -> None:
    schedule = Settings.model_fields["webhook_retry_schedule_s"].default  # tests compress it
    assert 20 * 3600 <= sum(schedule) <= 30 * 3600
    assert schedule == sorted(schedule)


def test_retry_after_is_honoured_and_capped() -> None:
    config = settings(webhook_max_retry_after_s=3600)
    asked = decide(SendResult(status_code=429, retry_after_s=120), 1, config, rng=lambda: 0.5)
    assert asked.retry_in_s == 120
    shorter = decide(SendResult(status_code=503, retry_after_s=1), 2, config, rng=lambda: 0.5)
    assert shorter.retry_in_s == 300  # never sooner than the schedule
    greedy = decide(SendResult(status_code=503, retry_after_s=10**6), 1, config)
    assert greedy.retry_in_s == 3600
    assert parse_retry_after("120") == 120
    assert parse_retry_after("soon") is None
    later = datetime.now(UTC) + timedelta(seconds=90)
    assert parse_retry_after(format_datetime(later, usegmt=True)) == pytest.approx(90, abs=2)


def test_broken_webhook_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="RETRY_SCHEDULE"):
        Settings(webhook_retry_schedule_s=[])
    with pytest.raises(ValueError, match="MAX_COUNTDOWN"):
        Settings(webhook_max_countdown_s=99999)
    with pytest.raises(ValueError):
        Settings(webhook_allowed_cidrs=["not-a-network"])


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("::ffff:169.254.169.254", "metadata"),
        ("10.0.0.1", "private"),
        ("192.168.1.10", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("fc00::1", "private"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),  # noqa: S104
        ("240.0.0.1", ""),
        ("100.64.0.1", "public"),
    ],
)
def test_internal_addresses_have_a_reason(address: str, reason: str) -> None:
    found = ssrf.refusal_reason(ipaddress.ip_address(address))
    assert found is not None and reason in found


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700:4700::1111", "8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert ssrf.refusal_reason(ipaddress.ip_address(address)) is None


def fake_dns(*answers: str) -> Any:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in answers]

    return resolve


def test_destination_is_pinned_to_the_checked_address() -> None:
    found = ssrf.resolve_destination(
        "https://hooks.example.com/in?x=1", resolver=fake_dns("93.184.215.14")
    )
    assert str(found.connect_url) == "https://93.184.215.14/in?x=1"
    assert found.host_header == "hooks.example.com"
    assert found.server_name == "hooks.example.com"  # TLS checks the name, not the IP


def test_one_internal_answer_refuses_the_name() -> None:
    # A name answering with a public and a private address (a rebinding trick) is refused.
    with pytest.raises(ssrf.DestinationRefused, match=r"10\.0\.0\.5"):
        ssrf.resolve_destination(
            "http://hooks.example.com/", resolver=fake_dns("93.184.215.14", "10.0.0.5")
        )


def test_allowlists_open_internal_destinations_but_never_metadata() -> None:
    internal = fake_dns("10.20.0.7")
    with pytest.raises(ssrf.DestinationRefused):
        ssrf.resolve_destination("http://billing.internal/", resolver=internal)
    assert ssrf.resolve_destination(
        "http://billing.internal/", ["billing.internal"], resolver=internal
    )
    assert ssrf.resolve_destination(
        "http://billing.internal/", allowed_cidrs=["10.20.0.0/16"], resolver=internal
    )
    with pytest.raises(ssrf.DestinationRefused, match="never"):
        ssrf.resolve_destination("http://169.254.169.254/", ["169.254.169.254"], ["169.254.0.0/16"])


def test_unresolvable_names_are_retried_not_refused() -> None:
    with pytest.raises(ssrf.DestinationUnresolvable):
        ssrf.resolve_destination("http://no-such-host.invalid/")
