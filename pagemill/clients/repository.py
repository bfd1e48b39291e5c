"""Clients and their keys."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from pagemill.clients import keys
from pagemill.db.models import Client
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
