"""Retention and purge, page quotas and the result cache: per-client overrides, the
purged status, the purge fence, the cache key and the page usage ops view

Postgres cannot drop a value from an enum, so the downgrade leaves `purged` in
`job_status` (the upgrade adds it only if missing) and turns purged jobs into cancelled
ones, which the earlier code knows.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Pages each client submitted today and this month (UTC), as the quota counts them:
# cache hits ran nothing and are counted apart. NULL overrides mean the deployment's
# default (PAGEMILL_DEFAULT_*).
PAGE_USAGE_VIEW = """
    SELECT c.name AS client,
           coalesce(sum(j.pages_total) FILTER (
               WHERE j.cached_from IS NULL AND j.created_at >= date_trunc('day', now(), 'UTC')
           ), 0) AS pages_today,
           coalesce(sum(j.pages_total) FILTER (WHERE j.cached_from IS NULL), 0)
               AS pages_this_month,
           coalesce(sum(j.pages_total) FILTER (WHERE j.cached_from IS NOT NULL), 0)
               AS cached_pages_this_month,
           c.page_quota_day, c.page_quota_month, c.retention_days,
           (SELECT count(*) FROM jobs p WHERE p.client_id = c.id AND p.purged_at IS NOT NULL)
               AS jobs_purged
    FROM clients c
    LEFT JOIN jobs j ON j.client_id = c.id
        AND j.created_at >= date_trunc('month', now(), 'UTC')
    GROUP BY c.id, c.name ORDER BY c.name"""


def upgrade() -> None:
    op.execute("ALTER TYPE job_status ADD VALUE IF NOT EXISTS 'purged'")
    op.add_column("clients", sa.Column("retention_days", sa.Integer(), nullable=True))
    op.add_column("clients", sa.Column("page_quota_day", sa.Integer(), nullable=True))
    op.add_column("clients", sa.Column("page_quota_month", sa.Integer(), nullable=True))
    op.create_check_constraint("retention_days_positive", "clients", "retention_days > 0")
    op.create_check_constraint(
        "page_quotas_not_negative", "clients", "page_quota_day >= 0 AND page_quota_month >= 0"
    )
    op.add_column("jobs", sa.Column("purged_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("jobs", sa.Column("cache_key", sa.String(length=64), nullable=True))
    op.add_column("jobs", sa.Column("cached_from", sa.Uuid(), nullable=True))
    op.create_foreign_key(
        op.f("fk_jobs_cached_from_jobs"),
        "jobs",
        "jobs",
        ["cached_from"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index(op.f("ix_jobs_client_id_cache_key"), "jobs", ["client_id", "cache_key"])
    op.create_index(op.f("ix_jobs_client_id_created_at"), "jobs", ["client_id", "created_at"])
    op.create_index(
        op.f("ix_jobs_finished_at"),
        "jobs",
        ["finished_at"],
        postgresql_where=sa.text("purged_at IS NULL"),
    )
    op.execute(f"CREATE VIEW ops_page_usage_by_client AS {PAGE_USAGE_VIEW}")


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS ops_page_usage_by_client")
    op.execute("UPDATE jobs SET status = 'cancelled' WHERE status::text = 'purged'")
    op.drop_index(op.f("ix_jobs_finished_at"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_client_id_created_at"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_client_id_cache_key"), table_name="jobs")
    op.drop_constraint(op.f("fk_jobs_cached_from_jobs"), "jobs", type_="foreignkey")
    op.drop_column("jobs", "cached_from")
    op.drop_column("jobs", "cache_key")
    op.drop_column("jobs", "purged_at")
    op.drop_constraint(op.f("ck_clients_page_quotas_not_negative"), "clients")
    op.drop_constraint(op.f("ck_clients_retention_days_positive"), "clients")
    op.drop_column("clients", "page_quota_month")
    op.drop_column("clients", "page_quota_day")
    op.drop_column("clients", "retention_days")
