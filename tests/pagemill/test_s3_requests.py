"""The object store's own PUT and GET (pagemill.s3_requests) against the real S3 server:
the same objects, errors and outages as through the SDK, on connections that are never
shared between threads or processes and that recover when the server drops them."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from minio.error import S3Error

from pagemill.settings import get_settings
from pagemill.storage import ObjectStore, StorageUnavailable
from tests.pagemill.test_forked_clients import in_child
from tests.support.proxy import TcpProxy


@pytest.fixture()
def key() -> str:
    return f"s3-requests/{uuid.uuid4().hex}"


@pytest.fixture()
def proxied(s3: ObjectStore) -> Iterator[tuple[ObjectStore, TcpProxy]]:
    """A store that reaches S3 through a proxy the test can cut."""
    proxy = TcpProxy("127.0.0.1", 8333)
    store = ObjectStore(get_settings().model_copy(update={"s3_endpoint": proxy.address}))
    try:
        yield store, proxy
    finally:
        proxy.close()


def test_what_is_put_is_read_back_by_both_paths_with_its_type(
    s3: ObjectStore, key: str, tmp_path: Path
) -> None:
    body = bytes(range(256)) * 300  # binary, not a multiple of any buffer size
    s3.put_bytes(f"{key}/bytes", body, "image/png")
    file = tmp_path / "page.md"
    file.write_text("# Seite 1\n\nÜbersicht: 1.085,00 €\n", encoding="utf-8")
    s3.put_file(f"{key}/file.md", file, "text/markdown")

    assert s3.get_bytes(f"{key}/bytes") == body
    assert s3.get_bytes(f"{key}/file.md") == file.read_bytes()
    # The SDK, which serves every other request, sees the same objects and types.
    sdk: Any = s3._client
    assert sdk.stat_object(s3.bucket, f"{key}/bytes").content_type == "image/png"
    assert sdk.stat_object(s3.bucket, f"{key}/file.md").content_type == "text/markdown"
    assert sdk.stat_object(s3.bucket, f"{key}/file.md").size == file.stat().st_size
    response = sdk.get_object(s3.bucket, f"{key}/bytes")
    try:
        assert response.read() == body
    finally:
        response.close()
        response.release_conn()


def test_a_key_with_spaces_and_unicode_is_signed_and_stored_as_named(
    s3: ObjectStore, key: str
) -> None:
    name = f"{key}/Rechnung März 2026 (final)+1.md"
    s3.put_bytes(name, b"ok", "text/markdown")
    assert s3.get_bytes(name) == b"ok"
    assert [item.key for item in s3.list_objects(f"{key}/")] == [name]


def test_a_missing_object_is_none_or_the_sdks_no_such_key(s3: ObjectStore, key: str) -> None:
    assert s3.get_bytes_if_stored(f"{key}/never-written") is None
    with pytest.raises(S3Error) as raised:
        s3.get_bytes(f"{key}/never-written")
    assert raised.value.code == "NoSuchKey"


def test_wrong_credentials_are_refused_not_reported_as_an_outage(key: str) -> None:
    wrong = ObjectStore(get_settings().model_copy(update={"s3_secret_key": "not-the-secret"}))
    with pytest.raises(S3Error) as raised:
        wrong.get_bytes(f"{key}/anything")
    assert raised.value.code == "SignatureDoesNotMatch"


def test_each_thread_reads_on_a_connection_of_its_own(s3: ObjectStore, key: str) -> None:
    bodies = {n: f"page {n} ".encode() * (1000 + n) for n in range(16)}
    for n, body in bodies.items():
        s3.put_bytes(f"{key}/{n}", body, "text/plain")
    read: dict[int, bytes] = {}
    connections: dict[int, int] = {}
    barrier = threading.Barrier(8)

    def reader(start: int) -> None:
        barrier.wait()
        for n in range(start, 16, 8):
            read[n] = s3.get_bytes(f"{key}/{n}")
        connections[start] = id(s3._requests._held()["127.0.0.1:8333"])

    threads = [threading.Thread(target=reader, args=(start,)) for start in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read == bodies
    assert len(set(connections.values())) == 8


def test_a_forked_child_never_reads_on_its_parents_connection(s3: ObjectStore, key: str) -> None:
    s3.put_bytes(key, b"parent", "text/plain")
    parent_connection = s3._requests._held()["127.0.0.1:8333"]

    def child() -> str:
        assert s3._requests._held() == {}, "the parent's connections are not the child's"
        return s3.get_bytes(key).decode()

    assert in_child(child) == "parent"
    assert s3._requests._held()["127.0.0.1:8333"] is parent_connection
    assert s3.get_bytes(key) == b"parent"


def test_a_connection_the_server_dropped_is_replaced_without_an_error(
    proxied: tuple[ObjectStore, TcpProxy], key: str
) -> None:
    store, proxy = proxied
    store.put_bytes(key, b"before", "text/plain")
    held_before = store._requests._held()[proxy.address]
    # What an idle keep-alive connection meets when S3 or a load balancer closes it.
    proxy.cut()
    proxy.restore()
    store.put_bytes(key, b"after", "text/plain")
    assert store.get_bytes(key) == b"after"
    assert store._requests._held()[proxy.address] is not held_before


def test_an_unreachable_store_is_an_outage_within_seconds(
    proxied: tuple[ObjectStore, TcpProxy], key: str
) -> None:
    store, proxy = proxied
    store.put_bytes(key, b"stored", "text/plain")
    proxy.cut()
    started = time.monotonic()
    with pytest.raises(StorageUnavailable, match="unreachable"):
        store.get_bytes(key)
    with pytest.raises(StorageUnavailable, match="unreachable"):
        store.put_bytes(key, b"lost", "text/plain")
    # Two retries, the second after 0.4 s, each refused at once: not a minute's hang.
    assert time.monotonic() - started < 10
    proxy.restore()
    assert store.get_bytes(key) == b"stored"
