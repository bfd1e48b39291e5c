"""Request dependencies: a database session and the calling client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Query, Request
from fastapi import Path as FastApiPath
from pydantic import BeforeValidator
from sqlalchemy.orm import Session

from api.errors import ApiError, invalid_request_message
from api.ratelimit import get_rate_limiter
from pagemill.clients.repository import authenticate
from pagemill.db.models import Client
from pagemill.db.session import session_factory
from pagemill.settings import Settings, get_settings
from pagemill.storage import ObjectStore, get_object_store


def get_session() -> Iterator[Session]:
    session = session_factory()()
    try:
        yield session
    finally:
        session.close()


# Closed when the route function returns, not after the response is sent: a slow
# client or a busy event loop must not keep a connection idle in a transaction.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
# Every listing's offset: bounded so that no value reaches the database as an
# out-of-range bigint (a 500), and far past any list a client pages through.
MAX_OFFSET = 1_000_000
OffsetQuery = Annotated[
    int, Query(ge=0, le=MAX_OFFSET, description="Rows to skip, at most 1,000,000.")
]
MAX_PAGE_NUMBER = 1_000_000


def _digits_only(value: object) -> object:
    # Pydantic's lax integers would read "1.0" as page 1 and "1_0" as page 10, and a
    # wrong page answered is worse than a refusal.
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("a page number is written in digits only, such as 3")
    return value


# A page number in a path: 1-based, digits only.
PageNumberPath = Annotated[
    int, FastApiPath(ge=1, le=MAX_PAGE_NUMBER), BeforeValidator(_digits_only)
]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[ObjectStore, Depends(get_object_store)]


def single_valued_query(request: Request) -> None:
    """Refuse a query parameter given more than once. No parameter of the API takes a
    list, and FastAPI would keep the last value and drop the others without a word:
    ?status=succeeded&status=failed would list the failed jobs only."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name in seen:
            raise ApiError(
                422,
                "invalid_request",
                invalid_request_message(
                    f"query.{name[:100]}", "given more than once; send it once"
                ),
            )
        seen.add(name)


def current_client(
    session: SessionDep,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Client:
    key = x_api_key
    if authorization and authorization.lower().startswith("bearer "):
        key = authorization[7:].strip()
    if not key:
        raise ApiError(
            401,
            "missing_api_key",
            "This request needs an API key: send it as 'Authorization: Bearer <key>'.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    client = authenticate(session, key)
    # End the lookup's transaction: its connection goes back to the pool (the client
    # stays loaded), so a request that then waits, on an upload's inspection for one,
    # holds no connection idle in a transaction.
    session.commit()
    if client is None:
        raise ApiError(
            401,
            "invalid_api_key",
            "The API key is not valid.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    retry_after_s = get_rate_limiter().retry_after_s(client.id)
    if retry_after_s is not None:
        raise ApiError(
            429,
            "rate_limited",
            f"Too many requests; try again in {retry_after_s} s.",
            headers={"Retry-After": str(retry_after_s)},
        )
    return client


ClientDep = Annotated[Client, Depends(current_client)]


def admin_client(client: ClientDep) -> Client:
    """The calling client, which must hold an operator (admin) key."""
    if not client.is_admin:
        raise ApiError(403, "admin_only", "This view needs an operator (admin) key.")
    return client


AdminDep = Annotated[Client, Depends(admin_client)]
