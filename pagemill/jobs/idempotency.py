"""`Idempotency-Key` on job submission, scoped per client (Stripe's rules, IETF draft).

Same key and same request: the first response again, and no second job. Same key
and a different request: 422. Same key while the first request is still being
processed: 409. Keys are kept for `idempotency_ttl_s`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from pagemill.db.models import IdempotencyKey


class IdempotencyKeyReused(Exception):
    """The key was first used for a different request."""


class IdempotencyKeyInFlight(Exception):
    """The first request with this key is still being processed."""


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: dict[str, Any]


def fingerprint(upload_sha256: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps({"file": upload_sha256, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def begin(
    session: Session,
    client_id: uuid.UUID,
    key: str,
    request_sha256: str,
    ttl: timedelta,
    abandoned_after: timedelta,
) -> StoredResponse | None:
    """Claim the key for this request (None), or return the stored first response.

    Commits: the claim must be visible to a concurrent duplicate at once."""
    session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.client_id == client_id,
            IdempotencyKey.key == key,
            IdempotencyKey.created_at < func.now() - ttl,
        )
    )
    claimed = session.execute(
        insert(IdempotencyKey)
        .values(client_id=client_id, key=key, request_sha256=request_sha256)
        .on_conflict_do_nothing()
        .returning(IdempotencyKey.key)
    ).one_or_none()
    if claimed is not None:
        session.commit()
        return None
    row = session.scalar(
        select(IdempotencyKey)
        .where(IdempotencyKey.client_id == client_id, IdempotencyKey.key == key)
        .with_for_update()
    )
    assert row is not None
    if row.request_sha256 != request_sha256:
        session.rollback()
        raise IdempotencyKeyReused(key)
    if row.response_status is not None and row.response_body is not None:
        stored = StoredResponse(row.response_status, row.response_body)
        session.rollback()
        return stored
    # A first request that died mid-way must not block its key forever.
    stalled = session.execute(
        update(IdempotencyKey)
        .where(
            IdempotencyKey.client_id == client_id,
            IdempotencyKey.key == key,
            IdempotencyKey.created_at < func.now() - abandoned_after,
        )
        .values(created_at=func.now())
        .returning(IdempotencyKey.key)
    ).one_or_none()
    session.commit()
    if stalled is None:
        raise IdempotencyKeyInFlight(key)
    return None


def complete(
    session: Session,
    client_id: uuid.UUID,
    key: str,
    job_id: uuid.UUID,
    status: int,
    body: dict[str, Any],
) -> None:
    """Store the response, in the transaction that creates the job."""
    session.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.client_id == client_id, IdempotencyKey.key == key)
        .values(job_id=job_id, response_status=status, response_body=body)
    )


def release(session: Session, client_id: uuid.UUID, key: str) -> None:
    """The request was rejected before any job existed: free the key for a corrected retry."""
    session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.client_id == client_id,
            IdempotencyKey.key == key,
            IdempotencyKey.response_status.is_(None),
        )
    )
    session.commit()
