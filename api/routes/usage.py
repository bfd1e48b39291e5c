"""/v1/usage: the calling client's pages against its quotas, and its retention."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import ClientDep, SessionDep, SettingsDep
from api.errors import ApiError
from pagemill.clients import quotas

router = APIRouter(tags=["usage"])


class QuotaWindowOut(BaseModel):
    period: str = Field(description="day (UTC) or month (UTC calendar month).")
    limit: int | None = Field(description="Pages allowed in the period; null: unlimited.")
    used: int = Field(description="Pages submitted in the period (cache hits not counted).")
    remaining: int | None
    resets_at: datetime


class ClientUsageOut(BaseModel):
    day: QuotaWindowOut
    month: QuotaWindowOut
    retention_days: int | None = Field(
        description="Days a finished job's objects are kept; null: until purged on request."
    )


@router.get("/v1/usage", response_model=ClientUsageOut)
def get_usage(client: ClientDep, session: SessionDep, settings: SettingsDep) -> ClientUsageOut:
    usage = quotas.page_usage(session, settings, client)
    retention = client.retention_days or settings.default_retention_days
    return ClientUsageOut(
        day=QuotaWindowOut(**usage.day.as_dict()),
        month=QuotaWindowOut(**usage.month.as_dict()),
        retention_days=retention,
    )


def quota_error(exceeded: quotas.QuotaExceeded) -> ApiError:
    """429 quota_exceeded with the window's figures in the body and when to retry."""
    return ApiError(
        exceeded.http_status,
        exceeded.code,
        exceeded.message,
        headers={"Retry-After": str(exceeded.retry_after_s)},
        details=exceeded.details(),
    )
