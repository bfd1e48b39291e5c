"""Every query of the ops package: the ops views by short name, and the aggregates
that /metrics reads at scrape time.

Rows are returned JSON-safe, the same for the CLI and the API: Postgres `numeric`
values (money, averages, ages from `extract(epoch ...)`) become strings in plain
notation without trailing zeros, so nothing is rounded; `float` columns stay numbers;
timestamps and dates are ISO 8601; UUIDs are strings.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Engine, Select, func, literal_column, select, table
from sqlalchemy.orm import Session

from pagemill.db.models import Page, Worker
from pagemill.domain import PageStatus
from pagemill.jobs.result_cache import CACHE_DEVICE_KIND
from pagemill.ops.catalog import VIEWS

# Upper bounds of the page latency histogram, in seconds (+Inf is added).
LATENCY_BUCKETS_S = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# A scrape must not hang on a busy database.
METRICS_STATEMENT_TIMEOUT_MS = 5000


class UnknownView(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@dataclass(frozen=True)
class ViewRows:
    name: str
    columns: list[str]
    rows: list[dict[str, Any]]  # as Postgres returned them: Decimal, datetime, ...

    def json_rows(self) -> list[dict[str, Any]]:
        return [{column: json_safe(value) for column, value in row.items()} for row in self.rows]

    def as_json(self) -> dict[str, Any]:
        return {"view": self.name, "columns": self.columns, "rows": self.json_rows()}


def json_safe(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value.normalize(), "f") if value.is_finite() else str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def read_view(
    session: Session | Connection, name: str, limit: int | None = None, offset: int = 0
) -> ViewRows:
    """One ops view by its short name (see pagemill.ops.catalog), in the view's order."""
    spec = VIEWS.get(name)
    if spec is None:
        raise UnknownView(name)
    query: Select[Any] = select(literal_column("*")).select_from(table(spec.view))
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    result = session.execute(query)
    columns = list(result.keys())
    rows = [dict(zip(columns, row, strict=True)) for row in result]
    return ViewRows(name=name, columns=columns, rows=rows)


def worker_queues(session: Session | Connection) -> dict[str, list[str]]:
    """The queues each registered worker consumes, by worker id."""
    return {
        worker_id: list(queues or [])
        for worker_id, queues in session.execute(select(Worker.id, Worker.queues))
    }


def read_rows(
    session: Session | Connection, name: str, limit: int | None = None, offset: int = 0
) -> list[dict[str, Any]]:
    """One ops view by its short name as JSON-safe rows."""
    return read_view(session, name, limit=limit, offset=offset).json_rows()


@dataclass(frozen=True)
class LatencyHistogram:
    engine: str
    # Cumulative counts for each bound of LATENCY_BUCKETS_S, then the total.
    bucket_counts: list[int]
    count: int
    sum_seconds: float


@dataclass
class MetricsSnapshot:
    # (engine, status) -> pages that ended so, result-cache copies left out
    pages: dict[tuple[str, str], int] = field(default_factory=dict)
    # engine that read the original -> pages copied from the result cache
    cached_pages: dict[str, int] = field(default_factory=dict)
    latency: list[LatencyHistogram] = field(default_factory=list)
    # (engine, device_kind) -> device seconds / cost in USD
    device_seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    cost_usd: dict[tuple[str, str], float] = field(default_factory=dict)
    # model -> (draft tokens, accepted tokens) of speculative decoding
    speculation: dict[str, tuple[int, int]] = field(default_factory=dict)


_ENDED = (PageStatus.succeeded, PageStatus.failed, PageStatus.cancelled)
_RAN = (PageStatus.succeeded, PageStatus.failed)


def metrics_snapshot(engine: Engine) -> MetricsSnapshot:
    """The page aggregates behind /metrics, in one read-only transaction. Read from
    Postgres, not kept in process memory, so they hold across every worker process."""
    snapshot = MetricsSnapshot()
    engine_label = func.coalesce(Page.engine, "none")
    device_label = func.coalesce(Page.device_kind, "unknown")
    with engine.connect() as conn:
        conn.execute(
            select(func.set_config("statement_timeout", str(METRICS_STATEMENT_TIMEOUT_MS), True))
        )

        # A cache hit's pages keep the engine that read the original, but no engine ran
        # them: counted apart, so pages per engine is the work engines did.
        for engine_name, status, pages in conn.execute(
            select(engine_label, Page.status, func.count())
            .where(Page.status.in_(_ENDED), Page.device_kind.is_distinct_from(CACHE_DEVICE_KIND))
            .group_by(engine_label, Page.status)
        ):
            snapshot.pages[(engine_name, str(status))] = int(pages)
        for engine_name, pages in conn.execute(
            select(engine_label, func.count())
            .where(Page.status == PageStatus.succeeded, Page.device_kind == CACHE_DEVICE_KIND)
            .group_by(engine_label)
        ):
            snapshot.cached_pages[engine_name] = int(pages)

        wall = Page.wall_seconds
        buckets = [func.count().filter(wall <= bound) for bound in LATENCY_BUCKETS_S]
        for engine_name, *counts, total, sum_seconds in conn.execute(
            select(engine_label, *buckets, func.count(), func.coalesce(func.sum(wall), 0.0))
            .where(Page.status.in_(_RAN), wall.is_not(None))
            .group_by(engine_label)
        ):
            snapshot.latency.append(
                LatencyHistogram(
                    engine=engine_name,
                    bucket_counts=[int(count) for count in counts],
                    count=int(total),
                    sum_seconds=float(sum_seconds),
                )
            )

        # Every page that used a device, failed ones too: the device time was spent.
        for engine_name, device_kind, seconds, cost in conn.execute(
            select(
                engine_label,
                device_label,
                func.coalesce(func.sum(Page.device_seconds), 0.0),
                func.coalesce(func.sum(Page.cost_usd), 0),
            )
            .where(Page.device_seconds.is_not(None) | Page.cost_usd.is_not(None))
            .group_by(engine_label, device_label)
        ):
            snapshot.device_seconds[(engine_name, device_kind)] = float(seconds or 0)
            snapshot.cost_usd[(engine_name, device_kind)] = float(cost or 0)

        model_label = func.coalesce(Page.model, Page.engine, "none")
        for model, draft, accepted in conn.execute(
            select(
                model_label,
                func.sum(Page.spec_draft_tokens),
                func.coalesce(func.sum(Page.spec_accepted_tokens), 0),
            )
            .where(Page.spec_draft_tokens.is_not(None))
            .group_by(model_label)
        ):
            snapshot.speculation[model] = (int(draft or 0), int(accepted or 0))
    return snapshot
