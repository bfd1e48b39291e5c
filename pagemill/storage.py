"""Object storage through the minio SDK, against any S3 endpoint.

Keys are deterministic (`jobs/{job_id}/pages/{n}.md`), so a redelivered task
overwrites its own output instead of leaving a second copy. Objects are private;
callers reach them through the API or presigned URLs.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from minio import Minio
from minio.error import S3Error

from pagemill.settings import Settings, get_settings


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

    def page_markdown(self, number: int) -> str:
        return f"{self.prefix}/pages/{number}.md"

    @property
    def document(self) -> str:
        return f"{self.prefix}/document.md"

    @property
    def manifest(self) -> str:
        return f"{self.prefix}/manifest.json"


class ObjectStore:
    def __init__(self, settings: Settings) -> None:
        self.bucket = settings.s3_bucket
        self._client = Minio(
            settings.s3_endpoint,
            access_key=settings.s3_access_key,
            secret_key=settings.s3_secret_key,
            secure=settings.s3_secure,
            region=settings.s3_region,
        )
        self._bucket_checked = False

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

    def put_bytes(self, key: str, data: bytes, content_type: str) -> None:
        self.ensure_bucket()
        self._client.put_object(
            self.bucket, key, io.BytesIO(data), len(data), content_type=content_type
        )

    def put_file(self, key: str, path: Path, content_type: str) -> None:
        self.ensure_bucket()
        self._client.fput_object(self.bucket, key, str(path), content_type=content_type)

    def put_stream(self, key: str, stream: BinaryIO, length: int, content_type: str) -> None:
        self.ensure_bucket()
        self._client.put_object(self.bucket, key, stream, length, content_type=content_type)

    def get_bytes(self, key: str) -> bytes:
        response = self._client.get_object(self.bucket, key)
        try:
            return response.read()
        finally:
            response.close()
            response.release_conn()

    def download_file(self, key: str, path: Path) -> None:
        self._client.fget_object(self.bucket, key, str(path))

    def iter_chunks(self, key: str, chunk_bytes: int = 64 * 1024) -> Iterator[bytes]:
        response = self._client.get_object(self.bucket, key)
        try:
            yield from response.stream(chunk_bytes)
        finally:
            response.close()
            response.release_conn()

    def exists(self, key: str) -> bool:
        try:
            self._client.stat_object(self.bucket, key)
        except S3Error as error:
            if error.code in ("NoSuchKey", "NoSuchObject", "NotFound"):
                return False
            raise
        return True

    def delete_prefix(self, prefix: str) -> None:
        for item in self._client.list_objects(self.bucket, prefix=prefix, recursive=True):
            if item.object_name is not None:
                self._client.remove_object(self.bucket, item.object_name)

    def presigned_get_url(self, key: str, expires: timedelta) -> str:
        return self._client.presigned_get_object(self.bucket, key, expires=expires)


@lru_cache(maxsize=1)
def get_object_store() -> ObjectStore:
    return ObjectStore(get_settings())
