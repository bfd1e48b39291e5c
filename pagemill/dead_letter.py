"""Messages no worker could read: parked in Redis and counted, never fatal.

Anyone who can write to the broker can put anything in a queue. A message that is
not a task message this deployment sends is taken off its queue, kept on the
`<prefix>dead-letter` list for a person to look at (newest first, the last
MAX_PARKED only, since Redis runs without eviction), and counted by queue and
reason in the `<prefix>poison-messages` hash, which /metrics reads, so the count
holds across worker processes and restarts.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import cast

import redis

from pagemill.settings import Settings

DEAD_LETTER = "dead-letter"
POISON_COUNTS = "poison-messages"
# Enough to see what went wrong; a flood of garbage cannot fill Redis.
MAX_PARKED = 10_000
# A record keeps at most this much of the message itself.
MAX_PARKED_BYTES = 64 * 1024


class Reason:
    """Why a message was parked: a few fixed values, as metric labels."""

    undecodable = "undecodable"  # not JSON text
    not_a_message = "not_a_message"  # JSON, but not a message envelope
    not_a_task = "not_a_task"  # an envelope whose body or headers are not a task we run
    bad_arguments = "bad_arguments"  # one of our tasks, with arguments of the wrong shape


def park(
    client: redis.Redis, settings: Settings, queue: str, reason: str, detail: str, raw: bytes
) -> None:
    record = {
        "queue": queue,
        "reason": reason,
        "detail": detail,
        "parked_at": datetime.now(UTC).isoformat(),
        "message_base64": base64.b64encode(raw[:MAX_PARKED_BYTES]).decode(),
        "message_bytes": len(raw),
    }
    key = settings.queue(DEAD_LETTER)
    pipeline = client.pipeline(transaction=True)
    pipeline.lpush(key, json.dumps(record))
    pipeline.ltrim(key, 0, MAX_PARKED - 1)
    pipeline.hincrby(settings.queue(POISON_COUNTS), _field(queue, reason), 1)
    pipeline.execute()


def poison_counts(client: redis.Redis, settings: Settings) -> dict[tuple[str, str], int]:
    """Messages parked so far, by (queue, reason)."""
    counts = cast(dict[bytes, bytes], client.hgetall(settings.queue(POISON_COUNTS)))
    found: dict[tuple[str, str], int] = {}
    for field, count in counts.items():
        queue, _, reason = field.decode().rpartition("\t")
        found[(queue, reason)] = int(count)
    return found


def parked(client: redis.Redis, settings: Settings) -> list[dict[str, object]]:
    """The parked records, newest first."""
    items = cast(list[bytes], client.lrange(settings.queue(DEAD_LETTER), 0, -1))
    return [json.loads(item) for item in items]


def _field(queue: str, reason: str) -> str:
    return f"{queue}\t{reason}"
