"""Page quality: check results, score, verdict, repair, blank pages

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 15:20:26.214573
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("pages", sa.Column("blank", sa.Boolean(), nullable=True))
    op.add_column(
        "pages", sa.Column("quality_checks", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column("pages", sa.Column("quality_score", sa.Float(), nullable=True))
    op.add_column("pages", sa.Column("verdict", sa.String(length=16), nullable=True))
    op.add_column("pages", sa.Column("repair", sa.String(length=64), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "repair")
    op.drop_column("pages", "verdict")
    op.drop_column("pages", "quality_score")
    op.drop_column("pages", "quality_checks")
    op.drop_column("pages", "blank")
