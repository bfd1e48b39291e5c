"""Every error leaves as JSON: a stable `code` for programs, a `message` for people."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


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


def error_body(
    code: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    return {"error": {**(details or {}), "code": code, "message": message}}


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
        message = f"The request is invalid: {where or 'request'}: {first.get('msg', 'invalid')}."
        return JSONResponse(error_body("invalid_request", message), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        code, message = _STATUS_CODES.get(error.status_code, ("http_error", str(error.detail)))
        return JSONResponse(error_body(code, message), error.status_code, headers=error.headers)
