"""The jobs list's filters, over HTTP with a signed-in session: each narrows the list
to the jobs it names, and a value the form could not have sent is a 422 page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.console.conftest import ConsoleWorld

_JOB_ROW = re.compile(r'<tr data-job-id="([0-9a-f-]{36})"')


@pytest.fixture()
def console(console_world: ConsoleWorld) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console_world.url, follow_redirects=False, timeout=30) as client:
        signed_in = client.post("/console/login", data={"key": console_world.admin_key})
        assert signed_in.status_code == 303
        yield client


def listed(console: httpx.Client, **filters: str) -> set[str]:
    answer = console.get("/console/jobs", params=filters)
    assert answer.status_code == 200, answer.text
    return set(_JOB_ROW.findall(answer.text))


def test_each_filter_narrows_the_list(console: httpx.Client, console_world: ConsoleWorld) -> None:
    scanned, digital = console_world.scanned_job, console_world.digital_job
    assert {scanned, digital} <= listed(console)
    assert {scanned, digital} <= listed(console, client="acme", status="succeeded")
    assert listed(console, client="console-admin") == set()
    assert scanned in listed(console, engine="rapidocr")
    assert digital not in listed(console, engine="rapidocr")
    assert digital in listed(console, engine="textlayer")
    assert listed(console, license_use="commercial") == set()
    today = datetime.now(UTC).date()
    assert {scanned, digital} <= listed(console, created_from=today.isoformat())
    yesterday = (today - timedelta(days=1)).isoformat()
    assert listed(console, created_to=yesterday) == set()
    assert listed(console, q="scanned-invoice", status="succeeded") == {scanned}


@pytest.mark.parametrize(
    ("filters", "code"),
    [
        ({"status": "exploded"}, "invalid_filter"),
        ({"license_use": "free"}, "invalid_filter"),
        ({"created_from": "tomorrow"}, "invalid_date"),
        ({"client": "nobody"}, "client_not_found"),
        # Once a 500: Postgres cannot compare text holding a NUL.
        ({"q": "inv\x00oice"}, "invalid_filter"),
        ({"engine": "rapid\x00ocr"}, "invalid_filter"),
    ],
)
def test_a_value_the_form_cannot_send_is_refused(
    console: httpx.Client, filters: dict[str, str], code: str
) -> None:
    answer = console.get("/console/jobs", params=filters)
    assert answer.status_code in (404, 422)
    assert f"<code data-error-code>{code}</code>" in answer.text


def test_queues_show_the_live_workers_that_consume_them(
    console: httpx.Client, console_world: ConsoleWorld
) -> None:
    from pagemill.settings import get_settings

    prepare = get_settings().queue("prepare")
    for page in ("/console/workers", "/console/stuck"):
        answer = console.get(page)
        assert answer.status_code == 200
        row = re.search(rf"<code>{re.escape(prepare)}</code>.*?</tr>", answer.text, re.S)
        assert row is not None, page
        # The session's worker consumes prepare, ocr, finalize and webhooks.
        live = re.findall(r'<td class="num">(\d+)', row.group(0))
        assert int(live[1]) >= 1, row.group(0)


def test_pages_refuse_framing_and_foreign_script(
    console: httpx.Client, console_world: ConsoleWorld
) -> None:
    for page in ("/console/jobs", f"/console/jobs/{console_world.scanned_job}", "/console/login"):
        headers = console.get(page).headers
        policy = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy, page
        assert headers["x-frame-options"] == "DENY"
        assert headers["cache-control"] == "no-store"
