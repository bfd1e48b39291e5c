"""This worker in the registry: registered at start, heartbeat while alive, stopped
on shutdown. The id is chosen in the parent before the pool forks, so every pool
child charges its pages to the same worker row."""

from __future__ import annotations

import logging
import os
import platform
import socket
import threading
import uuid
from decimal import Decimal
from importlib import metadata

from sqlalchemy.orm import Session, sessionmaker

from pagemill.engines import catalog
from pagemill.engines.catalog import EngineKind
from pagemill.settings import Settings
from pagemill.workers import registry
from worker.engines.registry import licence_basis

log = logging.getLogger(__name__)

_worker_id: str | None = None


def worker_id() -> str | None:
    return _worker_id


def choose_worker_id() -> str:
    global _worker_id
    _worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return _worker_id


def engine_for_queues(queues: list[str], settings: Settings) -> str:
    """The GPU engine whose queues this worker consumes, else the CPU OCR engine."""
    consumed = set(queues)
    for spec in catalog.ENGINES:
        gpu_queues = {settings.queue(stage) for stage in spec.queues.stages}
        if spec.kind is EngineKind.gpu and gpu_queues & consumed:
            return spec.name
    return settings.ocr_engine


def build_registration(queues: list[str], settings: Settings) -> registry.Registration:
    assert _worker_id is not None, "choose_worker_id() runs first"
    engine = engine_for_queues(queues, settings)
    basis = licence_basis(engine)
    reference = None if basis.model_permits_commercial else settings.commercial_license_reference
    return registry.Registration(
        id=_worker_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        queues=sorted(queues),
        device_kind=settings.device_kind,
        device_count=settings.device_count,
        price_usd_per_hour=Decimal(str(settings.device_price_usd_per_hour)),
        engine=engine,
        model=basis.model,
        model_license=basis.model_license,
        model_permits_commercial=basis.model_permits_commercial,
        deployment_license_reference=reference,
        versions=_versions(),
    )


def refuse_unlicensed_commercial_queue(
    registration: registry.Registration, settings: Settings
) -> str | None:
    """A reason to refuse to start, or None. Consuming the commercial queue without a
    commercial basis would process commercial pages the licence does not allow."""
    commercial = [settings.queue(stage) for stage in catalog.COMMERCIAL_STAGES]
    consumed = [queue for queue in commercial if queue in registration.queues]
    if not consumed:
        return None
    if registration.permits_commercial:
        return None
    return (
        f"this worker consumes {', '.join(consumed)} but runs "
        f"{registration.model} ({registration.model_license}) without a commercial licence: "
        "set PAGEMILL_COMMERCIAL_LICENSE_REFERENCE or drop that queue"
    )


def start_heartbeat(
    sessions: sessionmaker[Session], registration: registry.Registration, settings: Settings
) -> threading.Event:
    with sessions.begin() as session:
        registry.register(session, registration)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(settings.heartbeat_interval_s):
            try:
                with sessions.begin() as session:
                    registry.heartbeat(session, registration)
            except Exception:
                log.warning("heartbeat failed; retrying", exc_info=True)

    threading.Thread(target=beat, name="pagemill-heartbeat", daemon=True).start()
    return stop


def stop_heartbeat(sessions: sessionmaker[Session], stop: threading.Event, worker: str) -> None:
    stop.set()
    try:
        with sessions.begin() as session:
            registry.mark_stopped(session, worker)
    except Exception:
        log.warning("could not mark worker %s stopped; it will age out", worker)


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("pagemill", "pymupdf", "rapidocr", "onnxruntime", "celery", "vllm"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions
