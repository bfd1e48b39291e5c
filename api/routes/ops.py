"""Ops tables for operators (admin keys only), and Prometheus metrics."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel

from api.deps import AdminDep, OffsetQuery, SessionDep
from api.errors import ApiError
from api.shared_read import SharedRead
from pagemill.ops.catalog import VIEWS
from pagemill.ops.metrics import render_metrics
from pagemill.ops.repository import UnknownView, read_view

router = APIRouter(tags=["ops"])

_NAMES = ", ".join(VIEWS)


class OpsViewOut(BaseModel):
    view: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    limit: int
    offset: int


@router.get("/v1/ops/{name}", response_model=OpsViewOut)
def ops_view(
    name: Annotated[str, Path(description=f"One of: {_NAMES}.")],
    _admin: AdminDep,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    offset: OffsetQuery = 0,
) -> OpsViewOut:
    """For operators: one ops table as JSON rows. Numeric (decimal) values are strings,
    exact; times are ISO 8601."""
    try:
        found = read_view(session, name, limit=limit, offset=offset)
    except UnknownView:
        raise ApiError(
            404, "unknown_view", f"There is no ops view {name[:100]!r}; there are: {_NAMES}."
        ) from None
    return OpsViewOut(
        view=found.name,
        title=VIEWS[name].title,
        columns=found.columns,
        rows=found.json_rows(),
        limit=limit,
        offset=offset,
    )


_scrape = SharedRead(render_metrics)


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    """Prometheus text exposition, read from Postgres and Redis at scrape time. No key,
    as Prometheus scrapes expect; it shows totals only, no client or job. Scrapes that
    arrive while one is read share its answer (api.shared_read)."""
    body, content_type = await _scrape()
    return Response(content=body, media_type=content_type)
