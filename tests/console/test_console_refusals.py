"""Who the console refuses: nobody signed in, a client key, and a form posted from
another origin (the session cookie goes along: another port of the same host is the
same site, so SameSite alone would not stop it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from api.console.auth import COOKIE_NAME
from tests.console.conftest import WAIT_S, ConsoleWorld, job_status, running_job, sign_in


def error_code(browser: WebDriver) -> str:
    return browser.find_element(By.CSS_SELECTOR, "[data-error-code]").text


def test_without_a_session_every_page_asks_for_sign_in(
    browser: WebDriver, console_world: ConsoleWorld
) -> None:
    world = console_world
    job = running_job(world, "unsigned.pdf")
    for path in (f"/console/jobs/{job}", "/console/cost.csv", "/console/webhooks"):
        browser.get(world.url + path)
        assert "/console/login?next=" in browser.current_url, path
        assert "unsigned.pdf" not in browser.page_source
    with httpx.Client(base_url=world.url, follow_redirects=False) as plain:
        assert plain.get(f"/console/jobs/{job}/pages/1/image").status_code == 303
        refused = plain.post(f"/console/jobs/{job}/cancel", data={"csrf_token": "x"})
        assert refused.status_code == 401
        assert "sign_in_required" in refused.text
        # A cookie that was not signed here is no session either.
        forged = f"{world.client_id}.abc.9999999999.nonce.c2lnbmF0dXJl"
        plain.cookies.set(COOKIE_NAME, forged, path="/console")
        assert plain.get("/console/jobs").status_code == 303
    assert job_status(job) == "running"


def test_a_client_key_gets_nothing(browser: WebDriver, console_world: ConsoleWorld) -> None:
    world = console_world
    sign_in(browser, world, world.client_key)
    assert error_code(browser) == "not_admin"
    assert browser.get_cookie(COOKIE_NAME) is None
    browser.get(f"{world.url}/console/jobs")
    assert "/console/login" in browser.current_url
    with httpx.Client(base_url=world.url, follow_redirects=False) as plain:
        answer = plain.post("/console/login", data={"key": world.client_key})
        assert answer.status_code == 403
        assert "set-cookie" not in answer.headers
        assert plain.post("/console/login", data={"key": "pm_nope_nope"}).status_code == 401


def test_a_key_with_control_characters_is_not_valid(console_world: ConsoleWorld) -> None:
    """Once a 500: the key's prefix, NUL and all, was looked up in Postgres."""
    with httpx.Client(base_url=console_world.url, follow_redirects=False) as plain:
        for key in ("pm_ab\x00cd_secret", "pm_abcd_se\x00cret", "\x00"):
            answer = plain.post("/console/login", data={"key": key})
            assert answer.status_code == 401, (key, answer.text[:500])
            assert "invalid_api_key" in answer.text
            assert "set-cookie" not in answer.headers


def test_the_session_cookie_is_http_only_strict_and_secure_over_https(
    console_world: ConsoleWorld,
) -> None:
    with httpx.Client(base_url=console_world.url, follow_redirects=False) as plain:
        plain_http = plain.post("/console/login", data={"key": console_world.admin_key})
        # uvicorn trusts X-Forwarded-Proto from 127.0.0.1, as from a TLS-ending proxy there.
        over_https = plain.post(
            "/console/login",
            data={"key": console_world.admin_key},
            headers={"X-Forwarded-Proto": "https"},
        )
    for answer in (plain_http, over_https):
        assert answer.status_code == 303
        cookie = answer.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie
    assert "secure" not in plain_http.headers["set-cookie"].lower()
    assert "secure" in over_https.headers["set-cookie"].lower()


class _AttackerPage(BaseHTTPRequestHandler):
    form = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(self.form)))
        self.end_headers()
        self.wfile.write(self.form)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def attacker() -> Iterator[tuple[ThreadingHTTPServer, type[_AttackerPage]]]:
    handler = type("Page", (_AttackerPage,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    server.server_close()


def test_a_cross_site_form_post_is_refused(
    browser: WebDriver,
    console_world: ConsoleWorld,
    attacker: tuple[ThreadingHTTPServer, type[_AttackerPage]],
) -> None:
    world = console_world
    job = running_job(world, "target.pdf")
    sign_in(browser, world, world.admin_key)
    assert browser.get_cookie(COOKIE_NAME) is not None
    server, page = attacker
    page.form = (
        f'<form id="f" method="post" action="{world.url}/console/jobs/{job}/cancel">'
        '<input name="csrf_token" value="guessed"></form>'
        "<script>document.getElementById('f').submit()</script>"
    ).encode()
    browser.get(f"http://127.0.0.1:{server.server_address[1]}/")
    WebDriverWait(browser, WAIT_S).until(expected_conditions.url_contains(world.url))
    # The cookie went along (same site), and the request was refused all the same.
    assert error_code(browser) == "cross_site_request"
    assert job_status(job) == "running"

    # From the console itself, with the page's token, the same cancel goes through.
    browser.get(f"{world.url}/console/jobs/{job}")
    browser.execute_script("document.querySelector('form[data-confirm]').submit()")
    WebDriverWait(browser, WAIT_S).until(expected_conditions.url_contains("done=cancelled"))
    assert job_status(job) == "cancelled"
