"""Console sign-in: an admin key buys a signed session cookie; forms carry a CSRF token.

The session lives in the cookie itself (client id, key prefix, expiry, nonce, and an
HMAC over them), so no table holds sessions. Each request checks the client again:
a client that lost its admin flag, was disabled, or had its key replaced (another
prefix) is signed out at once.

A state-changing form must carry the CSRF token derived from the session's nonce and
come from this origin: SameSite=Strict keeps the cookie off requests from other
sites, but not off other ports of the same host, which are the same site.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Form, Request
from sqlalchemy.orm import Session

from api.console.errors import ConsoleError, SignInRequired
from api.deps import SessionDep
from pagemill.db.models import Client
from pagemill.settings import get_settings

COOKIE_NAME = "pagemill_console"
SESSION_TTL_S = 8 * 3600  # a working day; then the key is asked for again
# Outside production only: the console works in development and tests unconfigured.
DEVELOPMENT_CONSOLE_SECRET = "pagemill-development-console-secret"  # noqa: S105


@dataclass(frozen=True)
class ConsoleUser:
    client: Client
    csrf_token: str


def _secret() -> bytes:
    settings = get_settings()
    if settings.console_secret_key:
        return settings.console_secret_key.encode()
    if settings.environment == "production":
        raise ConsoleError(
            503,
            "console_not_configured",
            "The console is off: set PAGEMILL_CONSOLE_SECRET_KEY on the API to sign in.",
        )
    return DEVELOPMENT_CONSOLE_SECRET.encode()


def _sign(message: str) -> str:
    digest = hmac.new(_secret(), message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def session_cookie(client: Client) -> str:
    expires_at = int(time.time()) + SESSION_TTL_S
    payload = f"{client.id}.{client.api_key_prefix}.{expires_at}.{secrets.token_urlsafe(16)}"
    return f"{payload}.{_sign('session|' + payload)}"


def csrf_token_for(cookie: str) -> str:
    nonce = cookie.split(".")[3]
    return _sign("csrf|" + nonce)


def _client_of(session: Session, cookie: str | None) -> Client | None:
    if not cookie or cookie.count(".") != 4:
        return None
    payload, signature = cookie.rsplit(".", 1)
    if not hmac.compare_digest(signature, _sign("session|" + payload)):
        return None
    client_id, key_prefix, expires_at, _ = payload.split(".")
    if not expires_at.isdigit() or int(expires_at) < time.time():
        return None
    try:
        client = session.get(Client, uuid.UUID(client_id))
    except ValueError:
        return None
    if client is None or client.api_key_prefix != key_prefix or client.disabled_at is not None:
        return None
    return client


def console_user(request: Request, session: SessionDep) -> ConsoleUser:
    cookie = request.cookies.get(COOKIE_NAME)
    client = _client_of(session, cookie)
    if client is None or cookie is None:
        raise SignInRequired(request.url.path)
    if not client.is_admin:
        raise ConsoleError(403, "not_admin", "The console is for admin keys only.")
    return ConsoleUser(client=client, csrf_token=csrf_token_for(cookie))


def refuse_cross_site(request: Request) -> None:
    """Refuse a form sent from another origin, whatever cookies came with it."""
    fetch_site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    own_origin = f"{request.url.scheme}://{request.url.netloc}"
    if fetch_site not in (None, "same-origin", "none") or (origin and origin != own_origin):
        raise ConsoleError(
            403, "cross_site_request", "This form was sent from another site and was refused."
        )


def checked_form(
    request: Request,
    user: Annotated[ConsoleUser, Depends(console_user)],
    csrf_token: Annotated[str, Form()] = "",
) -> ConsoleUser:
    """The signed-in user of a state-changing form, once its origin and token check out."""
    refuse_cross_site(request)
    if not hmac.compare_digest(csrf_token.encode(), user.csrf_token.encode()):
        raise ConsoleError(
            403, "csrf_token_invalid", "The form's security token is missing or out of date."
        )
    return user


UserDep = Annotated[ConsoleUser, Depends(console_user)]
FormUserDep = Annotated[ConsoleUser, Depends(checked_form)]
