"""Jobs record what data to extract beside the Markdown (extract=invoice)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("extract", sa.String(length=16), nullable=True))
    op.create_check_constraint("extract_known", "jobs", "extract IN ('invoice')")


def downgrade() -> None:
    op.drop_constraint("extract_known", "jobs", type_="check")
    op.drop_column("jobs", "extract")
