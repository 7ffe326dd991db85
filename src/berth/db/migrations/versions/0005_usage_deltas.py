"""What each write changed in its projects' usages.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

A write that changes allocations writes, beside its provider rows, one
``berth_changes`` row of kind ``p`` per (project, user, consumer type,
resource class) whose usage it changed, with the amount (and, with no
class, the change in the count of consumers holding allocations). A
worker then brings the ``GET /usages`` answers it keeps up to date from
those rows instead of summing the project's allocations again. The four
columns are empty on every other row.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_COLUMNS = ("user_id", "consumer_type_id", "resource_class_id", "amount")


def upgrade() -> None:
    with op.batch_alter_table("berth_changes") as batch:
        batch.add_column(sa.Column("user_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("consumer_type_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("resource_class_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("amount", sa.BigInteger, nullable=True))


def downgrade() -> None:
    # Rows of kind "p" written with amounts stay readable by the older
    # code as provider usage rows: a needless refresh, never a wrong one.
    with op.batch_alter_table("berth_changes") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
