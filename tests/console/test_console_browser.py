"""What an operator does in the console, in headless Chromium against the real API
and workers: sign in, find and open a job, cancel one, replay a webhook, download
the cost table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.conftest import (
    PHONE_WINDOW,
    WAIT_S,
    ConsoleWorld,
    job_status,
    running_job,
    sign_in,
    text_of,
    wait_for_text,
    wait_until,
)


def test_sign_in_find_a_job_by_file_name_and_see_page_1(
    browser: WebDriver, console_world: ConsoleWorld
) -> None:
    world = console_world
    job = world.scanned_job
    sign_in(browser, world, world.admin_key)
    assert browser.current_url.endswith("/console/jobs")

    browser.find_element(By.ID, "q").send_keys("scanned-invoice")
    browser.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    WebDriverWait(browser, WAIT_S).until(expected_conditions.url_contains("q=scanned-invoice"))
    rows = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr[data-job-id]")
    assert [row.get_attribute("data-job-id") for row in rows] == [job]
    assert "succeeded" in rows[0].text and "acme" in rows[0].text

    rows[0].find_element(By.CSS_SELECTOR, "a").click()
    WebDriverWait(browser, WAIT_S).until(expected_conditions.url_contains(f"/console/jobs/{job}"))
    page = browser.find_element(By.ID, "page-1")
    image = page.find_element(By.CSS_SELECTOR, ".page-image img")
    loaded = "return arguments[0].complete && arguments[0].naturalWidth"
    assert WebDriverWait(browser, WAIT_S).until(lambda _: browser.execute_script(loaded, image))

    with world.api() as api:
        expected = api.get(f"/v1/jobs/{job}/pages/1/markdown").text
    rendered = page.find_element(By.CSS_SELECTOR, "[data-rendered-markdown]")
    first_words = next(line for line in expected.splitlines() if line.strip("#|-* "))
    assert first_words.strip("#|-* ").split()[0] in rendered.text
    page.find_element(By.CSS_SELECTOR, "details summary").click()
    raw = page.find_element(By.CSS_SELECTOR, "[data-raw-markdown]")
    assert raw.get_attribute("textContent") == expected
    browser.execute_script("arguments[0].scrollIntoView()", page)


def test_a_text_layer_page_is_drawn_from_its_pdf(
    browser: WebDriver, console_world: ConsoleWorld
) -> None:
    world = console_world
    sign_in(browser, world, world.admin_key, f"/console/jobs/{world.digital_job}")
    page = browser.find_element(By.ID, "page-1")
    assert "textlayer" in page.find_element(By.CSS_SELECTOR, "dl.facts").text
    image = page.find_element(By.CSS_SELECTOR, ".page-image img")
    loaded = "return arguments[0].complete && arguments[0].naturalWidth"
    assert WebDriverWait(browser, WAIT_S).until(lambda _: browser.execute_script(loaded, image))
    assert "Azure Interior" in page.find_element(By.CSS_SELECTOR, "[data-rendered-markdown]").text


def test_search_by_metadata_value_and_by_job_id(
    browser: WebDriver, console_world: ConsoleWorld
) -> None:
    world = console_world
    sign_in(browser, world, world.admin_key)
    for needle, expected in (
        ("PO-7731", [world.scanned_job]),
        (world.digital_job[:8], [world.digital_job]),
        ("no-such-thing", []),
    ):
        browser.get(f"{world.url}/console/jobs?q={needle}")
        rows = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr[data-job-id]")
        assert [row.get_attribute("data-job-id") for row in rows] == expected, needle


def test_cancel_a_running_job(browser: WebDriver, console_world: ConsoleWorld) -> None:
    world = console_world
    job = running_job(world, "long-report.pdf")
    sign_in(browser, world, world.admin_key, f"/console/jobs/{job}")
    assert text_of(browser, "#job-status") == "running"

    browser.find_element(By.ID, "cancel-job").click()
    WebDriverWait(browser, WAIT_S).until(expected_conditions.alert_is_present())
    browser.switch_to.alert.accept()
    WebDriverWait(browser, WAIT_S).until(expected_conditions.url_contains("done=cancelled"))
    assert text_of(browser, "#job-status") == "cancelled"
    assert "Cancelled" in browser.find_element(By.CSS_SELECTOR, ".notice.ok").text
    with world.api() as api:
        assert api.get(f"/v1/jobs/{job}").json()["status"] == "cancelled"
    assert job_status(job) == "cancelled"


def test_replay_a_dead_webhook(browser: WebDriver, console_world: ConsoleWorld) -> None:
    world = console_world
    sign_in(browser, world, world.admin_key, "/console/webhooks")
    row = browser.find_element(By.CSS_SELECTOR, f"tr[data-delivery-id='{world.dead_delivery}']")
    assert "dead" in row.text and "HTTP 500" in row.text
    refused = [request.headers["webhook-id"] for request in world.receiver.requests]

    row.find_element(By.XPATH, ".//button[text()='Replay']").click()
    WebDriverWait(browser, WAIT_S).until(expected_conditions.url_contains("done=replayed"))
    assert "Replay queued" in browser.find_element(By.CSS_SELECTOR, ".notice.ok").text
    # The receiver answers 200 now: the same event arrives again, and is delivered.
    received = world.receiver.wait_for(len(refused) + 1, timeout_s=WAIT_S)
    assert received[-1].headers["webhook-id"] == refused[0]
    with world.api() as api:

        def replay_succeeded() -> bool:
            found = api.get(f"/v1/jobs/{world.digital_job}/webhook-deliveries").json()
            return any(
                d["replay_of"] == world.dead_delivery and d["status"] == "succeeded"
                for d in found["deliveries"]
            )

        wait_until(replay_succeeded, "the replayed delivery to succeed")
    browser.get(f"{world.url}/console/jobs/{world.digital_job}")
    assert "replay of" in browser.find_element(By.CSS_SELECTOR, "table.deliveries").text


def test_download_the_cost_csv(
    browser: WebDriver, console_world: ConsoleWorld, downloads_dir: Path
) -> None:
    world = console_world
    sign_in(browser, world, world.admin_key, "/console/cost")
    chart = browser.find_element(By.CSS_SELECTOR, "#by-day ~ figure svg")
    assert "acme" in chart.get_attribute("textContent")

    browser.find_element(By.ID, "csv-by-day").click()
    target = downloads_dir / "pagemill-cost-by-client-day.csv"
    wait_until(target.exists, "the CSV download")
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    with world.api(world.admin_key) as api:
        expected = api.get("/v1/ops/cost-by-client-day").json()["rows"]
    assert rows == [{k: "" if v is None else str(v) for k, v in row.items()} for row in expected]
    assert any(row["client"] == "acme" and float(row["cost_usd"]) > 0 for row in rows)


def test_the_list_refreshes_itself_while_a_job_runs(
    browser: WebDriver, console_world: ConsoleWorld
) -> None:
    world = console_world
    job = running_job(world, "refreshing.pdf")
    sign_in(browser, world, world.admin_key, "/console/jobs?q=refreshing")
    row = f"tr[data-job-id='{job}'] .status"
    assert text_of(browser, row) == "running"
    browser.execute_script("window.notReloaded = true")
    with world.api() as api:
        assert api.delete(f"/v1/jobs/{job}").status_code == 200
    wait_for_text(browser, row, "cancelled")
    assert browser.execute_script("return window.notReloaded") is True

    # A running job's own page too: its status, and no cancel button once it ended.
    other = running_job(world, "refreshing-too.pdf")
    browser.get(f"{world.url}/console/jobs/{other}")
    assert browser.find_elements(By.ID, "cancel-job")
    browser.execute_script("window.notReloaded = true")
    with world.api() as api:
        assert api.delete(f"/v1/jobs/{other}").status_code == 200
    wait_for_text(browser, "#job-status", "cancelled")
    assert not browser.find_elements(By.ID, "cancel-job")
    assert browser.execute_script("return window.notReloaded") is True


FORM_CONTROLS_WITHOUT_LABEL = """
    return Array.from(document.querySelectorAll('input:not([type=hidden]), select, button'))
        .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                      && !el.textContent.trim())
        .map(el => el.outerHTML);
"""


def test_pages_fit_a_phone_and_every_control_is_labelled(
    browser: WebDriver, console_world: ConsoleWorld
) -> None:
    world = console_world
    sign_in(browser, world, world.admin_key)
    # From the top of a page, the first Tab reaches the skip link.
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    assert browser.switch_to.active_element.text == "Skip to content"
    browser.set_window_size(*PHONE_WINDOW)
    for path in (
        "/console/jobs",
        f"/console/jobs/{world.scanned_job}",
        "/console/stuck",
        "/console/workers",
        "/console/cost",
        "/console/licences",
        "/console/webhooks",
    ):
        browser.get(world.url + path)
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth"
        )
        assert overflow <= 0, f"{path} is {overflow} px wider than the phone"
        assert browser.execute_script(FORM_CONTROLS_WITHOUT_LABEL) == [], path
    browser.get(f"{world.url}/console/jobs/{world.scanned_job}")
