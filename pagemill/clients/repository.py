"""Clients and their keys."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pagemill.clients import keys
from pagemill.db.models import Client, Job
from pagemill.domain import LicenseUse
from pagemill.webhooks import signing


class ClientExists(Exception):
    pass


def create_client(
    session: Session,
    name: str,
    is_admin: bool = False,
    default_license_use: LicenseUse = LicenseUse.non_commercial,
) -> tuple[Client, str]:
    """Create a client; returns it with its plaintext key, which is never stored."""
    if session.scalar(select(Client.id).where(Client.name == name)) is not None:
        raise ClientExists(name)
    issued = keys.issue_key()
    client = Client(
        name=name,
        api_key_prefix=issued.prefix,
        api_key_sha256=issued.sha256,
        is_admin=is_admin,
        default_license_use=default_license_use,
        webhook_secret=signing.new_secret(),
    )
    session.add(client)
    session.flush()
    return client, issued.plaintext


def authenticate(session: Session, plaintext: str) -> Client | None:
    prefix = keys.prefix_of(plaintext)
    if prefix is None:
        return None
    client = session.scalar(
        select(Client).where(Client.api_key_prefix == prefix, Client.disabled_at.is_(None))
    )
    if client is None or not keys.matches(plaintext, client.api_key_sha256):
        return None
    return client


def list_clients(session: Session) -> list[Client]:
    """Every client, by name."""
    return list(session.scalars(select(Client).order_by(Client.name)))


# --- Page quotas (pagemill.clients.quotas).


def lock_client(session: Session, client_id: uuid.UUID) -> Client | None:
    """The client's row, locked until this transaction ends: submissions of one client
    that check and use its quota take turns here."""
    return session.scalar(
        select(Client)
        .where(Client.id == client_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


def database_now(session: Session) -> datetime:
    """Postgres' clock, the one the jobs' created_at is written by."""
    return session.execute(select(func.now())).scalar_one()


def pages_submitted_since(
    session: Session, client_id: uuid.UUID, day_start: datetime, month_start: datetime
) -> tuple[int, int]:
    """Pages of the client's jobs created since each start (today, this month). A cache
    hit ran no engine and is not counted."""
    since_day = func.coalesce(func.sum(Job.pages_total).filter(Job.created_at >= day_start), 0)
    since_month = func.coalesce(func.sum(Job.pages_total), 0)
    day, month = session.execute(
        select(since_day, since_month).where(
            Job.client_id == client_id,
            Job.created_at >= min(day_start, month_start),
            Job.cached_from.is_(None),
        )
    ).one()
    return int(day or 0), int(month or 0)
