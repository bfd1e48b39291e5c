"""The one settings object. Every value comes from `PAGEMILL_*` environment
variables (or a `.env` file) and every default is documented here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Refused in production: see the validator below.
DEVELOPMENT_S3_SECRET = "pagemill-dev-secret"  # noqa: S105

# Refused in production: see the validator below.
DEVELOPMENT_S3_SECRET = "pagemill-dev-secret"  # noqa: S105

EngineChoice = Literal["auto", "textlayer", "rapidocr"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAGEMILL_", env_file=".env", extra="ignore")

    environment: Literal["development", "test", "production"] = Field(
        "development", description="Where this runs; production refuses development secrets."
    )

    # --- Postgres: the record of truth for jobs and pages.
    database_url: str = Field(
        "postgresql+psycopg://postgres@127.0.0.1:5432/pagemill",
        description="SQLAlchemy URL (psycopg 3 driver).",
    )

    # --- Redis: the Celery broker. Messages carry ids only.
    broker_url: str = Field("redis://127.0.0.1:6379/0", description="Celery broker URL.")
    broker_visibility_timeout_s: int = Field(
        3600,
        description="Redis redelivers an unacknowledged message after this long; every "
        "task's hard time limit must be below it or long tasks run twice.",
    )
    queue_prefix: str = Field(
        "", description="Prefix for queue names, so several deployments can share one Redis."
    )

    # --- Object storage (MinIO in production, any S3 endpoint works).
    s3_endpoint: str = Field("127.0.0.1:9000", description="host:port of the S3 endpoint.")
    s3_access_key: str = Field("pagemill", description="S3 access key.")
    s3_secret_key: str = Field(DEVELOPMENT_S3_SECRET, description="S3 secret key.")
    s3_bucket: str = Field(
        "pagemill", description="Bucket for all job objects; created if missing."
    )
    s3_secure: bool = Field(False, description="Use HTTPS to reach S3.")
    s3_region: str | None = Field(None, description="S3 region, when the endpoint needs one.")

    # --- HTTP API.
    api_host: str = Field("127.0.0.1", description="Address `pagemill api` binds.")
    api_port: int = Field(8000, description="Port `pagemill api` binds.")
    api_base_url: str = Field(
        "http://127.0.0.1:8000", description="Public base URL, used in links handed to callers."
    )
    api_key: str | None = Field(None, description="Key `pagemill submit` and `jobs` send.")

    # --- Documents.
    max_upload_bytes: int = Field(100 * 1024 * 1024, description="Largest upload accepted.")
    max_pages: int = Field(2000, description="Most pages one job may hold.")
    default_engine: EngineChoice = Field(
        "auto", description="auto routes each page: text layer where trustworthy, else OCR."
    )
    ocr_engine: Literal["rapidocr"] = Field(
        "rapidocr", description="The OCR engine `auto` uses for pages without a usable text layer."
    )
    max_render_pixels: int = Field(
        40_000_000,
        description="Pixel budget for one rendered page; larger pages are rendered smaller.",
    )

    # --- Work.
    page_max_attempts: int = Field(
        3, description="Attempts an OCR page gets before it is marked failed."
    )
    task_time_limit_s: int = Field(900, description="Hard time limit of any one task.")
    cpu_price_usd_per_hour: float = Field(
        0.05,
        description="What one CPU core-hour costs; page cost = compute seconds x price / 3600.",
    )

    @model_validator(mode="after")
    def _refuse_broken_combinations(self) -> Settings:
        if self.task_time_limit_s >= self.broker_visibility_timeout_s:
            raise ValueError(
                "PAGEMILL_TASK_TIME_LIMIT_S must be below PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S, "
                "or Redis redelivers tasks that are still running"
            )
        if self.environment == "production" and self.s3_secret_key == DEVELOPMENT_S3_SECRET:
            raise ValueError("PAGEMILL_S3_SECRET_KEY still holds the development default")
        return self

    def queue(self, stage: str) -> str:
        return f"{self.queue_prefix}{stage}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
