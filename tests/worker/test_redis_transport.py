"""The Redis transport every pagemill process publishes through: one redis client per
channel for its commands, on real Redis, with messages published and acknowledged
through it as through kombu's own."""

from __future__ import annotations

import os
import threading
from typing import Any

import redis
from kombu import Connection

from pagemill import redis_transport
from pagemill.queue import OCR_TASK, make_celery
from pagemill.settings import get_settings
from worker import broker


def test_publishers_and_workers_use_the_shared_client_transport() -> None:
    settings = get_settings()
    assert make_celery(settings).conf.broker_transport == redis_transport.TRANSPORT
    from worker.celery_app import app

    assert app.conf.broker_transport == broker.TRANSPORT
    assert issubclass(broker.Channel, redis_transport.Channel)


def test_a_channel_reuses_one_client_until_its_pool_changes() -> None:
    with Connection(get_settings().broker_url, transport=redis_transport.Transport) as connection:
        channel: Any = connection.default_channel
        first = channel._create_client()
        assert channel._create_client() is first
        with channel.conn_or_acquire() as client:
            assert client is first
        # The consuming client is kombu's own, one per call as before.
        assert channel._create_client(asynchronous=True) is not first
        # A new pool (kombu makes one after a fork or a reconnect) gets a new client.
        channel._pool = None
        second = channel._create_client()
        assert second is not first
        assert second.connection_pool is channel.pool


def test_messages_published_from_many_threads_all_arrive(redis_client: redis.Redis) -> None:
    settings = get_settings()
    queue = settings.queue(f"transport-scratch-{os.getpid()}")
    app = make_celery(settings)
    published = 200

    def publish(first: int) -> None:
        for page_id in range(first, first + published // 4):
            app.send_task(OCR_TASK, args=[page_id], queue=queue)

    threads = [threading.Thread(target=publish, args=(n * published // 4,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert redis_client.llen(queue) == published
    finally:
        redis_client.delete(queue)


def test_a_channel_receives_and_acknowledges_through_the_shared_client(
    redis_client: redis.Redis,
) -> None:
    settings = get_settings()
    queue = settings.queue(f"transport-acks-{os.getpid()}")
    with Connection(settings.broker_url, transport=redis_transport.Transport) as connection:
        simple = connection.SimpleQueue(queue)
        try:
            for number in range(3):
                simple.put({"n": number})
            received = [simple.get(timeout=5) for _ in range(3)]
            assert sorted(message.payload["n"] for message in received) == [0, 1, 2]
            channel: Any = simple.channel
            tags = [message.delivery_tag for message in received]
            # Held as unacknowledged (written through the shared client) until acked.
            assert all(redis_client.hexists(channel.unacked_key, tag) for tag in tags)
            for message in received:
                message.ack()
            assert not any(redis_client.hexists(channel.unacked_key, tag) for tag in tags)
        finally:
            simple.close()
            redis_client.delete(queue)
