"""ASGI middleware: request bodies capped while they stream in, before anything buffers
them; HEAD served wherever GET is."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import error_body
from pagemill.domain import human_size


class _TooLarge(Exception):
    pass


class BodySizeLimit:
    """413 as soon as a body passes `max_bytes` (or the path's own cap in
    `max_bytes_by_path`, for routes that take many documents): checked against
    Content-Length up front and counted chunk by chunk for bodies that do not declare it."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, max_bytes_by_path: dict[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_bytes_by_path = max_bytes_by_path or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.max_bytes_by_path.get(scope["path"], self.max_bytes)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            await self._reject(send, max_bytes)
            return
        received = 0
        too_large = False
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            received += len(message.get("body", b""))
            if received > max_bytes:
                too_large = True
                raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            # Once the cap is hit, whatever the app makes of the broken body (FastAPI
            # answers 400) is dropped in favour of the 413 below.
            if too_large:
                return
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        with contextlib.suppress(_TooLarge):
            await self.app(scope, counting_receive, guarded_send)
        if too_large and not response_started:
            await self._reject(send, max_bytes)

    async def _reject(self, send: Send, max_bytes: int) -> None:
        body = json.dumps(
            error_body(
                "file_too_large",
                f"The request is larger than the {human_size(max_bytes)} limit.",
            )
        ).encode()
        headers: list[Any] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class HeadAsGet:
    """HEAD answered as the GET of the same address would be, without its body: every
    GET route serves HEAD, as HTTP requires of a server (RFC 9110, 9.1), where FastAPI
    would answer 405. The status and headers, Content-Length included, are the GET's."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_headers_only)
