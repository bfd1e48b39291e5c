"""Pages keep their Markdown until the job ends, for finalize to assemble from

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("pages", sa.Column("staged_markdown", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "staged_markdown")
