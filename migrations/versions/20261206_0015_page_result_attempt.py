"""Each OCR attempt at a page writes its own objects; the page names the one that won

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Null for every page already read: their objects keep the keys without an attempt.
    op.add_column("pages", sa.Column("result_attempt", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "result_attempt")
