"""What a stage needs from the outside world, passed in so tests can build their own."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from pagemill.settings import Settings
from pagemill.storage import ObjectStore


@dataclass(frozen=True)
class StageContext:
    settings: Settings
    sessions: sessionmaker[Session]
    store: ObjectStore
