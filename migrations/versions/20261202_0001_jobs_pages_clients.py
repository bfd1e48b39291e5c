"""jobs pages clients

Revision ID: 0001
Revises:
Create Date: 2026-12-02 13:52:44.778724
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "clients",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("api_key_prefix", sa.String(length=32), nullable=False),
        sa.Column("api_key_sha256", sa.String(length=64), nullable=False),
        sa.Column("is_admin", sa.Boolean(), server_default="false", nullable=False),
        sa.Column(
            "default_license_use",
            sa.Enum("non_commercial", "commercial", name="license_use"),
            nullable=False,
        ),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clients")),
        sa.UniqueConstraint("api_key_prefix", name=op.f("uq_clients_api_key_prefix")),
        sa.UniqueConstraint("name", name=op.f("uq_clients_name")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("client_id", sa.Uuid(), nullable=False),
        sa.Column(
            "status",
            sa.Enum("queued", "running", "succeeded", "failed", "cancelled", name="job_status"),
            nullable=False,
        ),
        sa.Column(
            "license_use",
            sa.Enum("non_commercial", "commercial", name="license_use"),
            nullable=False,
        ),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("webhook_url", sa.Text(), nullable=True),
        sa.Column(
            "metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("source_filename", sa.String(length=500), nullable=True),
        sa.Column(
            "source_kind",
            sa.Enum("pdf", "png", "jpeg", "tiff", "webp", name="source_kind"),
            nullable=False,
        ),
        sa.Column("source_bytes", sa.BigInteger(), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("document_pages", sa.Integer(), nullable=False),
        sa.Column("page_selection", sa.String(length=200), nullable=True),
        sa.Column("pages_total", sa.Integer(), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("pages_total > 0", name=op.f("ck_jobs_pages_total_positive")),
        sa.ForeignKeyConstraint(
            ["client_id"], ["clients.id"], name=op.f("fk_jobs_client_id_clients")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_client_id"), "jobs", ["client_id"], unique=False)
    op.create_index(op.f("ix_jobs_status"), "jobs", ["status"], unique=False)
    op.create_table(
        "pages",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column(
            "status",
            sa.Enum("queued", "running", "succeeded", "failed", "cancelled", name="page_status"),
            nullable=False,
        ),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("width_pt", sa.Float(), nullable=True),
        sa.Column("height_pt", sa.Float(), nullable=True),
        sa.Column("image_width_px", sa.Integer(), nullable=True),
        sa.Column("image_height_px", sa.Integer(), nullable=True),
        sa.Column("image_dpi", sa.Integer(), nullable=True),
        sa.Column("text_chars", sa.Integer(), nullable=True),
        sa.Column("image_coverage", sa.Float(), nullable=True),
        sa.Column(
            "facts",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column("render_seconds", sa.Float(), nullable=True),
        sa.Column("engine", sa.String(length=32), nullable=True),
        sa.Column("engine_reason", sa.Text(), nullable=True),
        sa.Column("device_kind", sa.String(length=64), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("wall_seconds", sa.Float(), nullable=True),
        sa.Column("compute_seconds", sa.Float(), nullable=True),
        sa.Column("cost_usd", sa.Numeric(precision=14, scale=8), nullable=True),
        sa.Column("output_chars", sa.Integer(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("finish_reason", sa.String(length=32), nullable=True),
        sa.Column(
            "engine_details",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_pages_attempts_not_negative")),
        sa.CheckConstraint("number > 0", name=op.f("ck_pages_number_positive")),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_pages_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pages")),
        sa.UniqueConstraint("job_id", "number", name=op.f("uq_pages_job_id_number")),
    )
    op.create_index(op.f("ix_pages_job_id"), "pages", ["job_id"], unique=False)
    op.create_index(op.f("ix_pages_status"), "pages", ["status"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_pages_status"), table_name="pages")
    op.drop_index(op.f("ix_pages_job_id"), table_name="pages")
    op.drop_table("pages")
    op.drop_index(op.f("ix_jobs_status"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_client_id"), table_name="jobs")
    op.drop_table("jobs")
    op.drop_table("clients")
    for enum_name in ("page_status", "source_kind", "job_status", "license_use"):
        sa.Enum(name=enum_name).drop(op.get_bind(), checkfirst=True)
