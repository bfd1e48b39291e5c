"""Sign-in and sign-out, and the console's place in the app."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from api.console import jobs, ops
from api.console.auth import COOKIE_NAME, SESSION_TTL_S, refuse_cross_site, session_cookie
from api.console.errors import install_console_error_handlers
from api.console.render import HERE, render
from api.deps import SessionDep
from pagemill.clients.repository import authenticate

router = APIRouter(prefix="/console", include_in_schema=False)


def _next_page(raw: str) -> str:
    # Only a console page: an open redirect would lend the console's name to any site.
    if raw.startswith("/console/") and "//" not in raw and raw.isprintable():
        return raw
    return "/console/jobs"


@router.get("")
@router.get("/")  # the app redirects no trailing slash (api.app); this one is typed often
def home() -> Response:
    return RedirectResponse("/console/jobs", status_code=303)


@router.get("/login")
def login_page(request: Request, next: str = "/console/jobs") -> Response:
    return render(request, "login.html", {"next": _next_page(next), "error": None})


@router.post("/login")
def login(
    request: Request,
    session: SessionDep,
    key: Annotated[str, Form(max_length=200)] = "",
    next: Annotated[str, Form()] = "/console/jobs",
) -> Response:
    refuse_cross_site(request)
    key = key.strip()
    # Keys are printable ASCII: no other can match, and a NUL cannot even be looked up.
    client = authenticate(session, key) if key.isascii() and key.isprintable() else None
    if client is None or not client.is_admin:
        error = (
            ("invalid_api_key", "The key is not valid.")
            if client is None
            else ("not_admin", "This is a client key; the console is for admin keys only.")
        )
        return render(
            request,
            "login.html",
            {"next": _next_page(next), "error": error},
            status_code=401 if client is None else 403,
        )
    response = RedirectResponse(_next_page(next), status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        session_cookie(client),
        max_age=SESSION_TTL_S,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
def logout() -> Response:
    # No CSRF check: signing someone out is all a forged request could do.
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/console")
    return response


def install_console(app: FastAPI) -> None:
    """Serve the console under /console from this API process."""
    install_console_error_handlers(app)
    app.include_router(router)
    app.include_router(jobs.router)
    app.include_router(ops.router)
    app.mount("/console/static", StaticFiles(directory=HERE / "static"), name="console-static")
