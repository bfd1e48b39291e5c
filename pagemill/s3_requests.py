"""The object store's hot requests, PUT and GET of one object, sent over http.client.

Every page costs three of them (prepare stores its image, OCR reads it and stores its
Markdown), and through the minio SDK each took 0.55 to 0.8 ms of CPU, most of it in
urllib3's layers: these take about half that. The request is the SDK's own: its URL
builder (path or virtual-host style, as it would choose), its Signature V4 signer and
its S3Error for an error answer, so the two paths cannot disagree on what they send or
how they fail. Every other request (listing, copying, deleting, streaming) stays on the
SDK.

Retries are the SDK client's (pagemill.storage._make_client): up to two more tries on a
connection error or a 500, 502, 503 or 504, the second after 0.4 s; PUT and GET of a
whole object are idempotent.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import ssl
import threading
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from urllib.parse import SplitResult

from minio.credentials import Credentials
from minio.error import S3Error
from minio.helpers import BaseURL
from minio.signer import sign_v4_s3

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
RETRIED_STATUSES = frozenset({500, 502, 503, 504})
RETRY_PAUSES_S = (0.0, 0.4)
# The region minio signs with when neither the settings nor the endpoint name one and
# the store does not say (GetBucketLocation answers an empty constraint).
DEFAULT_REGION = "us-east-1"


class ObjectRequests:
    """PUT and GET of whole objects in one bucket. Safe to share between threads: each
    thread of each process keeps its own keep-alive connection (a forked child never
    reads from its parent's)."""

    def __init__(
        self,
        endpoint: str,
        secure: bool,
        credentials: Credentials,
        bucket: str,
        region: str | None,
    ) -> None:
        self._base_url = BaseURL(("https://" if secure else "http://") + endpoint, region)
        self._secure = secure
        self._credentials = credentials
        self._bucket = bucket
        self._region = region or self._base_url.region
        self._local = threading.local()

    def put(self, key: str, body: bytes, content_type: str) -> None:
        headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
        self._send("PUT", key, body, headers)

    def get(self, key: str) -> bytes:
        return self._send("GET", key, b"", {})

    def _send(self, method: str, key: str, body: bytes, headers: dict[str, str]) -> bytes:
        region = self._bucket_region()
        url = self._base_url.build(
            method=method, region=region, bucket_name=self._bucket, object_name=key
        )
        return self._with_retries(method, url, body, headers, region, key)

    def _with_retries(
        self,
        method: str,
        url: SplitResult,
        body: bytes,
        headers: dict[str, str],
        region: str,
        key: str | None,
    ) -> bytes:
        for pause_s in (*RETRY_PAUSES_S, None):
            try:
                status, answer, reason = self._exchange(method, url, body, headers, region)
            except (OSError, http.client.HTTPException):
                self._drop_connection(url.netloc)
                if pause_s is None:
                    raise
                time.sleep(pause_s)
                continue
            if status in RETRIED_STATUSES and pause_s is not None:
                time.sleep(pause_s)
                continue
            if status >= 300:
                raise _error_of(status, reason, answer, self._bucket, key)
            return answer
        raise AssertionError("unreachable: the last try returns or raises")

    def _exchange(
        self, method: str, url: SplitResult, body: bytes, headers: dict[str, str], region: str
    ) -> tuple[int, bytes, str]:
        content_sha256 = hashlib.sha256(body).hexdigest()
        date = datetime.now(UTC)
        signed = {
            **headers,
            "Host": url.netloc,
            "x-amz-content-sha256": content_sha256,
            "x-amz-date": date.strftime("%Y%m%dT%H%M%SZ"),
        }
        # Adds the Authorization header to `signed` in place.
        sign_v4_s3(
            method=method,
            url=url,
            region=region,
            headers=signed,  # type: ignore[arg-type]  # the SDK's header type admits lists
            credentials=self._credentials,
            content_sha256=content_sha256,
            date=date,
        )
        path = url.path + (f"?{url.query}" if url.query else "")
        connection = self._connection(url.netloc)
        connection.request(method, path, body=body if method == "PUT" else None, headers=signed)
        response = connection.getresponse()
        return response.status, response.read(), response.reason

    def _connection(self, netloc: str) -> http.client.HTTPConnection:
        held = self._held()
        connection = held.get(netloc)
        if connection is not None:
            return connection
        if self._secure:
            connection = _HTTPSConnection(
                netloc, timeout=CONNECT_TIMEOUT_S, context=ssl.create_default_context()
            )
        else:
            connection = _HTTPConnection(netloc, timeout=CONNECT_TIMEOUT_S)
        held[netloc] = connection
        return connection

    def _drop_connection(self, netloc: str) -> None:
        connection = self._held().pop(netloc, None)
        if connection is not None:
            connection.close()

    def _held(self) -> dict[str, http.client.HTTPConnection]:
        """This thread's connections, by host; none inherited through a fork."""
        if getattr(self._local, "pid", None) != os.getpid():
            self._local.pid, self._local.connections = os.getpid(), {}
        connections: dict[str, http.client.HTTPConnection] = self._local.connections
        return connections

    def _bucket_region(self) -> str:
        if self._region is None:
            # What minio does: ask the bucket once, signing for the default region.
            url = self._base_url.build(
                method="GET",
                region=DEFAULT_REGION,
                bucket_name=self._bucket,
                query_params={"location": ""},
            )
            answer = self._with_retries("GET", url, b"", {}, DEFAULT_REGION, None)
            self._region = ET.fromstring(answer).text or DEFAULT_REGION  # noqa: S314 (see _error_of)
        return self._region


class _HTTPConnection(http.client.HTTPConnection):
    """Connects within CONNECT_TIMEOUT_S, then waits up to READ_TIMEOUT_S for each read
    (http.client has one timeout for both, and reconnects by itself after a close)."""

    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(READ_TIMEOUT_S)


class _HTTPSConnection(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(READ_TIMEOUT_S)


def _error_of(status: int, reason: str, answer: bytes, bucket: str, key: str | None) -> S3Error:
    """The SDK's error for an error answer: its code from the XML body, or, for an answer
    without one, the code the SDK gives that status."""
    fields: dict[str, str | None] = {}
    try:
        # The deployment's own S3 endpoint answers, as parsed by the SDK itself (with the
        # same standard library parser); the body of an error answer is a few hundred bytes.
        root = ET.fromstring(answer)  # noqa: S314
        fields = {child.tag.rsplit("}", 1)[-1]: child.text for child in root}
    except ET.ParseError:
        pass
    code = fields.get("Code") or _CODE_OF_STATUS.get(status, f"HTTP{status}")
    return S3Error(
        None,  # type: ignore[arg-type]  # no urllib3 response: nothing here reads it
        code,
        fields.get("Message") or reason,
        fields.get("Resource"),
        fields.get("RequestId"),
        fields.get("HostId"),
        bucket_name=bucket,
        object_name=key,
    )


_CODE_OF_STATUS = {
    301: "PermanentRedirect",
    307: "Redirect",
    400: "BadRequest",
    403: "AccessDenied",
    404: "NoSuchKey",
    405: "MethodNotAllowed",
    501: "MethodNotAllowed",
    503: "ServiceUnavailable",
}
