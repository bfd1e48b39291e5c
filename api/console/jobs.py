"""Console pages about jobs: the list with its filters, one job's pages, and cancel."""

from __future__ import annotations

import logging
import re
import tempfile
import uuid
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from pathlib import Path as FsPath
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from api.console.auth import FormUserDep, UserDep
from api.console.errors import ConsoleError
from api.console.render import markdown_html, render
from api.deps import MAX_OFFSET, PageNumberPath, SessionDep, SettingsDep, StoreDep
from pagemill.clients.repository import list_clients
from pagemill.db.models import Job
from pagemill.documents.sandbox import DocumentVerdict, Limits, SandboxFailed, run_sandboxed
from pagemill.domain import TERMINAL_JOB_STATUSES, JobStatus, LicenseUse, PageStatus
from pagemill.engines.catalog import ENGINE_CHOICES
from pagemill.jobs import lifecycle, repository
from pagemill.jobs.schemas import job_detail_out, job_out
from pagemill.settings import Settings
from pagemill.storage import JobKeys
from pagemill.webhooks import repository as webhooks_repository
from pagemill.webhooks.outbox import publish_job_webhooks

log = logging.getLogger(__name__)
router = APIRouter(prefix="/console", include_in_schema=False)

JOBS_PER_SCREEN = 50
PAGES_PER_SCREEN = 10  # each page shown fetches its Markdown from S3
# Text-layer pages have no stored image; the console draws one at this resolution.
PREVIEW_DPI = 100
PREVIEW_TIMEOUT_S = 30
LIVE = (JobStatus.queued, JobStatus.running)
Choice = TypeVar("Choice", bound=StrEnum)


def _choice(kind: type[Choice], raw: str) -> Choice | None:
    """A filter's value; empty when the form left it at "any"."""
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise ConsoleError(
            422, "invalid_filter", f"{raw[:40]!r} is not one of: {allowed}."
        ) from None


def _day(raw: str | None) -> date | None:
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise ConsoleError(
            422, "invalid_date", f"{raw[:40]!r} is not a date (YYYY-MM-DD)."
        ) from None


# C0 and C1 control characters. Postgres text cannot hold a NUL, and nothing a person
# searches for (a file name, an engine, a metadata value) holds any of them.
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _text(name: str, raw: str) -> str:
    """A free-text filter's value, with no control characters."""
    if _CONTROL_CHARACTERS.search(raw):
        raise ConsoleError(
            422, "invalid_filter", f"The {name} filter must not contain control characters."
        )
    return raw


def _midnight(day: date | None, days_after: int = 0) -> datetime | None:
    if day is None:
        return None
    return datetime.combine(day + timedelta(days=days_after), time(), tzinfo=UTC)


@router.get("/jobs")
def jobs_page(
    request: Request,
    user: UserDep,
    session: SessionDep,
    settings: SettingsDep,
    client: str = "",
    status: str = "",
    engine: str = "",
    license_use: str = "",
    created_from: str = "",
    created_to: str = "",
    q: Annotated[str, Query(max_length=200)] = "",
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    partial: bool = False,
) -> Response:
    clients = list_clients(session)
    names = {found.id: found.name for found in clients}
    client_id = next((found.id for found in clients if found.name == client), None)
    if client and client_id is None:
        raise ConsoleError(404, "client_not_found", f"There is no client {client[:100]!r}.")
    search = repository.JobSearch(
        client_id=client_id,
        status=_choice(JobStatus, status),
        engine=_text("engine", engine) or None,
        license_use=_choice(LicenseUse, license_use),
        created_from=_midnight(_day(created_from)),
        created_before=_midnight(_day(created_to), days_after=1),
        text=_text("search", q) or None,
    )
    jobs = repository.search_jobs(session, search, JOBS_PER_SCREEN, offset)
    rows = [
        (
            job_out(job, repository.list_pages(session, job.id), settings.api_base_url),
            names.get(job.client_id, ""),
        )
        for job in jobs
    ]
    more = len(jobs) == JOBS_PER_SCREEN
    context: dict[str, Any] = {
        "user": user,
        "rows": rows,
        "live": any(job.status in LIVE for job in jobs),
        "filters": {
            "client": client,
            "status": status,
            "engine": engine,
            "license_use": license_use,
            "created_from": created_from,
            "created_to": created_to,
            "q": q,
        },
        "clients": [found.name for found in clients],
        "statuses": [value.value for value in JobStatus],
        "engines": ENGINE_CHOICES,
        "license_uses": [value.value for value in LicenseUse],
        "live_url": _jobs_url(request, offset=offset, partial=1),
        "newer_url": _jobs_url(request, offset=max(0, offset - JOBS_PER_SCREEN))
        if offset
        else None,
        "older_url": _jobs_url(request, offset=offset + JOBS_PER_SCREEN) if more else None,
    }
    return render(request, "_jobs_table.html" if partial else "jobs.html", context)


def _jobs_url(request: Request, **changes: int) -> str:
    """This listing's address with the same filters and other `changes`."""
    params = {
        name: value
        for name, value in request.query_params.items()
        if name not in ("offset", "partial") and value
    }
    params.update({name: str(value) for name, value in changes.items() if value})
    return "/console/jobs" + (f"?{urlencode(params)}" if params else "")


