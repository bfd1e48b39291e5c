"""A purged job in the console: its record is still shown, and its page images answer
410 `purged`, as the API's results do, never a 500 from an object that is gone."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import SAMPLES, wait_for_job
from tests.console.conftest import ConsoleWorld


@pytest.fixture()
def console(console_world: ConsoleWorld) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console_world.url, follow_redirects=False, timeout=30) as client:
        signed_in = client.post("/console/login", data={"key": console_world.admin_key})
        assert signed_in.status_code == 303
        yield client


def _purged_job(world: ConsoleWorld, sample: str, **data: str) -> str:
    with world.api() as api, (SAMPLES / sample).open("rb") as handle:
        submitted = api.post("/v1/jobs", files={"file": ("to-purge.pdf", handle)}, data=data)
        assert submitted.status_code == 202, submitted.text
        job_id = str(submitted.json()["id"])
        assert wait_for_job(api, job_id)["status"] == "succeeded"
        purged = api.delete(f"/v1/jobs/{job_id}", params={"purge": "true"})
        assert purged.status_code == 200, purged.text
    return job_id


@pytest.mark.parametrize(
    ("sample", "data"),
    [("scanned-sentence.pdf", {}), ("invoice-multipage.pdf", {"pages": "1"})],
    ids=["rendered page image", "page drawn from its PDF"],
)
def test_a_purged_jobs_page_and_page_image_say_it_was_purged(
    console: httpx.Client, console_world: ConsoleWorld, sample: str, data: dict[str, str]
) -> None:
    job_id = _purged_job(console_world, sample, **data)

    image = console.get(f"/console/jobs/{job_id}/pages/1/image")
    assert image.status_code == 410, image.text[:2000]
    assert "<code data-error-code>purged</code>" in image.text
    assert "purged" in image.text.split("</code>:</strong>", 1)[1]

    page = console.get(f"/console/jobs/{job_id}")
    assert page.status_code == 200, page.text[:2000]
    assert 'id="job-status">purged</span>' in page.text
    assert "were purged" in page.text
    assert f"/console/jobs/{job_id}/pages/1/image" not in page.text
