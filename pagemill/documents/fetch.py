"""Fetching a document given by URL, in the worker: streamed to a file under the upload's
size cap, its type sniffed from its first bytes, all within a time limit.

An https URL goes through the webhooks' SSRF guard (pagemill.webhooks.ssrf): its host is
resolved, every address checked, and the request sent to the checked address. Redirects
are followed only to https URLs that pass the same check, a few at most. An s3:// URL is
read with the deployment's own S3 credentials, from a bucket it is configured to read
(checked at submit, pagemill.documents.source_url).

Runs in the worker, so it loads no document library: the document itself is opened
later, in a sandboxed child.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx
import urllib3
from minio.error import MinioException

from pagemill.documents.kinds import SNIFF_BYTES, UNSUPPORTED_TYPE_MESSAGE, sniff_kind
from pagemill.documents.source_url import SourceUrl
from pagemill.domain import SourceKind, human_size
from pagemill.settings import Settings
from pagemill.storage import make_s3_client
from pagemill.webhooks.ssrf import (
    Destination,
    DestinationRefused,
    DestinationUnresolvable,
    resolve_destination,
)

# Presigned links rarely redirect at all; a chain longer than this is a loop or a trap.
MAX_REDIRECTS = 3
CHUNK_BYTES = 1024 * 1024
USER_AGENT = "pagemill-fetch/1"

SOURCE_UNREACHABLE = "source_unreachable"
SOURCE_TOO_LARGE = "source_too_large"
UNSUPPORTED_TYPE = "unsupported_type"


class FetchFailed(Exception):
    """The document could not be fetched, or is not one we take; nothing was stored."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class FetchedSource:
    path: Path
    size_bytes: int
    sha256: str
    kind: SourceKind


