"""One HTTP attempt: POST the signed body to the checked address, keep what came back."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from pagemill.webhooks.ssrf import Destination

RESPONSE_BYTES_KEPT = 2048
USER_AGENT = "pagemill-webhooks/1"


@dataclass(frozen=True)
class SendResult:
    status_code: int | None = None
    latency_ms: int | None = None
    error: str | None = None
    response_body: str | None = None
    retry_after_s: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _text(raw: bytes) -> str:
    # Postgres text cannot hold NUL; everything else is kept, undecodable bytes replaced.
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd")


def _describe(status_code: int, response: httpx.Response) -> str | None:
    if 200 <= status_code < 300:
        return None
    if 300 <= status_code < 400:
        location = response.headers.get("location", "nowhere")
        return f"answered {status_code} (to {location[:200]}); redirects are not followed"
    return f"answered {status_code}"


@dataclass
class _Progress:
    """How far an attempt got, so a deadline that cuts it off can still say what came back."""

    started: float
    status_code: int | None = None
    latency_ms: int | None = None
    response: httpx.Response | None = None
    kept: bytearray = field(default_factory=bytearray)

    def elapsed_ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)


async def _post(
    destination: Destination,
    headers: dict[str, str],
    body: str,
    timeout_s: float,
    progress: _Progress,
) -> None:
    extensions = {}
    if destination.url.scheme == "https":
        extensions["sni_hostname"] = destination.server_name
    # trust_env=False: an HTTP(S)_PROXY from the environment would make its own
    # DNS lookup and defeat the address check.
    async with (
        httpx.AsyncClient(timeout=timeout_s, follow_redirects=False, trust_env=False) as http,
        http.stream(
            "POST",
            destination.connect_url,
            content=body.encode(),
            headers=headers,
            extensions=extensions,
        ) as response,
    ):
        progress.latency_ms = progress.elapsed_ms()
        progress.status_code = response.status_code
        progress.response = response
        # Raw bytes, capped: what is kept is 2 KB, so no more is read (or decompressed).
        async for chunk in response.aiter_raw():
            progress.kept += chunk
            if len(progress.kept) >= RESPONSE_BYTES_KEPT:
                break


async def _post_within(
    destination: Destination,
    headers: dict[str, str],
    body: str,
    timeout_s: float,
    deadline_s: float,
) -> SendResult:
    progress = _Progress(started=time.monotonic())
    try:
        async with asyncio.timeout(deadline_s):
            await _post(destination, headers, body, timeout_s, progress)
    except TimeoutError:
        if progress.response is None:
            return SendResult(
                latency_ms=progress.elapsed_ms(),
                error=f"no complete answer before the attempt deadline ({deadline_s:.3g} s "
                "after sending began)",
            )
        # The status and headers came in time; only the body was still trickling.
    except httpx.TimeoutException as error:
        return SendResult(
            latency_ms=progress.elapsed_ms(),
            error=f"timed out after {timeout_s:g} s ({type(error).__name__})",
        )
    except httpx.HTTPError as error:
        return SendResult(
            latency_ms=progress.latency_ms or progress.elapsed_ms(),
            error=f"{type(error).__name__}: {error}"[:1000],
        )
    assert progress.response is not None and progress.status_code is not None
    status_code, response = progress.status_code, progress.response
    retry_after = None
    if status_code == 429 or status_code >= 500:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
    return SendResult(
        status_code=status_code,
        latency_ms=progress.latency_ms,
        error=_describe(status_code, response),
        response_body=_text(bytes(progress.kept[:RESPONSE_BYTES_KEPT])),
        retry_after_s=retry_after,
    )


def send(
    destination: Destination,
    headers: dict[str, str],
    body: str,
    timeout_s: float,
    deadline_s: float,
) -> SendResult:
    """POST once, all of it (connecting, sending, the answer's headers and up to 2 KB of
    its body) within `deadline_s`; `timeout_s` bounds each connect, write and read.
    Never raises for anything the receiver or the network does.

    Run on its own event loop: a cancelled coroutine closes its socket, where a
    blocking client can only be bounded one read at a time, and a receiver sending a
    byte every few seconds would hold it for ever."""
    request_headers = {
        **headers,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "host": destination.host_header,
        "accept-encoding": "identity",
    }
    return asyncio.run(_post_within(destination, request_headers, body, timeout_s, deadline_s))
