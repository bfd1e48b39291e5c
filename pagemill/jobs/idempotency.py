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

from sqlalchemy.orm import Session

from pagemill.jobs import repository


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
    repository.delete_expired_idempotency_key(session, client_id, key, ttl)
    if repository.insert_idempotency_key(session, client_id, key, request_sha256):
        session.commit()
        return None
    row = repository.lock_idempotency_key(session, client_id, key)
    assert row is not None
    if row.request_sha256 != request_sha256:
        session.rollback()
        raise IdempotencyKeyReused(key)
    if row.response_status is not None and row.response_body is not None:
        stored = StoredResponse(row.response_status, row.response_body)
        session.rollback()
        return stored
    # A first request that died mid-way must not block its key forever.
    renewed = repository.renew_abandoned_idempotency_key(session, client_id, key, abandoned_after)
    session.commit()
    if not renewed:
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
    repository.store_idempotent_response(session, client_id, key, job_id, status, body)


def release(session: Session, client_id: uuid.UUID, key: str) -> None:
    """The request was rejected before any job existed: free the key for a corrected retry."""
    repository.delete_unanswered_idempotency_key(session, client_id, key)
    session.commit()