class _Sink:
    """The file being written: counted against the cap, hashed, and sniffed as soon as
    its first bytes are in, so a stream that is no document stops there."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.size = 0
        self.kind: SourceKind | None = None
        self._head = bytearray()
        self._digest = hashlib.sha256()
        self._out: BinaryIO = path.open("wb")

    def expect_length(self, length: int) -> None:
        if length > self.max_bytes:
            raise _too_large(self.max_bytes, f"it announces {human_size(length)}")

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise _too_large(self.max_bytes, "more was sent")
        if self.kind is None and len(self._head) < SNIFF_BYTES:
            self._head += chunk[: SNIFF_BYTES - len(self._head)]
            if len(self._head) >= SNIFF_BYTES:
                self.kind = _sniff(bytes(self._head))
        self._digest.update(chunk)
        self._out.write(chunk)

    def finish(self) -> FetchedSource:
        self._out.close()
        kind = self.kind or _sniff(bytes(self._head))
        return FetchedSource(self.path, self.size, self._digest.hexdigest(), kind)

    def close(self) -> None:
        self._out.close()


def _sniff(head: bytes) -> SourceKind:
    kind = sniff_kind(head)
    if kind is None:
        raise FetchFailed(
            UNSUPPORTED_TYPE, f"The source_url's document: {UNSUPPORTED_TYPE_MESSAGE}"
        )
    return kind


def _too_large(max_bytes: int, why: str) -> FetchFailed:
    return FetchFailed(
        SOURCE_TOO_LARGE,
        f"The source_url's document is larger than the {human_size(max_bytes)} limit ({why}).",
    )


def fetch_source(source: SourceUrl, destination: Path, settings: Settings) -> FetchedSource:
    """Fetch `source` to `destination`; FetchFailed says why not, with a stable code."""
    sink = _Sink(destination, settings.max_upload_bytes)
    try:
        if source.bucket is not None and source.key is not None:
            _fetch_s3(source.bucket, source.key, sink, settings)
        else:
            asyncio.run(_fetch_https_within(source.url, sink, settings))
        return sink.finish()
    finally:
        sink.close()


def _fetch_s3(bucket: str, key: str, sink: _Sink, settings: Settings) -> None:
    deadline = time.monotonic() + settings.source_fetch_timeout_s
    client = make_s3_client(settings)
    try:
        stat = client.stat_object(bucket, key)
        if stat.size is not None:
            sink.expect_length(stat.size)
        response = client.get_object(bucket, key)
        try:
            for chunk in response.stream(CHUNK_BYTES):
                sink.write(chunk)
                if time.monotonic() > deadline:
                    raise _timed_out(settings, sink)
        finally:
            response.close()
            response.release_conn()
    except (MinioException, urllib3.exceptions.HTTPError, OSError) as error:
        code = getattr(error, "code", None) or type(error).__name__
        raise FetchFailed(
            SOURCE_UNREACHABLE, f"s3://{bucket}/{key} could not be read: {code}."
        ) from None


def _timed_out(settings: Settings, sink: _Sink) -> FetchFailed:
    return FetchFailed(
        SOURCE_UNREACHABLE,
        f"The source_url did not send its document within the {settings.source_fetch_timeout_s:g} "
        f"s limit ({human_size(sink.size)} received).",
    )


async def _fetch_https_within(url: str, sink: _Sink, settings: Settings) -> None:
    # One deadline over everything (resolving, connecting, every read): a server sending
    # a byte a second never trips a per-read timeout.
    try:
        async with asyncio.timeout(settings.source_fetch_timeout_s):
            await _fetch_https(url, sink, settings)
    except TimeoutError:
        raise _timed_out(settings, sink) from None
    except httpx.HTTPError as error:
        raise FetchFailed(
            SOURCE_UNREACHABLE,
            f"The source_url could not be fetched: {type(error).__name__}: {error}"[:1000],
        ) from None


async def _fetch_https(url: str, sink: _Sink, settings: Settings) -> None:
    verify: ssl.SSLContext | bool = True
    if settings.source_fetch_ca_bundle:
        verify = ssl.create_default_context(cafile=settings.source_fetch_ca_bundle)
    # trust_env=False: a proxy from the environment would resolve the name itself and
    # defeat the address check.
    async with httpx.AsyncClient(
        timeout=settings.source_fetch_timeout_s,
        follow_redirects=False,
        trust_env=False,
        verify=verify,
    ) as http:
        for _ in range(MAX_REDIRECTS + 1):
            destination = _checked(url, settings)
            extensions = {"sni_hostname": destination.server_name}
            headers = {
                "host": destination.host_header,
                "user-agent": USER_AGENT,
                # Stored as sent: no decompression, so the cap counts what is stored.
                "accept-encoding": "identity",
            }
            request = http.build_request(
                "GET", destination.connect_url, headers=headers, extensions=extensions
            )
            response = await http.send(request, stream=True)
            try:
                if response.is_redirect:
                    url = _redirect_target(url, response)
                    continue
                if response.status_code != 200:
                    raise FetchFailed(
                        SOURCE_UNREACHABLE,
                        f"The source_url answered HTTP {response.status_code}.",
                    )
                length = response.headers.get("content-length", "")
                if length.isdigit():
                    sink.expect_length(int(length))
                async for chunk in response.aiter_raw(CHUNK_BYTES):
                    sink.write(chunk)
                return
            finally:
                await response.aclose()
    raise FetchFailed(
        SOURCE_UNREACHABLE, f"The source_url redirected more than {MAX_REDIRECTS} times."
    )


def _checked(url: str, settings: Settings) -> Destination:
    try:
        return resolve_destination(url, settings.source_fetch_allowed_hosts)
    except DestinationRefused as refused:
        raise FetchFailed(
            SOURCE_UNREACHABLE, f"The source_url may not be fetched: {refused}."
        ) from None
    except DestinationUnresolvable as unresolvable:
        raise FetchFailed(SOURCE_UNREACHABLE, f"The source_url's host {unresolvable}.") from None


def _redirect_target(url: str, response: httpx.Response) -> str:
    location = response.headers.get("location", "")
    target = httpx.URL(url).join(location)
    if target.scheme != "https":
        raise FetchFailed(
            SOURCE_UNREACHABLE,
            f"The source_url redirected to {str(target)[:200]}, which is not https; not followed.",
        )
    return str(target)
