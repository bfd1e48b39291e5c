"""Governance: worker registry, licence basis and GPU measurements per page, quotes, ops views

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 15:01:39.653817
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Ops tables: what `pagemill ops ...` and GET /v1/ops/... show. Views, so they are
# always current and cost nothing until read.
OPS_VIEWS = {
    "ops_jobs_by_client_state": """
        SELECT c.name AS client, j.status::text AS status, count(*) AS jobs,
               sum(j.pages_total) AS pages
        FROM jobs j JOIN clients c ON c.id = j.client_id
        GROUP BY c.name, j.status ORDER BY c.name, j.status""",
    "ops_stuck_jobs": """
        SELECT j.id AS job_id, c.name AS client, j.status::text AS status,
               j.created_at, j.started_at,
               extract(epoch FROM now() - j.created_at) AS age_seconds,
               extract(epoch FROM now() - greatest(j.updated_at, max(p.updated_at)))
                   AS idle_seconds,
               j.pages_total,
               count(p.id) FILTER (WHERE p.status IN ('succeeded', 'failed', 'cancelled'))
                   AS pages_done,
               count(p.id) FILTER (WHERE p.status = 'running') AS pages_running,
               coalesce(
                   extract(epoch FROM now() - greatest(j.updated_at, max(p.updated_at))) > 600,
                   false) AS stuck
        FROM jobs j JOIN clients c ON c.id = j.client_id
        LEFT JOIN pages p ON p.job_id = j.id
        WHERE j.status IN ('queued', 'running')
        GROUP BY j.id, c.name ORDER BY j.created_at""",
    "ops_cost_by_client_day": """
        SELECT c.name AS client, date_trunc('day', p.finished_at)::date AS day,
               count(p.id) AS pages, sum(p.compute_seconds) AS device_seconds,
               sum(p.cost_usd) AS cost_usd
        FROM pages p JOIN jobs j ON j.id = p.job_id JOIN clients c ON c.id = j.client_id
        WHERE p.status = 'succeeded'
        GROUP BY c.name, date_trunc('day', p.finished_at) ORDER BY day, client""",
    "ops_cost_per_page_by_model_device": """
        SELECT coalesce(p.model, p.engine) AS model, p.device_kind, count(*) AS pages,
               avg(p.compute_seconds) AS device_seconds_per_page,
               avg(p.cost_usd) AS cost_usd_per_page, sum(p.cost_usd) AS cost_usd,
               avg(p.output_tokens) AS output_tokens_per_page
        FROM pages p WHERE p.status = 'succeeded'
        GROUP BY coalesce(p.model, p.engine), p.device_kind ORDER BY model, device_kind""",
    "ops_licence_audit": """
        SELECT p.model, p.model_license, p.deployment_license_reference,
               p.basis_permits_commercial, p.license_use::text AS license_use,
               count(*) AS pages
        FROM pages p WHERE p.status = 'succeeded'
        GROUP BY p.model, p.model_license, p.deployment_license_reference,
                 p.basis_permits_commercial, p.license_use
        ORDER BY p.model, license_use""",
    "ops_worker_utilisation": """
        SELECT w.id AS worker_id, w.host, w.device_kind, w.device_count, w.engine, w.model,
               w.started_at, w.heartbeat_at, w.stopped_at,
               w.heartbeat_at > now() - interval '60 seconds' AND w.stopped_at IS NULL AS alive,
               w.pages_done, w.busy_seconds,
               greatest(extract(epoch FROM coalesce(w.stopped_at, w.heartbeat_at) - w.started_at)
                        * w.device_count - w.busy_seconds, 0) AS idle_seconds,
               w.busy_seconds / nullif(extract(epoch FROM coalesce(w.stopped_at, w.heartbeat_at)
                        - w.started_at) * w.device_count, 0) AS utilisation,
               w.price_usd_per_hour,
               extract(epoch FROM coalesce(w.stopped_at, w.heartbeat_at) - w.started_at)
                   * w.device_count * w.price_usd_per_hour / 3600 / nullif(w.pages_done, 0)
                   AS all_in_cost_usd_per_page
        FROM workers w ORDER BY w.started_at DESC""",
}


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("queues", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("device_kind", sa.String(length=64), nullable=False),
        sa.Column("device_count", sa.Integer(), nullable=False),
        sa.Column("price_usd_per_hour", sa.Numeric(precision=12, scale=6), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("model_license", sa.String(length=64), nullable=False),
        sa.Column("model_permits_commercial", sa.Boolean(), nullable=False),
        sa.Column("deployment_license_reference", sa.String(length=200), nullable=True),
        sa.Column("versions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "heartbeat_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("busy_seconds", sa.Float(), server_default="0", nullable=False),
        sa.Column("pages_done", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    op.create_index(op.f("ix_workers_heartbeat_at"), "workers", ["heartbeat_at"], unique=False)
    op.add_column("jobs", sa.Column("quote_usd", sa.Numeric(precision=14, scale=8), nullable=True))
    op.add_column(
        "jobs", sa.Column("max_cost_usd", sa.Numeric(precision=14, scale=8), nullable=True)
    )
    op.add_column("pages", sa.Column("worker_id", sa.String(length=200), nullable=True))
    op.add_column(
        "pages",
        sa.Column(
            "license_use",
            sa.Enum("non_commercial", "commercial", name="license_use"),
            nullable=True,
        ),
    )
    op.add_column("pages", sa.Column("model", sa.String(length=100), nullable=True))
    op.add_column("pages", sa.Column("model_license", sa.String(length=64), nullable=True))
    op.add_column(
        "pages", sa.Column("deployment_license_reference", sa.String(length=200), nullable=True)
    )
    op.add_column("pages", sa.Column("basis_permits_commercial", sa.Boolean(), nullable=True))
    op.add_column(
        "pages", sa.Column("price_usd_per_hour", sa.Numeric(precision=12, scale=6), nullable=True)
    )
    op.add_column("pages", sa.Column("queue_seconds", sa.Float(), nullable=True))
    op.add_column("pages", sa.Column("prefill_seconds", sa.Float(), nullable=True))
    op.add_column("pages", sa.Column("decode_seconds", sa.Float(), nullable=True))
    op.add_column("pages", sa.Column("spec_steps", sa.Integer(), nullable=True))
    op.add_column("pages", sa.Column("spec_draft_tokens", sa.Integer(), nullable=True))
    op.add_column("pages", sa.Column("spec_accepted_tokens", sa.Integer(), nullable=True))
    op.add_column("pages", sa.Column("repetition_retried", sa.Boolean(), nullable=True))
    op.create_index(op.f("ix_pages_worker_id"), "pages", ["worker_id"], unique=False)
    op.create_check_constraint(
        "commercial_use_needs_commercial_basis",
        "pages",
        "license_use IS DISTINCT FROM 'commercial' OR basis_permits_commercial IS NOT FALSE",
    )
    for name, body in OPS_VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    for name in reversed(OPS_VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_constraint(op.f("ck_pages_commercial_use_needs_commercial_basis"), "pages")
    op.drop_index(op.f("ix_pages_worker_id"), table_name="pages")
    op.drop_column("pages", "repetition_retried")
    op.drop_column("pages", "spec_accepted_tokens")
    op.drop_column("pages", "spec_draft_tokens")
    op.drop_column("pages", "spec_steps")
    op.drop_column("pages", "decode_seconds")
    op.drop_column("pages", "prefill_seconds")
    op.drop_column("pages", "queue_seconds")
    op.drop_column("pages", "price_usd_per_hour")
    op.drop_column("pages", "basis_permits_commercial")
    op.drop_column("pages", "deployment_license_reference")
    op.drop_column("pages", "model_license")
    op.drop_column("pages", "model")
    op.drop_column("pages", "license_use")
    op.drop_column("pages", "worker_id")
    op.drop_column("jobs", "max_cost_usd")
    op.drop_column("jobs", "quote_usd")
    op.drop_index(op.f("ix_workers_heartbeat_at"), table_name="workers")
    op.drop_table("workers")
