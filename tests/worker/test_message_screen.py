"""The screen that stands between a queue and Celery: what our publishers send
passes; anything else is named for what is wrong with it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import redis

from pagemill.dead_letter import Reason
from pagemill.queue import (
    FINALIZE_TASK,
    OCR_TASK,
    PREPARE_TASK,
    WEBHOOK_DELIVERY_TASK,
    make_celery,
)
from pagemill.settings import get_settings
from worker.messages import TASK_ARGUMENTS, screen

JOB_ID = "4b0a3c4e-8f1e-4f57-9a55-2c1c0b5b8a10"


def published(client: redis.Redis, task: str, args: list[Any], **options: Any) -> bytes:
    """The bytes Celery itself puts on a queue for this task."""
    scratch = get_settings().queue("screen-scratch")
    make_celery(get_settings()).send_task(task, args=args, queue=scratch, **options)
    raw = client.rpop(scratch)
    assert isinstance(raw, bytes)
    return raw


def with_body(raw: bytes, body: Any, **headers: Any) -> bytes:
    envelope = json.loads(raw)
    envelope["body"] = base64.b64encode(json.dumps(body).encode()).decode()
    envelope["headers"].update(headers)
    return json.dumps(envelope).encode()


def with_field(raw: bytes, **fields: Any) -> bytes:
    return json.dumps({**json.loads(raw), **fields}).encode()


@pytest.mark.parametrize(
    ("task", "args", "options"),
    [
        (PREPARE_TASK, [JOB_ID], {}),
        (OCR_TASK, [42], {"countdown": 5}),
        (FINALIZE_TASK, [JOB_ID], {"expires": 60}),
        (WEBHOOK_DELIVERY_TASK, [JOB_ID], {"countdown": 0.5}),
    ],
)
def test_what_we_publish_passes(
    redis_client: redis.Redis, task: str, args: list[Any], options: dict[str, Any]
) -> None:
    assert screen(published(redis_client, task, args, **options)) is None


def test_every_task_the_worker_runs_has_an_argument_shape() -> None:
    from worker.celery_app import app

    app.loader.import_default_modules()
    ours = {name for name in app.tasks if name.startswith("pagemill.")}
    assert ours and ours <= set(TASK_ARGUMENTS)


def test_garbage_is_named(redis_client: redis.Redis) -> None:
    good = published(redis_client, PREPARE_TASK, [JOB_ID])
    envelope = json.loads(good)
    cases = {
        b'"x"': Reason.not_a_message,
        b"not json": Reason.undecodable,
        b"[]": Reason.not_a_message,
        b"\xff\xfe\x00\x01": Reason.undecodable,
        b"{}": Reason.not_a_message,
        with_field(good, properties="x"): Reason.not_a_message,
        with_field(good, properties={"body_encoding": "base64"}): Reason.not_a_message,
        with_field(good, headers=None): Reason.not_a_message,
        with_field(good, headers=[]): Reason.not_a_message,
        with_field(good, headers={"id": "1"}): Reason.not_a_message,
        with_field(good, **{"content-type": "application/x-python-serialize"}): (
            Reason.not_a_message
        ),
        with_body(good, [[JOB_ID], {}, {}], id=None): Reason.not_a_message,
        with_body(good, [[JOB_ID], {}, {}], eta="not a date"): Reason.not_a_message,
        with_body(good, [[JOB_ID], {}, {}], expires="zz"): Reason.not_a_message,
        with_body(good, [[JOB_ID], {}, {}], retries="x"): Reason.not_a_message,
        with_body(good, [[JOB_ID], {}, {}], timelimit="x"): Reason.not_a_message,
        with_field(good, body="!!!"): Reason.not_a_task,
        with_field(good, body=base64.b64encode(b"not json").decode()): Reason.not_a_task,
        with_body(good, [1]): Reason.not_a_task,
        with_body(good, "x"): Reason.not_a_task,
        with_body(good, [[JOB_ID], {}, "x"]): Reason.not_a_task,
        with_body(good, [[JOB_ID], {}, {"callbacks": [{"task": "x"}]}]): Reason.not_a_task,
        with_body(good, [[JOB_ID], {}, {}], task="celery.chord_unlock"): Reason.not_a_task,
        with_body(good, ["x", {}, {}]): Reason.bad_arguments,
        with_body(good, [[], [], {}]): Reason.bad_arguments,
        with_body(good, [[], {}, {}]): Reason.bad_arguments,
        with_body(good, [[{"a": 1}], {}, {}]): Reason.bad_arguments,
        with_body(good, [[JOB_ID, JOB_ID], {}, {}]): Reason.bad_arguments,
        with_body(good, [["not-a-uuid"], {}, {}]): Reason.bad_arguments,
        with_body(good, [[], {"job_id": JOB_ID}, {}]): Reason.bad_arguments,
        with_body(good, [[True], {}, {}], task=OCR_TASK): Reason.bad_arguments,
        with_body(good, [["7"], {}, {}], task=OCR_TASK): Reason.bad_arguments,
    }
    assert envelope["headers"]["task"] == PREPARE_TASK
    found = {raw: getattr(screen(raw), "reason", None) for raw in cases}
    assert found == cases
