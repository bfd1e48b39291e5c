"""Jobs may name their document by URL (fetched by the worker) and belong to a batch

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Known only once the worker has fetched a document given by URL.
FACTS_AFTER_FETCH = (
    ("source_kind", sa.Enum(name="source_kind", create_type=False)),
    ("source_bytes", sa.BigInteger()),
    ("source_sha256", sa.String(length=64)),
    ("document_pages", sa.Integer()),
    ("pages_total", sa.Integer()),
)


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("client_id", sa.Uuid(), nullable=False),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("webhook_url", sa.Text(), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("documents > 0", name=op.f("ck_batches_documents_positive")),
        sa.ForeignKeyConstraint(
            ["client_id"], ["clients.id"], name=op.f("fk_batches_client_id_clients")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
    )
    op.create_index(op.f("ix_batches_client_id"), "batches", ["client_id"], unique=False)
    op.add_column("jobs", sa.Column("batch_id", sa.Uuid(), nullable=True))
    op.add_column("jobs", sa.Column("batch_index", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("source_url", sa.Text(), nullable=True))
    op.create_unique_constraint(
        op.f("uq_jobs_batch_id_batch_index"), "jobs", ["batch_id", "batch_index"]
    )
    op.create_index(op.f("ix_jobs_batch_id"), "jobs", ["batch_id"], unique=False)
    op.create_foreign_key(op.f("fk_jobs_batch_id_batches"), "jobs", "batches", ["batch_id"], ["id"])
    for name, type_ in FACTS_AFTER_FETCH:
        op.alter_column("jobs", name, existing_type=type_, nullable=True)
    op.create_check_constraint(
        op.f("ck_jobs_source_uploaded_or_by_url"),
        "jobs",
        "source_url IS NOT NULL OR source_sha256 IS NOT NULL",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_jobs_source_uploaded_or_by_url"), "jobs", type_="check")
    # Jobs whose document was never fetched have no facts to keep.
    op.execute("DELETE FROM jobs WHERE source_sha256 IS NULL")
    for name, type_ in FACTS_AFTER_FETCH:
        op.alter_column("jobs", name, existing_type=type_, nullable=False)
    op.drop_constraint(op.f("fk_jobs_batch_id_batches"), "jobs", type_="foreignkey")
    op.drop_index(op.f("ix_jobs_batch_id"), table_name="jobs")
    op.drop_constraint(op.f("uq_jobs_batch_id_batch_index"), "jobs", type_="unique")
    op.drop_column("jobs", "source_url")
    op.drop_column("jobs", "batch_index")
    op.drop_column("jobs", "batch_id")
    op.drop_index(op.f("ix_batches_client_id"), table_name="batches")
    op.drop_table("batches")
