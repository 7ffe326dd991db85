"""One change-sequence counter per slot (database node).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

``berth_changes`` gains the slot (the ``berth_state`` row) that numbered
each change; existing rows were numbered by the one row there was, 1.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("berth_changes") as batch:
        batch.add_column(sa.Column("slot", sa.Integer, nullable=False, server_default="1"))
        batch.drop_index("ix_berth_changes_seq")
        batch.create_index("ix_berth_changes_slot_seq", ["slot", "seq"])


def downgrade() -> None:
    with op.batch_alter_table("berth_changes") as batch:
        batch.drop_index("ix_berth_changes_slot_seq")
        batch.drop_column("slot")
        batch.create_index("ix_berth_changes_seq", ["seq"])
    # Only slot 1 numbered what a single counter row can read.
    op.execute("DELETE FROM berth_state WHERE id <> 1")
