"""The Redis transport the workers consume through: pagemill's (one client for its
commands, pagemill.redis_transport), with every message screened (worker.messages)
as it comes off a queue, before kombu or Celery decode it.

The screen sits in the BRPOP reply: kombu's transport pops a message and decodes
it in one step, with nothing to catch what fails, so the reply is checked as
redis-py parses it (a response callback, redis-py's own hook for that). A message
that fails is parked and counted (pagemill.dead_letter) and the reply reads as
"nothing popped", which kombu treats as an ordinary empty poll.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from pagemill import redis_transport
from pagemill.dead_letter import park
from pagemill.settings import get_settings
from worker.messages import screen

log = logging.getLogger(__name__)

TRANSPORT = f"{__name__}:Transport"


class Channel(redis_transport.Channel):
    def _create_client(self, asynchronous: bool = False) -> Any:
        client = super()._create_client(asynchronous)
        if asynchronous:  # the client kombu consumes with (BRPOP)
            client.set_response_callback("BRPOP", self._screen_popped)
        return client

    def _screen_popped(self, response: Any, **_: Any) -> tuple[bytes, bytes] | None:
        if not response:
            return None
        key, raw = response
        problem = screen(raw)
        if problem is None:
            return key, raw
        queue = key.decode(errors="replace").rsplit(self.sep, 1)[0]
        log.error("parked a message from %s (%s): %s", queue, problem.reason, problem.detail)
        try:
            with self.conn_or_acquire() as client:
                park(client, get_settings(), queue, problem.reason, problem.detail, raw)
        except redis.RedisError:
            # The message is already off its queue; losing it beats stopping the worker.
            log.exception("could not park the message from %s; dropped", queue)
        return None


class Transport(redis_transport.Transport):
    Channel = Channel