def _job_or_404(session: SessionDep, job_id: uuid.UUID) -> Job:
    job = repository.get_job(session, job_id)
    if job is None:
        raise ConsoleError(404, "job_not_found", "There is no job with this id.")
    return job


@router.get("/jobs/{job_id}")
def job_page(
    request: Request,
    job_id: uuid.UUID,
    user: UserDep,
    session: SessionDep,
    settings: SettingsDep,
    store: StoreDep,
    first_page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    partial: bool = False,
    done: str = "",
) -> Response:
    job = _job_or_404(session, job_id)
    pages = repository.list_pages(session, job.id)
    detail = job_detail_out(job, pages, settings.api_base_url)
    shown = [
        summary
        for summary in detail.page_details
        if first_page <= summary["number"] < first_page + PAGES_PER_SCREEN
    ]
    # A purged job's record is shown without its objects, which are gone or going.
    readable = [] if job.purged_at is not None else shown
    keys = JobKeys(job.id)
    drawable = {
        summary["number"]
        for summary in readable
        if summary["image"] is not None or store.exists(keys.page_pdf(summary["number"]))
    }
    result_attempts = {page.number: page.result_attempt for page in pages}
    markdown: dict[int, str] = {}
    for summary in readable:
        if summary["status"] == PageStatus.succeeded.value:
            number = summary["number"]
            markdown_key = keys.page_markdown(number, result_attempts.get(number))
            markdown[number] = store.get_bytes(markdown_key).decode()
    client_names = {found.id: found.name for found in list_clients(session)}
    context: dict[str, Any] = {
        "user": user,
        "job": detail,
        "client_name": client_names.get(job.client_id, str(job.client_id)),
        "source_filename": job.source_filename,
        "pages": shown,
        "drawable": drawable,
        "markdown": markdown,
        "markdown_html": {number: markdown_html(text) for number, text in markdown.items()},
        "first_page": first_page,
        "pages_per_screen": PAGES_PER_SCREEN,
        "live": job.status in LIVE,
        "cancellable": job.status not in TERMINAL_JOB_STATUSES,
        "deliveries": webhooks_repository.list_job_deliveries(session, job.id),
        "done": done,
    }
    return render(request, "_job_live.html" if partial else "job.html", context)


@router.get("/jobs/{job_id}/pages/{number}/image")
def page_image(
    job_id: uuid.UUID,
    number: PageNumberPath,
    _user: UserDep,
    session: SessionDep,
    store: StoreDep,
    settings: SettingsDep,
) -> Response:
    _refuse_if_purged(_job_or_404(session, job_id))
    page = repository.get_page_by_number(session, job_id, number)
    keys = JobKeys(job_id)
    if page is not None and page.image_width_px is not None:
        body = store.get_bytes(keys.page_image(number))
    elif page is not None and store.exists(keys.page_pdf(number)):
        body = _preview(store.get_bytes(keys.page_pdf(number)), settings)
    else:
        raise ConsoleError(404, "page_image_not_found", f"Page {number} has no image.")
    # Private: the page belongs to a client.
    return Response(body, media_type="image/png", headers={"Cache-Control": "private, max-age=300"})


def _refuse_if_purged(job: Job) -> None:
    """410, as the API answers for a purged job's results (api.results)."""
    if job.purged_at is not None:
        raise ConsoleError(
            410,
            "purged",
            f"The job's stored source, page images and results were purged at "
            f"{job.purged_at:%Y-%m-%d %H:%M:%S} UTC; its record remains.",
        )


def _preview(page_pdf: bytes, settings: Settings) -> bytes:
    """A text-layer page drawn from its one-page PDF, in the sandbox."""
    limits = Limits(settings.sandbox_memory_bytes, settings.sandbox_cpu_s, PREVIEW_TIMEOUT_S)
    with tempfile.TemporaryDirectory(prefix="pagemill-preview-") as tmp:
        pdf_path, png_path = FsPath(tmp) / "page.pdf", FsPath(tmp) / "page.png"
        pdf_path.write_bytes(page_pdf)
        args = [str(pdf_path), str(PREVIEW_DPI), str(png_path)]
        try:
            list(run_sandboxed("api.console.preview_child", args, limits))
        except (SandboxFailed, DocumentVerdict) as failed:
            raise ConsoleError(
                422, "page_image_failed", f"The page could not be drawn: {failed}"
            ) from None
        return png_path.read_bytes()


@router.post("/jobs/{job_id}/cancel")
def cancel_job(job_id: uuid.UUID, _user: FormUserDep, session: SessionDep) -> Response:
    job = _job_or_404(session, job_id)
    if job.status in TERMINAL_JOB_STATUSES:
        raise ConsoleError(409, "job_finished", f"The job has already ended ({job.status.value}).")
    lifecycle.cancel_job(session, job.id)
    session.commit()
    publish_job_webhooks(job.id)
    return RedirectResponse(f"/console/jobs/{job.id}?done=cancelled", status_code=303)
