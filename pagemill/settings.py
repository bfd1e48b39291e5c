"""The one settings object. Every value comes from `PAGEMILL_*` environment
variables (or a `.env` file) and every default is documented here.
"""

from __future__ import annotations

import ipaddress
import json
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from pagemill.engines.catalog import AUTO, CPU_OCR_ENGINES, DEFAULT_OCR_ENGINE, LOCAL_ENGINE_CHOICES

# Refused in production: see the validator below.
DEVELOPMENT_S3_SECRET = "pagemill-dev-secret"  # noqa: S105


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
    database_dead_client_s: int = Field(
        15,
        ge=0,
        description="Postgres drops a connection whose host stopped answering after about "
        "this long (TCP keepalives and user timeout, asked per connection), releasing the "
        "locks its open transaction held. 0 leaves it to the server's own settings, as "
        "behind PgBouncer, which refuses per-connection options.",
    )
    database_application_name: str = Field(
        "pagemill",
        max_length=63,
        description="This process's name in Postgres (pg_stat_activity.application_name): "
        "give each kind of process its own (api, cpu and gpu workers) to tell their "
        "sessions apart when one waits or holds a lock.",
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
    rate_limit: str = Field(
        "600/minute",
        description="Requests one client may make, as `N/second|minute|hour` (a moving "
        "window kept in Redis, shared by every API process); beyond it, 429 with Retry-After.",
    )
    idempotency_ttl_s: int = Field(
        24 * 3600, description="How long an Idempotency-Key is remembered."
    )

    # --- Documents.
    max_upload_bytes: int = Field(100 * 1024 * 1024, description="Largest upload accepted.")
    max_pages: int = Field(2000, description="Most pages one job may hold.")
    # Documents by URL (source_url): fetched by the worker, under the upload's size cap.
    source_readable_buckets: Annotated[list[str], NoDecode] = Field(
        [],
        description="Buckets of the deployment's S3 that a job may name as s3://bucket/key; "
        "comma-separated. Empty: s3:// sources are refused.",
    )
    source_fetch_timeout_s: float = Field(
        120, description="Longest a source_url's fetch may take, connecting included."
    )
    source_fetch_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        [],
        description="Host names that a source_url may name although they resolve to "
        "loopback, private or other internal addresses (as webhook_allowed_hosts); "
        "comma-separated. Empty: none may.",
    )
    source_fetch_ca_bundle: str | None = Field(
        None,
        description="A PEM file of the certificate authorities https source URLs are checked "
        "against, instead of the system's (a private CA). Unset: the system's.",
    )
    batch_max_documents: int = Field(1000, description="Most documents one batch may hold.")
    batch_max_bytes: int = Field(
        2 * 1024**3,
        description="Largest POST /v1/batches request, all its files together; each file "
        "still has max_upload_bytes.",
    )
    default_engine: str = Field(
        AUTO,
        description="auto routes each page: text layer where trustworthy, else OCR. auto or "
        "a CPU engine of pagemill.engines.catalog; a job asks for a GPU engine by name.",
    )
    ocr_engine: str = Field(
        DEFAULT_OCR_ENGINE,
        description="The OCR engine `auto` uses for pages without a usable text layer: a CPU "
        "OCR engine of pagemill.engines.catalog.",
    )
    max_page_side_pt: float = Field(
        14_400,
        description="Largest page side accepted, in points; 14,400 pt (200 in) is the PDF "
        "format's own limit, and bigger pages are bombs, not documents.",
    )
    max_image_pixels: int = Field(
        100_000_000,
        description="Largest image accepted, in pixels (a 600 dpi A0 scan is about 70 M).",
    )
    sandbox_memory_bytes: int = Field(
        2 * 1024**3, description="Address-space limit of the child that opens a document."
    )
    sandbox_cpu_s: int = Field(600, description="CPU-time limit of that child.")
    render_timeout_s: float = Field(
        600,
        description="Wall-clock limit for rendering one document's pages in the sandbox; "
        "below the task time limit, so a hang is reported, not just killed.",
    )
    inspect_timeout_s: float = Field(
        60,
        description="Wall-clock limit for checking an upload before the job is created. "
        "Passed while computing, the upload is refused (422 unreadable_document); passed "
        "with the CPU mostly spent elsewhere, the machine was too busy (503 busy).",
    )
    inspect_concurrency: int = Field(
        2,
        ge=1,
        description="Uploads one API process inspects at once (each in a child process "
        "that uses one core); about the cores the API host can spare.",
    )
    inspect_queue_wait_s: float = Field(
        10,
        ge=0,
        description="Longest an upload waits for an inspection slot before it is answered "
        "503 busy, with this (rounded up) as Retry-After.",
    )
    cpu_engine_threads: int = Field(
        1,
        ge=1,
        description="Threads one CPU engine call runs its models on (rapidocr's, and the "
        "layout models the text layer engine reads a page with). A prefork worker runs a "
        "child a core, so one thread a call fills the cores without oversubscribing them; "
        "more threads there spin against each other and are charged as the page's CPU "
        "seconds. Raise it where a worker runs fewer children than cores.",
    )
    max_render_pixels: int = Field(
        40_000_000,
        description="Pixel budget for one rendered page; larger pages are rendered smaller.",
    )

    # --- Work.
    page_max_attempts: int = Field(
        3, description="Engine failures a page may have before it is marked failed."
    )
    max_claims: int = Field(
        20,
        description="Claims of one page or one prepare (engine failures, outages and crashes "
        "together) before it fails with its last error: no work retries forever.",
    )
    task_time_limit_s: int = Field(900, description="Hard time limit of any one task.")
    task_cleanup_s: int | None = Field(
        None,
        description="Time between a task's soft time limit and its hard kill: a page stopped "
        "at the soft limit has this long to record why and what it cost. 5 s at least, and "
        "at most half the hard limit. Unset: a tenth of the hard limit within 5 to 30 s.",
    )
    textlayer_max_content_bytes: int = Field(
        8 * 1024**2,
        description="A text layer page drawing more than this (decompressed content stream) is "
        "read as plain text, without layout analysis or rendering: layout analysis takes about "
        "3 s a MB of drawing instructions on one core (8 MiB: about 25 s).",
    )
    ocr_fallback_max_pixels: int = Field(
        4_000_000,
        description="An OCR page whose last attempt hit the time limit is read from its image "
        "shrunk to at most this many pixels (an A4 page at 200 dpi is 3.9 M).",
    )
    textlayer_max_text_chars: int = Field(
        100_000,
        description="A text layer page with more characters than this is read as plain text: "
        "layout analysis reads about 7,000 characters a second on one core (100,000: about 15 s "
        "alone, a minute on a busy machine).",
    )
    page_lease_s: int = Field(
        960,
        description="How long a claimed page (or a preparing or finalizing job) is held "
        "before another worker may take it over; longer than the task time limit, so a live "
        "attempt is never taken over.",
    )
    prepare_max_failures: int = Field(
        3,
        description="Renderer crashes or timeouts on one document before its job fails "
        "(poison input).",
    )
    finalize_max_attempts: int = Field(
        3,
        ge=1,
        description="Starts of the finalize stage of one job (killed at the time limit, "
        "failing, or lost with its worker) before the job fails with the last error. Retries "
        "of one start through an outage are capped by PAGEMILL_OUTAGE_RETRIES instead.",
    )
    outage_retries: int = Field(
        10,
        description="Retries, with backoff of 2 s doubling to 60 s, that a task spends riding "
        "out a storage or database outage (10: about six minutes) before the reaper takes over.",
    )
    reaper_interval_s: float = Field(
        15, description="How often a worker looks for work whose message was lost."
    )
    stale_after_s: float = Field(
        120,
        description="Queued work untouched this long has its message published again "
        "(duplicates are harmless: every claim is conditional).",
    )
    device_kind: str = Field(
        "cpu",
        description="What this worker computes on, as ops reports it: cpu, nvidia-l4, "
        "nvidia-a100-40gb...",
    )
    device_count: int = Field(
        1, description="Devices this worker holds (cores for CPU pools, GPUs for GPU workers)."
    )
    commercial_license_reference: str | None = Field(
        None,
        description="Reference of a commercial licence this deployment holds for the model it "
        "runs (e.g. a Jina AI contract number). Unset: non-commercial models serve "
        "non-commercial jobs only.",
    )
    heartbeat_interval_s: float = Field(10, description="How often a worker says it is alive.")
    worker_dead_after_s: float = Field(
        60, description="A worker silent this long no longer counts as able to take work."
    )
    gpu_worker_wait_s: float = Field(
        900,
        description="A page waiting for a GPU engine fails (and its job with it) once no worker "
        "able to read it has been alive for this long: long enough to ride out a GPU "
        "worker's restart or a deploy, short enough that a client learns its job cannot run.",
    )
    quote_fallback_seconds_per_page: float = Field(
        5.0,
        description="Device seconds a page is assumed to take when an engine has no history "
        "yet to quote from.",
    )
    quote_model_ttl_s: float = Field(
        10.0,
        ge=0,
        description="Seconds the API keeps an engine's recent page costs and the cost model "
        "fitted over them before reading them again for a quote; 0 reads them at every "
        "submit.",
    )
    device_price_usd_per_hour: float = Field(
        0.05,
        description="What one device-hour of this worker costs (a core for CPU pools, a GPU "
        "for GPU workers); page cost = attributed device seconds x price / 3600.",
    )

    # --- Data lifecycle: retention and page quotas. Each client may override these
    # (clients.retention_days, page_quota_day, page_quota_month).
    default_retention_days: int | None = Field(
        30,
        ge=1,
        description="Days a finished job's source, page images and results are kept before "
        "the reaper purges them (the job's row, cost and licence records stay). Unset: kept "
        "until purged on request.",
    )
    default_page_quota_day: int | None = Field(
        None,
        ge=0,
        description="Pages one client may submit per UTC day; a submission beyond it is "
        "refused (429 quota_exceeded). Unset: unlimited.",
    )
    default_page_quota_month: int | None = Field(
        None,
        ge=0,
        description="Pages one client may submit per UTC calendar month. Unset: unlimited.",
    )

    # --- Webhooks: completion callbacks (pagemill/webhooks/).
    webhook_timeout_s: float = Field(
        12, description="Connect, write and read timeout of one delivery attempt, per operation."
    )
    webhook_attempt_deadline_s: float = Field(
        30,
        description="Longest one delivery attempt may take all told: DNS, connecting, sending, "
        "the answer's headers and its first 2 KB. A receiver that trickles bytes is cut off "
        "here; at least 10 s below the attempt lease.",
    )
    webhook_client_concurrency: int = Field(
        4,
        description="Delivery attempts one client may have in flight at once, across every "
        "webhook worker; the client's other deliveries wait their turn, so one client's slow "
        "endpoints cannot hold every webhook thread. Keep it below the webhook threads.",
    )
    webhook_retry_schedule_s: Annotated[list[float], NoDecode] = Field(
        [5, 300, 1800, 7200, 18000, 36000, 36000],
        description="Delay before each retry after a failed attempt, in seconds, comma-separated "
        "or a JSON list: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, so 8 attempts over about "
        "27 hours; then the delivery is dead.",
    )
    webhook_retry_jitter: float = Field(
        0.2,
        description="Each retry delay is scaled by a random factor within +-this fraction, so "
        "a receiver that comes back is not hit by every waiting delivery at once.",
    )
    webhook_max_retry_after_s: float = Field(
        36000,
        description="Longest Retry-After (on 429 and 5xx) that is honoured; longer requests "
        "wait this long.",
    )
    webhook_max_countdown_s: float = Field(
        600,
        description="Retries due within this long ride in a delayed message; later ones are "
        "published by the reaper when due (a delayed message held past the Redis visibility "
        "timeout would be delivered twice).",
    )
    webhook_attempt_lease_s: float = Field(
        120,
        description="How long a claimed delivery is held before a lost attempt may be retried; "
        "at least 10 s above the attempt deadline, so a live attempt is never repeated.",
    )
    webhook_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        [],
        description="Host names (as written in the URL) that may resolve to loopback, private, "
        "link-local or other internal addresses; comma-separated. Empty: none may.",
    )
    webhook_allowed_cidrs: Annotated[list[str], NoDecode] = Field(
        [],
        description="Internal networks (e.g. 10.20.0.0/16) webhook destinations may resolve "
        "to; comma-separated. Empty: none.",
    )
    webhook_link_expiry_s: int = Field(
        7 * 24 * 3600,
        description="Lifetime of the presigned S3 links in an event: the S3 maximum of 7 days, "
        "so they outlive the retry schedule.",
    )
    webhook_secret_overlap_s: int = Field(
        24 * 3600,
        description="After a signing-secret rotation, how long the previous secret still "
        "signs deliveries alongside the new one.",
    )
    console_secret_key: str | None = Field(
        None,
        description="Signs the ops console's session cookies and CSRF tokens; the same on "
        "every API process. Unset: a fixed development key outside production, and no "
        "console sign-in in production.",
    )

    @field_validator(
        "webhook_retry_schedule_s",
        "webhook_allowed_hosts",
        "webhook_allowed_cidrs",
        "source_readable_buckets",
        "source_fetch_allowed_hosts",
        mode="before",
    )
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        # From the environment a list is "a,b,c" or a JSON list.
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [item.strip() for item in text.split(",") if item.strip()]
        return value

    @model_validator(mode="after")
    def _refuse_reading_own_bucket(self) -> Settings:
        # s3:// sources are read with the deployment's credentials: its own bucket would
        # hand any client every other job's documents and results.
        if self.s3_bucket in self.source_readable_buckets:
            raise ValueError(
                "PAGEMILL_SOURCE_READABLE_BUCKETS must not name PAGEMILL_S3_BUCKET, where "
                "every job's objects are"
            )
        return self

    @model_validator(mode="after")
    def _refuse_broken_webhook_settings(self) -> Settings:
        if not self.webhook_retry_schedule_s or min(self.webhook_retry_schedule_s) < 0:
            raise ValueError("PAGEMILL_WEBHOOK_RETRY_SCHEDULE_S needs one or more delays >= 0")
        if not 0 <= self.webhook_retry_jitter < 1:
            raise ValueError("PAGEMILL_WEBHOOK_RETRY_JITTER must be in [0, 1)")
        if self.webhook_max_countdown_s >= self.broker_visibility_timeout_s:
            raise ValueError(
                "PAGEMILL_WEBHOOK_MAX_COUNTDOWN_S must be below "
                "PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S, or delayed deliveries are sent twice"
            )
        if not 0 < self.webhook_timeout_s <= self.webhook_attempt_deadline_s:
            raise ValueError(
                "PAGEMILL_WEBHOOK_TIMEOUT_S must be above 0 and at most "
                "PAGEMILL_WEBHOOK_ATTEMPT_DEADLINE_S"
            )
        if self.webhook_attempt_lease_s < self.webhook_attempt_deadline_s + 10:
            raise ValueError(
                "PAGEMILL_WEBHOOK_ATTEMPT_LEASE_S must exceed PAGEMILL_WEBHOOK_ATTEMPT_DEADLINE_S "
                "by 10 s or more, or an attempt still sending could be started again"
            )
        if self.webhook_client_concurrency < 1:
            raise ValueError("PAGEMILL_WEBHOOK_CLIENT_CONCURRENCY must be 1 or more")
        if not 1 <= self.webhook_link_expiry_s <= 7 * 24 * 3600:
            raise ValueError("PAGEMILL_WEBHOOK_LINK_EXPIRY_S must be within 1 s and 7 days")
        for cidr in self.webhook_allowed_cidrs:
            ipaddress.ip_network(cidr, strict=False)  # ValueError names the bad entry
        return self

    @field_validator("default_engine")
    @classmethod
    def _a_local_engine(cls, value: str) -> str:
        if value not in LOCAL_ENGINE_CHOICES:
            raise ValueError(f"must be one of {', '.join(LOCAL_ENGINE_CHOICES)}")
        return value

    @field_validator("ocr_engine")
    @classmethod
    def _a_cpu_ocr_engine(cls, value: str) -> str:
        if value not in CPU_OCR_ENGINES:
            raise ValueError(f"must be one of {', '.join(CPU_OCR_ENGINES)}")
        return value

    @field_validator(
        "default_retention_days",
        "default_page_quota_day",
        "default_page_quota_month",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # PAGEMILL_DEFAULT_PAGE_QUOTA_DAY= (empty) means no limit, as leaving it out does.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("commercial_license_reference", mode="before")
    @classmethod
    def _blank_reference_is_none(cls, value: object) -> object:
        # An empty variable (as compose files leave it) must not count as a licence.
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _refuse_broken_combinations(self) -> Settings:
        # Every page accepted at upload must fit the pixel budget at 1 dpi, the lowest
        # resolution a page is rendered at.
        if self.max_render_pixels < (self.max_page_side_pt / 72) ** 2:
            raise ValueError(
                "PAGEMILL_MAX_RENDER_PIXELS must hold the largest page accepted "
                "(PAGEMILL_MAX_PAGE_SIDE_PT) at 1 dpi"
            )
        if self.task_time_limit_s >= self.broker_visibility_timeout_s:
            raise ValueError(
                "PAGEMILL_TASK_TIME_LIMIT_S must be below PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S, "
                "or Redis redelivers tasks that are still running"
            )
        if not 5 <= self.task_cleanup_seconds <= self.task_time_limit_s // 2:
            raise ValueError(
                "PAGEMILL_TASK_CLEANUP_S must be at least 5 s and at most half of "
                "PAGEMILL_TASK_TIME_LIMIT_S, or a page stopped at the soft limit cannot "
                "record why before it is killed"
            )
        if self.render_timeout_s >= self.task_time_limit_s:
            raise ValueError("PAGEMILL_RENDER_TIMEOUT_S must be below PAGEMILL_TASK_TIME_LIMIT_S")
        if self.page_lease_s <= self.task_time_limit_s:
            raise ValueError(
                "PAGEMILL_PAGE_LEASE_S must exceed PAGEMILL_TASK_TIME_LIMIT_S, or live "
                "pages are taken over by other workers"
            )
        if self.environment == "production" and self.s3_secret_key == DEVELOPMENT_S3_SECRET:
            raise ValueError("PAGEMILL_S3_SECRET_KEY still holds the development default")
        return self

    @property
    def task_cleanup_seconds(self) -> int:
        if self.task_cleanup_s is not None:
            return self.task_cleanup_s
        return min(30, max(5, self.task_time_limit_s // 10))

    @property
    def task_soft_time_limit_s(self) -> int:
        return self.task_time_limit_s - self.task_cleanup_seconds

    def queue(self, stage: str) -> str:
        return f"{self.queue_prefix}{stage}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
