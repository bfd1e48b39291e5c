"""What the API returns for batches."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, Field

from pagemill.batches.service import ItemError
from pagemill.db.models import Batch
from pagemill.jobs.repository import BatchTotals


class BatchJobCounts(BaseModel):
    total: int = Field(description="Jobs in the batch: one per document.")
    ended: int = Field(description="Jobs that have ended, whatever the outcome.")
    by_status: dict[str, int] = Field(description="Jobs by status; statuses with none left out.")


class BatchOut(BaseModel):
    id: uuid.UUID
    status: str = Field(description="running until every job has ended, then completed.")
    documents: int
    jobs: BatchJobCounts
    cost_usd: Decimal = Field(description="What the batch's pages have cost so far.")
    device_seconds: float
    webhook_url: str | None = Field(description="Where batch.completed is sent.")
    job_ids: list[uuid.UUID] = Field(description="One job per document, in the order sent.")
    created_at: datetime
    completed_at: datetime | None
    links: dict[str, str]


class ItemErrorOut(BaseModel):
    index: int = Field(description="The document's position in the request, from 0.")
    name: str | None = Field(description="Its file name or source_url.")
    code: str
    message: str


def batch_out(
    batch: Batch, totals: BatchTotals, job_ids: list[uuid.UUID], base_url: str
) -> BatchOut:
    return BatchOut(
        id=batch.id,
        status="completed" if batch.completed_at is not None else "running",
        documents=batch.documents,
        jobs=BatchJobCounts(
            total=batch.documents, ended=totals.ended, by_status=totals.jobs_by_status
        ),
        cost_usd=totals.cost_usd,
        device_seconds=totals.device_seconds,
        webhook_url=batch.webhook_url,
        job_ids=job_ids,
        created_at=batch.created_at,
        completed_at=batch.completed_at,
        links={"self": f"{base_url.rstrip('/')}/v1/batches/{batch.id}"},
    )


def item_errors_out(errors: list[ItemError]) -> list[dict[str, object]]:
    return [
        ItemErrorOut(index=e.index, name=e.name, code=e.code, message=e.message).model_dump()
        for e in errors
    ]
