"""The worker registry: who can take which work, under which licence, at what price.

Every worker registers when it starts and heartbeats while it lives; one silent
for `worker_dead_after_s` no longer counts. The API asks the registry whether a
commercial job can be served at all before accepting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from pagemill.db.models import Worker


@dataclass(frozen=True)
class Registration:
    id: str
    host: str
    pid: int
    queues: list[str]
    device_kind: str
    device_count: int
    price_usd_per_hour: Decimal
    engine: str
    model: str
    model_license: str
    model_permits_commercial: bool
    deployment_license_reference: str | None
    versions: dict[str, Any]

    @property
    def permits_commercial(self) -> bool:
        return self.model_permits_commercial or self.deployment_license_reference is not None


def register(session: Session, registration: Registration) -> None:
    values = {
        "id": registration.id,
        "host": registration.host,
        "pid": registration.pid,
        "queues": registration.queues,
        "device_kind": registration.device_kind,
        "device_count": registration.device_count,
        "price_usd_per_hour": registration.price_usd_per_hour,
        "engine": registration.engine,
        "model": registration.model,
        "model_license": registration.model_license,
        "model_permits_commercial": registration.model_permits_commercial,
        "deployment_license_reference": registration.deployment_license_reference,
        "versions": registration.versions,
    }
    session.execute(
        insert(Worker)
        .values(**values)
        .on_conflict_do_update(
            index_elements=["id"],
            set_={**values, "heartbeat_at": func.now(), "stopped_at": None},
        )
    )


def heartbeat(session: Session, registration: Registration) -> None:
    """Say this worker is alive; registers it again if its row has gone (pruned)."""
    alive = session.execute(
        update(Worker)
        .where(Worker.id == registration.id)
        .values(heartbeat_at=func.now())
        .returning(Worker.id)
    ).one_or_none()
    if alive is None:
        register(session, registration)


def mark_stopped(session: Session, worker_id: str) -> None:
    session.execute(
        update(Worker)
        .where(Worker.id == worker_id)
        .values(heartbeat_at=func.now(), stopped_at=func.now())
    )


def charge_page(session: Session, worker_id: str, device_seconds: float) -> None:
    """Add a finished page's device time to its worker, in the page's own transaction."""
    session.execute(
        update(Worker)
        .where(Worker.id == worker_id)
        .values(
            busy_seconds=Worker.busy_seconds + device_seconds,
            pages_done=Worker.pages_done + 1,
        )
    )


def live_workers(session: Session, dead_after: timedelta) -> list[Worker]:
    return list(
        session.scalars(
            select(Worker).where(
                Worker.stopped_at.is_(None), Worker.heartbeat_at > func.now() - dead_after
            )
        )
    )


def can_serve_commercially(session: Session, engine: str, dead_after: timedelta) -> bool:
    """Is a live worker running `engine` on a basis that permits commercial use?"""
    return any(
        worker.engine == engine and worker.permits_commercial
        for worker in live_workers(session, dead_after)
    )
