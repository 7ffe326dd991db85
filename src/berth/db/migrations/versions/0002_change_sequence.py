"""The change sequence that keeps each worker's candidate cache fresh.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def upgrade() -> None:
    state = op.create_table(
        "berth_state",
        sa.Column("id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_berth_state"),
        **MYSQL,
    )
    op.bulk_insert(state, [{"id": 1, "seq": 0}])
    op.create_table(
        "berth_changes",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.String(1), nullable=False),
        sa.Column("resource_provider_id", sa.Integer, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_berth_changes"),
        **MYSQL,
    )
    op.create_index("ix_berth_changes_seq", "berth_changes", ["seq"])


def downgrade() -> None:
    op.drop_table("berth_changes")
    op.drop_table("berth_state")
