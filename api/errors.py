"""Every error leaves as JSON: a stable `code` for programs, a `message` for people."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from pagemill.storage import StorageUnavailable

log = logging.getLogger(__name__)

INTERNAL_ERROR_MESSAGE = (
    "The server failed to handle the request; the failure is logged. Please try again "
    "later, with the same Idempotency-Key for a submission."
)

# Seconds a client is asked to wait before sending again while object storage is down.
STORAGE_RETRY_AFTER_S = 5


class ApiError(Exception):
    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.headers = headers
        # Figures a program needs beside the code (a quota's limit and reset), sent in
        # the error object next to `code` and `message`.
        self.details = details


def storage_unavailable_error(error: StorageUnavailable, outcome: str) -> ApiError:
    """503 for an object store that is down: the request may be sent again shortly."""
    log.error("object storage unavailable: %s", error, exc_info=error)
    return ApiError(
        503,
        "storage_unavailable",
        f"Object storage is not answering, so {outcome}. Try again shortly.",
        headers={"Retry-After": str(STORAGE_RETRY_AFTER_S)},
    )


def error_body(
    code: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    return {"error": {**(details or {}), "code": code, "message": message}}


def invalid_request_message(where: str, problem: str) -> str:
    """What an `invalid_request` says: the field (`where`) and what is wrong with it."""
    return f"The request is invalid: {where or 'request'}: {problem}."


def body_unreadable_message(detail: str) -> str:
    return f"The request body cannot be read: {detail.rstrip('.')}."


TRAILING_SLASH_MESSAGE = (
    "There is nothing at this address with its trailing slash; send the request to the "
    "same address without the slash."
)

_STATUS_CODES = {
    404: ("not_found", "There is nothing at this address."),
    405: ("method_not_allowed", "This address does not accept that method."),
}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(
            error_body(error.code, error.message, error.details),
            error.status_code,
            headers=error.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        message = invalid_request_message(where, first.get("msg", "invalid"))
        return JSONResponse(error_body("invalid_request", message), 422)

    @app.exception_handler(StorageUnavailable)
    async def _storage_unavailable(_: Request, error: StorageUnavailable) -> JSONResponse:
        # Reads of results and pages: nothing was changed, so a retry is safe.
        return await _api_error(_, storage_unavailable_error(error, "the request failed"))

    @app.exception_handler(Exception)
    async def _internal_error(_: Request, error: Exception) -> JSONResponse:
        # Unforeseen: the server logs it with its traceback (Starlette raises it on after
        # this answer), and the caller gets the same form as every other error, without
        # the details, which may hold another client's data.
        return JSONResponse(error_body("internal_error", INTERNAL_ERROR_MESSAGE), 500)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code, message = _STATUS_CODES.get(error.status_code, ("http_error", str(error.detail)))
        if error.status_code == 400:
            # A body the framework could not parse: a multipart form without its boundary
            # or with broken framing. Its detail says what; the code is the one every
            # other malformed request gets.
            code, message = "invalid_request", body_unreadable_message(str(error.detail))
        elif error.status_code == 404 and _answered_without_trailing_slash(request):
            # The path is not echoed: it is the caller's own, and may be any length.
            message = TRAILING_SLASH_MESSAGE
        return JSONResponse(error_body(code, message), error.status_code, headers=error.headers)


def _answered_without_trailing_slash(request: Request) -> bool:
    """Whether the app answers the request's path without its trailing slash (for any
    method)."""
    path = request.url.path
    if len(path) < 2 or not path.endswith("/"):
        return False
    scope = {**request.scope, "path": path.rstrip("/") or "/"}
    return any(route.matches(scope)[0] is not Match.NONE for route in request.app.router.routes)
