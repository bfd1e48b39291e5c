"""Object storage through the minio SDK, against any S3 endpoint; the PUT and GET of
a whole object, three for every page, are sent by pagemill.s3_requests with the SDK's
own signer, at half the CPU.

Keys are deterministic (`jobs/{job_id}/pages/{n}.png`), so a redelivered task
overwrites its own output instead of leaving a second copy. A page's OCR result is kept
by attempt (`pages/{n}.attempt-{a}.md`), its row naming the attempt that won, so an
attempt that lost the page cannot overwrite the winner's. Objects are private; callers
reach them through the API or presigned URLs.
"""

from __future__ import annotations

import functools
import http.client
import io
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, ParamSpec, TypeVar

import urllib3
from minio import Minio
from minio.commonconfig import CopySource
from minio.credentials import Credentials
from minio.deleteobjects import DeleteObject
from minio.error import MinioException, S3Error, ServerError

from pagemill.s3_requests import ObjectRequests
from pagemill.settings import Settings, get_settings

P = ParamSpec("P")
T = TypeVar("T")

# S3 errors that mean "try again later", not "this request is wrong". A request signed
# more than 15 minutes off the store's clock is this host's fault, not the document's:
# another host retries it (tests/multihost).
_RETRYABLE_S3_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "ServiceFailure",
        "RequestTimeTooSkewed",
    }
)


# What S3 servers answer for a key that holds no object.
_MISSING_CODES = frozenset({"NoSuchKey", "NoSuchObject", "NotFound"})


# Objects up to this size go in one PUT of the bytes in memory (pagemill.s3_requests):
# page images, page results and documents. Larger ones go through the SDK, which
# streams them in parts.
ONE_REQUEST_MAX_BYTES = 32 * 1024 * 1024


class StorageUnavailable(Exception):
    """The object store cannot be reached or is failing; the operation may be retried."""


def _outages_as_unavailable(method: Callable[P, T]) -> Callable[P, T]:
    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except S3Error as error:
            if error.code in _RETRYABLE_S3_CODES:
                raise StorageUnavailable(f"Object storage is failing: {error.code}") from error
            raise
        except (
            ServerError,
            urllib3.exceptions.HTTPError,
            http.client.HTTPException,
            OSError,
        ) as error:
            raise StorageUnavailable(
                f"Object storage is unreachable: {type(error).__name__}"
            ) from error
        except MinioException as error:
            raise StorageUnavailable(f"Object storage error: {type(error).__name__}") from error

    return wrapper


class JobKeys:
    """Where each object of a job lives."""

    def __init__(self, job_id: uuid.UUID | str) -> None:
        self.prefix = f"jobs/{job_id}"

    @property
    def source(self) -> str:
        return f"{self.prefix}/source"

    def page_image(self, number: int) -> str:
        return f"{self.prefix}/pages/{number}.png"

    def page_pdf(self, number: int) -> str:
        return f"{self.prefix}/pages/{number}.pdf"

    def page_markdown(self, number: int, attempt: int | None) -> str:
        """The Markdown one attempt at the page wrote. Each attempt writes its own object:
        an attempt whose lease ran out while it worked, and which another attempt then won,
        must not overwrite the winner's result on its way to being refused. The page's row
        names the attempt whose objects are its result (pages.result_attempt); None names
        the one object of a page read before results were kept by attempt."""
        return self._page_result(number, attempt, "md")

    def page_blocks(self, number: int, attempt: int | None) -> str:
        """The page's blocks layer (pagemill.documents.blocks.PageBlocks) as JSON, kept by
        attempt as its Markdown is (`page_markdown`)."""
        return self._page_result(number, attempt, "json")

    def _page_result(self, number: int, attempt: int | None, suffix: str) -> str:
        if attempt is None:
            return f"{self.prefix}/pages/{number}.{suffix}"
        return f"{self.prefix}/pages/{number}.attempt-{attempt}.{suffix}"

    @property
    def document(self) -> str:
        return f"{self.prefix}/document.md"

    @property
    def manifest(self) -> str:
        return f"{self.prefix}/manifest.json"

    @property
    def invoice(self) -> str:
        """The invoice data of a job with extract=invoice (pagemill.invoices.InvoiceDocument)."""
        return f"{self.prefix}/invoice.json"


@dataclass(frozen=True)
class StoredObject:
    key: str
    size_bytes: int


