"""What a task message on our queues must look like, checked before Celery reads it.

Kombu and Celery trust the queue: a message that is not JSON, not an envelope,
or whose body or headers have the wrong types raises inside the consumer, and
Celery stops the worker ("Unrecoverable error"), or drops into a reconnect loop.
So every message is held to the shape our own publishers send (Celery's protocol
2 in JSON, one of our task names, ids as arguments) before Celery sees it; what
does not fit is parked (pagemill.dead_letter), not run.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from pagemill.dead_letter import Reason
from pagemill.queue import FINALIZE_TASK, OCR_TASK, PREPARE_TASK, WEBHOOK_DELIVERY_TASK


@dataclass(frozen=True)
class Problem:
    reason: str
    detail: str


def _uuid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _row_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# Each task we publish, and a check per positional argument.
TASK_ARGUMENTS: dict[str, tuple[Callable[[Any], bool], ...]] = {
    PREPARE_TASK: (_uuid,),
    OCR_TASK: (_row_id,),
    FINALIZE_TASK: (_uuid,),
    WEBHOOK_DELIVERY_TASK: (_uuid,),
}


def _iso_datetime(value: str | None) -> str | None:
    if value is not None:
        datetime.fromisoformat(value)
    return value


class _Strict(BaseModel):
    # Extra keys are allowed: a newer Celery may add headers; only the ones Celery
    # parses are held to a type.
    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


class _DeliveryInfo(_Strict):
    exchange: StrictStr
    routing_key: StrictStr


class _Properties(_Strict):
    delivery_tag: StrictStr
    body_encoding: Literal["base64"]
    delivery_info: _DeliveryInfo
    priority: StrictInt = 0


class _Headers(_Strict):
    task: StrictStr
    id: StrictStr
    retries: StrictInt = 0
    eta: StrictStr | None = None
    expires: StrictStr | float | None = None
    # [hard, soft] seconds
    timelimit: Annotated[list[float | None], Field(min_length=2, max_length=2)] | None = None
    root_id: StrictStr | None = None
    parent_id: StrictStr | None = None
    group: StrictStr | None = None
    group_index: StrictInt | None = None
    shadow: StrictStr | None = None
    argsrepr: StrictStr | None = None
    kwargsrepr: StrictStr | None = None
    origin: StrictStr | None = None
    ignore_result: bool | None = None
    replaced_task_nesting: StrictInt | None = None
    stamped_headers: list[StrictStr] | None = None
    stamps: dict[str, Any] | None = None

    def check_times(self) -> None:
        _iso_datetime(self.eta)
        if isinstance(self.expires, str):
            _iso_datetime(self.expires)


class _Envelope(_Strict):
    body: StrictStr
    content_type: Literal["application/json"] = Field(alias="content-type")
    content_encoding: Literal["utf-8"] = Field(alias="content-encoding")
    headers: _Headers
    properties: _Properties


class _Embed(_Strict):
    # Our publishers never chain tasks: a message that asks to run others after it
    # did not come from us.
    callbacks: None = None
    errbacks: None = None
    chain: None = None
    chord: None = None


def screen(raw: bytes) -> Problem | None:
    """None when `raw` is a task message we send; otherwise what is wrong with it."""
    try:
        decoded = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as error:
        return Problem(Reason.undecodable, f"not JSON: {error}")
    try:
        envelope = _Envelope.model_validate(decoded)
        envelope.headers.check_times()
    except (ValidationError, ValueError) as error:
        return Problem(Reason.not_a_message, _first_error(error))
    try:
        body = json.loads(base64.b64decode(envelope.body, validate=True))
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        return Problem(Reason.not_a_task, f"body is not base64 JSON: {error}")
    return _check_task(envelope.headers.task, body)


def _check_task(task: str, body: Any) -> Problem | None:
    checks = TASK_ARGUMENTS.get(task)
    if checks is None:
        return Problem(Reason.not_a_task, f"unknown task {task[:100]!r}")
    if not (isinstance(body, list) and len(body) == 3):
        return Problem(Reason.not_a_task, "body is not [args, kwargs, embed]")
    args, kwargs, embed = body
    try:
        _Embed.model_validate(embed)
    except ValidationError as error:
        return Problem(Reason.not_a_task, f"embed: {_first_error(error)}")
    if not isinstance(args, list) or kwargs != {}:
        return Problem(Reason.bad_arguments, f"{task} takes positional arguments only")
    shaped = len(args) == len(checks) and all(
        check(arg) for check, arg in zip(checks, args, strict=True)
    )
    if not shaped:
        return Problem(Reason.bad_arguments, f"{task} got arguments {json.dumps(args)[:200]}")
    return None


def _first_error(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "message"
        return f"{where}: {first['msg']}"
    return str(error)[:200]
