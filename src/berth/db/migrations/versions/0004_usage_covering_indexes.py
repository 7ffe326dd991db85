"""Covering indexes for ``GET /usages``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

A project's usage sums walk its consumers, then each consumer's
allocations. Two wider indexes replace the ones they extend, so both
steps read only index pages: consumers (``project_id``, ``user_id``,
``consumer_type_id``, ``uuid``) and allocations (``consumer_id``,
``resource_class_id``, ``used``). Each new index is built before the old
one goes: MySQL needs an index that starts with ``project_id`` for the
consumers' foreign key at every moment.
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

#: (table, old index, its columns, new index, its columns)
_WIDENED = [
    (
        "consumers",
        "ix_consumers_project_id_user_id",
        ["project_id", "user_id"],
        "ix_consumers_project_id_user_id_consumer_type_id_uuid",
        ["project_id", "user_id", "consumer_type_id", "uuid"],
    ),
    (
        "allocations",
        "ix_allocations_consumer_id",
        ["consumer_id"],
        "ix_allocations_consumer_id_resource_class_id_used",
        ["consumer_id", "resource_class_id", "used"],
    ),
]


def upgrade() -> None:
    for table, old, _, new, columns in _WIDENED:
        op.create_index(new, table, columns)
        op.drop_index(old, table_name=table)


def downgrade() -> None:
    for table, old, columns, new, _ in _WIDENED:
        op.create_index(old, table, columns)
        op.drop_index(new, table_name=table)