class ObjectStore:
    def __init__(self, settings: Settings) -> None:
        self.bucket = settings.s3_bucket
        self._settings = settings
        self._minio: Minio | None = None
        self._minio_pid = 0
        self._bucket_checked = False
        self._requests = ObjectRequests(
            settings.s3_endpoint,
            settings.s3_secure,
            Credentials(settings.s3_access_key, settings.s3_secret_key),
            settings.s3_bucket,
            settings.s3_region,
        )

    @property
    def _client(self) -> Minio:
        # urllib3 knows nothing of forks: a forked child would reuse its parent's
        # keep-alive connections and read responses meant for the parent. A process
        # uses only the client it made itself.
        if self._minio is None or self._minio_pid != os.getpid():
            self._minio, self._minio_pid = _make_client(self._settings), os.getpid()
        return self._minio

    @_outages_as_unavailable
    def ensure_bucket(self) -> None:
        if self._bucket_checked:
            return
        try:
            if not self._client.bucket_exists(self.bucket):
                self._client.make_bucket(self.bucket)
        except S3Error as error:
            # Two processes racing to create it is fine.
            if error.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
        self._bucket_checked = True

    @_outages_as_unavailable
    def put_bytes(self, key: str, data: bytes, content_type: str) -> None:
        self.ensure_bucket()
        if len(data) <= ONE_REQUEST_MAX_BYTES:
            self._requests.put(key, data, content_type)
            return
        self._client.put_object(
            self.bucket, key, io.BytesIO(data), len(data), content_type=content_type
        )

    @_outages_as_unavailable
    def put_file(self, key: str, path: Path, content_type: str) -> None:
        self.ensure_bucket()
        if path.stat().st_size <= ONE_REQUEST_MAX_BYTES:
            self._requests.put(key, path.read_bytes(), content_type)
            return
        self._client.fput_object(self.bucket, key, str(path), content_type=content_type)

    @_outages_as_unavailable
    def put_stream(self, key: str, stream: BinaryIO, length: int, content_type: str) -> None:
        self.ensure_bucket()
        self._client.put_object(self.bucket, key, stream, length, content_type=content_type)

    @_outages_as_unavailable
    def get_bytes(self, key: str) -> bytes:
        return self._read(key)

    @_outages_as_unavailable
    def get_bytes_if_stored(self, key: str) -> bytes | None:
        """get_bytes, or None when no object has the key: one request where asking
        `exists` first would make two."""
        try:
            return self._read(key)
        except S3Error as error:
            if error.code in _MISSING_CODES:
                return None
            raise

    def _read(self, key: str) -> bytes:
        return self._requests.get(key)

    @_outages_as_unavailable
    def download_file(self, key: str, path: Path) -> None:
        self._client.fget_object(self.bucket, key, str(path))

    @_outages_as_unavailable
    def open_chunks(self, key: str, chunk_bytes: int = 64 * 1024) -> Iterator[bytes] | None:
        """The object's bytes in chunks, from a request S3 has already answered, or None
        when no object has the key: a missing object is known before anything is sent
        on, in one request where asking `exists` first would make two (and leave the
        object time to go between them)."""
        try:
            response = self._client.get_object(self.bucket, key)
        except S3Error as error:
            if error.code in _MISSING_CODES:
                return None
            raise
        return _chunks_of(response, chunk_bytes)

    @_outages_as_unavailable
    def exists(self, key: str) -> bool:
        try:
            self._client.stat_object(self.bucket, key)
        except S3Error as error:
            if error.code in _MISSING_CODES:
                return False
            raise
        return True

    @_outages_as_unavailable
    def list_objects(self, prefix: str) -> list[StoredObject]:
        return [
            StoredObject(item.object_name, item.size or 0)
            for item in self._client.list_objects(self.bucket, prefix=prefix, recursive=True)
            if item.object_name is not None
        ]

    @_outages_as_unavailable
    def remove_objects(self, keys: list[str]) -> None:
        # One request per thousand keys (the S3 limit), not one per key. The minio SDK
        # sends lazily: the errors must be read for the requests to be made at all.
        errors = list(self._client.remove_objects(self.bucket, (DeleteObject(k) for k in keys)))
        if errors:
            raise StorageUnavailable(f"Object storage refused to remove {errors[0].name}")

    @_outages_as_unavailable
    def copy_object(self, source_key: str, key: str) -> None:
        """Copy inside the bucket, without the bytes passing through this process."""
        self._client.copy_object(self.bucket, key, CopySource(self.bucket, source_key))

    @_outages_as_unavailable
    def delete_prefix(self, prefix: str) -> None:
        for item in self._client.list_objects(self.bucket, prefix=prefix, recursive=True):
            if item.object_name is not None:
                self._client.remove_object(self.bucket, item.object_name)

    def presigned_get_url(self, key: str, expires: timedelta) -> str:
        return self._client.presigned_get_object(self.bucket, key, expires=expires)


def make_s3_client(settings: Settings) -> Minio:
    """A client of the deployment's S3, for reading other buckets than its own
    (s3:// source URLs, pagemill.documents.fetch)."""
    return _make_client(settings)


def _make_client(settings: Settings) -> Minio:
    # Bounded timeouts and few retries: a dead endpoint must surface as an outage
    # within seconds so the task can back off, not hang for minutes.
    http_client = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=5, read=60),
        maxsize=10,
        retries=urllib3.Retry(total=2, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
    )
    return Minio(
        settings.s3_endpoint,
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key,
        secure=settings.s3_secure,
        region=settings.s3_region,
        http_client=http_client,
    )


@lru_cache(maxsize=1)
def get_object_store() -> ObjectStore:
    return ObjectStore(get_settings())


def _chunks_of(response: urllib3.BaseHTTPResponse, chunk_bytes: int) -> Iterator[bytes]:
    try:
        yield from response.stream(chunk_bytes)
    finally:
        response.close()
        response.release_conn()
