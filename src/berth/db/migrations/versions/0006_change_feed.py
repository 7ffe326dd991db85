"""The change feed's event log.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

``berth_events`` holds what each numbered write did (docs/change-feed.md),
and ``berth_state.pruned`` says, per slot, up to which number the events
are gone. Writes numbered before this revision left no events, so each
slot starts as pruned up to its current number: a feed reader asking for
older history is told to list again (410), never handed a gap.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("berth_state") as batch:
        batch.add_column(sa.Column("pruned", sa.BigInteger, nullable=False, server_default="0"))
    op.execute("UPDATE berth_state SET pruned = seq")
    op.create_table(
        "berth_events",
        sa.Column("slot", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("seq", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("idx", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(255), nullable=True),
        sa.Column("tree", sa.String(36), nullable=True),
        sa.Column("project", sa.String(255), nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("body", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql"), nullable=False),
        sa.PrimaryKeyConstraint("slot", "seq", "idx", name="pk_berth_events"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    op.drop_table("berth_events")
    with op.batch_alter_table("berth_state") as batch:
        batch.drop_column("pruned")
