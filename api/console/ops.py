"""Console pages over the ops views: stuck jobs, workers, cost, licences, webhooks."""

from __future__ import annotations

import csv
import io
import logging
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from api.console.auth import FormUserDep, UserDep
from api.console.charts import Bar, bar_chart
from api.console.errors import ConsoleError
from api.console.render import money, render
from api.deps import MAX_OFFSET, SessionDep
from pagemill.domain import DeliveryStatus
from pagemill.ops.metrics import read_queue_depths
from pagemill.ops.repository import read_view, worker_queues
from pagemill.webhooks import outbox
from pagemill.webhooks import repository as webhooks_repository

log = logging.getLogger(__name__)
router = APIRouter(prefix="/console", include_in_schema=False)

VIEW_ROWS = 5000  # the most rows a console table shows, as GET /v1/ops/{name} allows
DELIVERIES_PER_SCREEN = 50
COST_VIEWS = ("cost-by-client-day", "cost-per-page")


def _rows(session: SessionDep, name: str) -> tuple[list[str], list[dict[str, Any]]]:
    found = read_view(session, name, limit=VIEW_ROWS)
    return found.columns, found.json_rows()


@dataclass(frozen=True)
class QueueState:
    stage: str
    queue: str
    waiting: int
    live_workers: int  # workers alive now that consume this queue


def _queue_states(session: SessionDep, workers: list[dict[str, Any]]) -> list[QueueState] | None:
    """Each queue's waiting messages beside the live workers that consume it: a queue
    that fills with nobody on it is the usual answer to why a job is stuck. None
    when Redis cannot be read."""
    try:
        depths = read_queue_depths()
    except Exception:
        log.warning("console: could not read queue depths", exc_info=True)
        return None
    consumed = worker_queues(session)
    alive = [row["worker_id"] for row in workers if row["alive"]]
    return [
        QueueState(
            stage,
            queue,
            waiting,
            sum(1 for worker_id in alive if queue in consumed.get(worker_id, [])),
        )
        for stage, (queue, waiting) in depths.items()
    ]


@router.get("/stuck")
def stuck_page(request: Request, user: UserDep, session: SessionDep) -> Response:
    columns, rows = _rows(session, "stuck-jobs")
    _, workers = _rows(session, "worker-utilisation")
    return render(
        request,
        "stuck.html",
        {
            "user": user,
            "columns": columns,
            "rows": rows,
            "stuck": [row for row in rows if row["stuck"]],
            "queues": _queue_states(session, workers),
        },
    )


@router.get("/workers")
def workers_page(request: Request, user: UserDep, session: SessionDep) -> Response:
    columns, rows = _rows(session, "worker-utilisation")
    return render(
        request,
        "workers.html",
        {
            "user": user,
            "columns": columns,
            "rows": rows,
            "worker_queues": worker_queues(session),
            "queues": _queue_states(session, rows),
        },
    )


def _cost_charts(by_day: list[dict[str, Any]], per_page: list[dict[str, Any]]) -> tuple[str, str]:
    day_bars = [
        Bar(
            f"{row['day']} · {row['client']}",
            Decimal(row["cost_usd"] or 0),
            f"{money(row['cost_usd'])} · {row['pages']} p",
        )
        for row in by_day
    ]
    page_bars = [
        Bar(
            f"{row['model']} · {row['device_kind'] or 'no device'}",
            Decimal(row["cost_usd_per_page"] or 0),
            money(row["cost_usd_per_page"]),
        )
        for row in per_page
    ]
    return (
        bar_chart("Cost in USD per client per day", day_bars),
        bar_chart("Cost in USD per page by model and device", page_bars),
    )


@router.get("/cost")
def cost_page(request: Request, user: UserDep, session: SessionDep) -> Response:
    day_columns, by_day = _rows(session, "cost-by-client-day")
    page_columns, per_page = _rows(session, "cost-per-page")
    day_chart, page_chart = _cost_charts(by_day, per_page)
    return render(
        request,
        "cost.html",
        {
            "user": user,
            "day_columns": day_columns,
            "by_day": by_day,
            "page_columns": page_columns,
            "per_page": per_page,
            "day_chart": day_chart,
            "page_chart": page_chart,
        },
    )


@router.get("/cost.csv")
def cost_csv(_user: UserDep, session: SessionDep, view: str = "cost-by-client-day") -> Response:
    if view not in COST_VIEWS:
        raise ConsoleError(
            404,
            "unknown_view",
            f"There is no cost table {view[:100]!r}; there are: " + ", ".join(COST_VIEWS) + ".",
        )
    columns, rows = _rows(session, view)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="pagemill-{view}.csv"'},
    )


@router.get("/licences")
def licences_page(request: Request, user: UserDep, session: SessionDep) -> Response:
    columns, rows = _rows(session, "licence-audit")
    commercial = [row for row in rows if row["license_use"] == "commercial"]
    return render(
        request,
        "licences.html",
        {"user": user, "columns": columns, "rows": rows, "commercial": commercial},
    )


@router.get("/webhooks")
def webhooks_page(
    request: Request,
    user: UserDep,
    session: SessionDep,
    status: DeliveryStatus = DeliveryStatus.dead,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    done: str = "",
) -> Response:
    views = webhooks_repository.list_deliveries_by_status(
        session, status, DELIVERIES_PER_SCREEN, offset
    )
    return render(
        request,
        "webhooks.html",
        {
            "user": user,
            "deliveries": views,
            "status": status.value,
            "statuses": [value.value for value in DeliveryStatus],
            "offset": offset,
            "next_offset": offset + DELIVERIES_PER_SCREEN
            if len(views) == DELIVERIES_PER_SCREEN
            else None,
            "done": done,
        },
    )


@router.post("/webhook-deliveries/{delivery_id}/replay")
def replay_delivery(
    delivery_id: uuid.UUID,
    _user: FormUserDep,
    session: SessionDep,
    back: Annotated[str, Form()] = "/console/webhooks",
) -> Response:
    if outbox.replay_delivery(session, delivery_id, None) is None:
        raise ConsoleError(404, "delivery_not_found", "There is no webhook delivery with this id.")
    # Back to a console page only: never an address the form was given from elsewhere.
    safe = back.startswith("/console/") and "//" not in back and back.isprintable()
    target = back if safe else "/console/webhooks"
    separator = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{separator}done=replayed", status_code=303)
