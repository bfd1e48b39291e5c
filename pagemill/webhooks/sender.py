"""One HTTP attempt: POST the signed body to the checked address, keep what came back."""

from __future__ import annotations

import time
from dataclasses import dataclass
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


def send(
    destination: Destination, headers: dict[str, str], body: str, timeout_s: float
) -> SendResult:
    """POST once. Never raises for anything the receiver or the network does."""
    request_headers = {
        **headers,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "host": destination.host_header,
    }
    extensions = {}
    if destination.url.scheme == "https":
        extensions["sni_hostname"] = destination.server_name
    started = time.monotonic()
    latency_ms: int | None = None
    try:
        # trust_env=False: an HTTP(S)_PROXY from the environment would make its own
        # DNS lookup and defeat the address check.
        with (
            httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False) as http,
            http.stream(
                "POST",
                destination.connect_url,
                content=body.encode(),
                headers=request_headers,
                extensions=extensions,
            ) as response,
        ):
            latency_ms = round((time.monotonic() - started) * 1000)
            kept = b""
            deadline = started + 2 * timeout_s  # a receiver dribbling bytes cannot hold us
            for chunk in response.iter_bytes():
                kept += chunk
                if len(kept) >= RESPONSE_BYTES_KEPT or time.monotonic() > deadline:
                    break
    except httpx.TimeoutException as error:
        return SendResult(
            latency_ms=latency_ms,
            error=f"timed out after {timeout_s:g} s ({type(error).__name__})",
        )
    except httpx.HTTPError as error:
        return SendResult(latency_ms=latency_ms, error=f"{type(error).__name__}: {error}"[:1000])
    retry_after = None
    if response.status_code == 429 or response.status_code >= 500:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
    return SendResult(
        status_code=response.status_code,
        latency_ms=latency_ms,
        error=_describe(response.status_code, response),
        response_body=_text(kept[:RESPONSE_BYTES_KEPT]),
        retry_after_s=retry_after,
    )
