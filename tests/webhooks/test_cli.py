"""`pagemill client create` shows the webhook secret; `rotate-webhook-secret` replaces it."""

from __future__ import annotations

from tests.cli.test_client_and_submit import pagemill
from tests.webhooks.conftest import sql


def test_create_shows_the_secret_and_rotation_keeps_the_old_one_for_a_while(db: str) -> None:
    created = pagemill("client", "create", "books-service")
    assert created.returncode == 0, created.stderr
    [first] = [line for line in created.stdout.splitlines() if "whsec_" in line]
    first_secret = first.split()[-1]

    rotated = pagemill("client", "rotate-webhook-secret", "books-service", "--overlap-hours", "2")
    assert rotated.returncode == 0, rotated.stderr
    new_secret = rotated.stdout.strip().splitlines()[-1]
    assert new_secret.startswith("whsec_") and new_secret != first_secret
    [(current, previous, hours_left)] = sql(
        "SELECT webhook_secret, webhook_previous_secret, "
        "extract(epoch FROM webhook_previous_secret_expires_at - now()) / 3600 "
        "FROM clients WHERE name = 'books-service'"
    )
    assert (current, previous) == (new_secret, first_secret)
    assert 1.9 < float(hours_left) <= 2

    missing = pagemill("client", "rotate-webhook-secret", "nobody")
    assert missing.returncode == 1 and "no client named" in missing.stdout
