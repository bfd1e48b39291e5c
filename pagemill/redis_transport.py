"""The Redis transport pagemill publishes through: kombu's, with one redis client per
channel for its commands rather than a new one for each.

kombu builds a new redis.Redis for every publish, ack and requeue, and redis-py fills
a table of some 80 reply callbacks in each: a page paid for it when its message was
published, when a worker received it and when the worker acknowledged it. A client
holds no connection of its own (each command borrows one from the pool), so one client
can serve every thread; a channel with a new pool (after a fork, or a reconnect) makes
a new client.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis

TRANSPORT = f"{__name__}:Transport"


class Channel(kombu_redis.Channel):
    _commands_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # the client kombu consumes with (BRPOP): kombu keeps it
            return super()._create_client(asynchronous)
        pool = self.pool
        client = self._commands_client
        if client is None or client.connection_pool is not pool:
            client = super()._create_client(asynchronous=False)
            self._commands_client = client
        return client


class Transport(kombu_redis.Transport):
    Channel = Channel
