"""Page furniture: the job's furniture mode and each page's headers, footers, page numbers

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Jobs that already exist were assembled with every line inline; new ones default
    # to "separate".
    op.add_column(
        "jobs",
        sa.Column("furniture", sa.String(length=16), server_default="inline", nullable=False),
    )
    op.alter_column("jobs", "furniture", server_default="separate")
    op.create_check_constraint(
        op.f("ck_jobs_furniture_known"), "jobs", "furniture IN ('separate', 'inline', 'drop')"
    )
    op.add_column(
        "pages", sa.Column("furniture", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("pages", "furniture")
    op.drop_constraint(op.f("ck_jobs_furniture_known"), "jobs", type_="check")
    op.drop_column("jobs", "furniture")
