"""Console errors as pages: a stable code and a sentence, like the API's JSON errors."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response


class ConsoleError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class SignInRequired(Exception):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def install_console_error_handlers(app: FastAPI) -> None:
    from api.console.render import render

    async def console_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, ConsoleError)
        return render(
            request,
            "error.html",
            {"code": error.code, "message": error.message},
            status_code=error.status,
        )

    async def sign_in_required(request: Request, error: Exception) -> Response:
        assert isinstance(error, SignInRequired)
        if request.method in ("GET", "HEAD"):
            return RedirectResponse(f"/console/login?next={quote(error.path)}", status_code=303)
        # A form without a session changes nothing; it is not replayed after sign-in.
        return render(
            request,
            "error.html",
            {"code": "sign_in_required", "message": "Sign in with an admin key first."},
            status_code=401,
        )

    app.add_exception_handler(ConsoleError, console_error)
    app.add_exception_handler(SignInRequired, sign_in_required)
