"""pages.compute_seconds is named device_seconds, as in the code, the API and the ops views

The ops views keep their columns: Postgres binds a view to the column, not its name.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 15:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.alter_column("pages", "compute_seconds", new_column_name="device_seconds")


def downgrade() -> None:
    op.alter_column("pages", "device_seconds", new_column_name="compute_seconds")
