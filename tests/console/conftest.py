"""The console in a real browser: headless Chromium driven by Selenium, against the
session's API and worker processes.

Chromium and its driver come from Debian's `chromium` and `chromium-driver` packages
(`make chromium` installs them). One browser serves every console test; each test
starts signed out and leaves a screenshot of where it ended in the run's output
directory (PAGEMILL_TEST_OUTPUT_DIR, or pytest's base temporary directory).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.conftest import SAMPLES, TEST_ENV, make_client_key, wait_for_job
from tests.webhooks.receiver import Answer, Receiver, running_receiver

WAIT_S = 30
DESKTOP_WINDOW = (1280, 1000)
PHONE_WINDOW = (390, 844)  # a common phone's CSS pixels
MAX_WEBHOOK_ATTEMPTS = 5  # the tests' retry schedule: 0.5,1,1,1


def sql(query: str, *params: Any) -> list[tuple[Any, ...]]:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout_s} s")


TEXT_OF = """
    const found = document.querySelector(arguments[0]);
    return found === null ? null : found.textContent.trim();
"""


def text_of(browser: WebDriver, selector: str) -> str | None:
    """The text of the element `selector` names, or None when there is none.

    Pages that refresh themselves swap their live blocks, so an element found in one
    call may be gone by the next: the text is read in the page, in one script call,
    and never through a reference kept across a refresh."""
    found = browser.execute_script(TEXT_OF, selector)
    return None if found is None else str(found)


def wait_for_text(browser: WebDriver, selector: str, expected: str) -> None:
    """Wait until the element `selector` names reads `expected` (see `text_of`)."""
    WebDriverWait(browser, WAIT_S).until(
        lambda _: text_of(browser, selector) == expected,
        f"{selector} to read {expected!r}",
    )


def _browser_binaries() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.fail(
            "The console's browser tests need Chromium and its driver: run `make chromium` "
            "(Debian: apt-get install chromium chromium-driver)."
        )
    return chromium, driver


@pytest.fixture(scope="session")
def output_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("PAGEMILL_TEST_OUTPUT_DIR")
    root = Path(configured) if configured else tmp_path_factory.getbasetemp()
    found = root / "console-screenshots"
    found.mkdir(parents=True, exist_ok=True)
    return found


@pytest.fixture(scope="session")
def downloads_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-downloads")


@pytest.fixture(scope="session")
def chromium(downloads_dir: Path) -> Iterator[WebDriver]:
    binary, driver_path = _browser_binaries()
    options = Options()
    options.binary_location = binary
    for argument in (
        "--headless=new",
        "--no-sandbox",  # tests may run as root, where Chromium's sandbox will not start
        "--disable-dev-shm-usage",
        "--disable-gpu",
    ):
        options.add_argument(argument)
    options.add_experimental_option(
        "prefs",
        {
            "download.default_directory": str(downloads_dir),
            "download.prompt_for_download": False,
        },
    )
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


@pytest.fixture()
def browser(
    chromium: WebDriver, output_dir: Path, request: pytest.FixtureRequest
) -> Iterator[WebDriver]:
    """The browser, signed out, on a blank page; a screenshot of the end of the test."""
    chromium.get("about:blank")
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    chromium.set_window_size(*DESKTOP_WINDOW)
    yield chromium
    chromium.save_screenshot(str(output_dir / f"{request.node.name}.png"))


@dataclass(frozen=True)
class ConsoleWorld:
    url: str
    admin_key: str
    client_key: str
    client_id: uuid.UUID
    scanned_job: str  # succeeded, with a rendered page image
    digital_job: str  # succeeded, its webhook delivery dead
    dead_delivery: str
    receiver: Receiver

    def api(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.client_key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def _submit(api: httpx.Client, path: Path, **data: str) -> str:
    with path.open("rb") as handle:
        response = api.post("/v1/jobs", files={"file": (path.name, handle)}, data=data)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


@pytest.fixture(scope="package")
def console_world(database_url: str, api_url: str, worker_process: Any) -> Iterator[ConsoleWorld]:
    """Built once for the console's tests: an admin and a client; a scanned invoice
    read by OCR (cost, page image); a born-digital one whose webhook receiver refused
    every attempt, so its delivery is dead."""
    sql("TRUNCATE clients, jobs, pages, workers RESTART IDENTITY CASCADE")
    admin_key = make_client_key("console-admin", admin=True)
    client_key = make_client_key("acme")
    [(client_id,)] = sql("SELECT id FROM clients WHERE name = 'acme'")
    with running_receiver() as receiver:
        receiver.answers = [Answer(status=500) for _ in range(MAX_WEBHOOK_ATTEMPTS)]
        with httpx.Client(
            base_url=api_url, headers={"Authorization": f"Bearer {client_key}"}, timeout=60
        ) as api:
            scanned = _submit(api, SAMPLES / "scanned-invoice.png", metadata='{"order": "PO-7731"}')
            digital = _submit(
                api, SAMPLES / "invoice-multipage.pdf", pages="1", webhook_url=receiver.url()
            )
            for job_id in (scanned, digital):
                assert wait_for_job(api, job_id)["status"] == "succeeded"

            def dead_delivery() -> str | None:
                found = api.get(f"/v1/jobs/{digital}/webhook-deliveries").json()["deliveries"]
                return next((d["id"] for d in found if d["status"] == "dead"), None)

            dead = wait_until(dead_delivery, "the refused delivery to be dead")
        yield ConsoleWorld(
            url=api_url,
            admin_key=admin_key,
            client_key=client_key,
            client_id=client_id,
            scanned_job=scanned,
            digital_job=digital,
            dead_delivery=dead,
            receiver=receiver,
        )


def running_job(world: ConsoleWorld, filename: str) -> str:
    """A job that stays running: one queued page nobody was asked to run. Made fresh
    each time, so the reaper (which republishes work untouched for two minutes) leaves
    it alone for the test's few seconds."""
    from pagemill.db.session import session_scope
    from pagemill.domain import JobStatus, PageStatus
    from tests.support.factories import add_job

    with session_scope() as session:
        job = add_job(
            session, world.client_id, [{"status": PageStatus.queued}], status=JobStatus.running
        )
        job.source_filename = filename
        return str(job.id)


def job_status(job_id: str) -> str:
    [(status,)] = sql("SELECT status::text FROM jobs WHERE id = %s", job_id)
    return str(status)


def sign_in(browser: WebDriver, world: ConsoleWorld, key: str, path: str = "/console/jobs") -> None:
    browser.get(world.url + path)
    form = browser.find_element(By.CSS_SELECTOR, "form.login")
    form.find_element(By.ID, "key").send_keys(key)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    # While Chromium swaps documents, asking about the old form can fail with "Node with
    # given id does not belong to the document" rather than as a stale element: that
    # too means the navigation is under way, so the wait asks again.
    navigated = WebDriverWait(browser, WAIT_S, ignored_exceptions=(WebDriverException,))
    navigated.until(expected_conditions.staleness_of(form))
