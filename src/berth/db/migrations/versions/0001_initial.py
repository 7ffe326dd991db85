"""Initial Placement schema.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Binary collation on MySQL/MariaDB: names compare as on the other backends.
MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def _stamps() -> list[sa.Column[Any]]:
    return [
        sa.Column("created_at", sa.DateTime, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=True),
    ]


def _named(table: str) -> None:
    op.create_table(
        table,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False),
        *_stamps(),
        sa.PrimaryKeyConstraint("id", name="pk_%s" % table),
        sa.UniqueConstraint("name", name="uq_%s_name" % table),
        **MYSQL,
    )


def _external(table: str) -> None:
    op.create_table(
        table,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("external_id", sa.String(255), nullable=False),
        *_stamps(),
        sa.PrimaryKeyConstraint("id", name="pk_%s" % table),
        sa.UniqueConstraint("external_id", name="uq_%s_external_id" % table),
        **MYSQL,
    )


def upgrade() -> None:
    _named("resource_classes")
    _named("traits")
    _named("consumer_types")
    _external("projects")
    _external("users")
    op.create_table(
        "resource_providers",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("root_provider_id", sa.Integer, nullable=True),
        sa.Column("parent_provider_id", sa.Integer, nullable=True),
        *_stamps(),
        sa.PrimaryKeyConstraint("id", name="pk_resource_providers"),
        sa.UniqueConstraint("uuid", name="uq_resource_providers_uuid"),
        sa.UniqueConstraint("name", name="uq_resource_providers_name"),
        sa.ForeignKeyConstraint(
            ["root_provider_id"],
            ["resource_providers.id"],
            name="fk_resource_providers_root_provider_id",
        ),
        sa.ForeignKeyConstraint(
            ["parent_provider_id"],
            ["resource_providers.id"],
            name="fk_resource_providers_parent_provider_id",
        ),
        **MYSQL,
    )
    op.create_index(
        "ix_resource_providers_root_provider_id", "resource_providers", ["root_provider_id"]
    )
    op.create_index(
        "ix_resource_providers_parent_provider_id", "resource_providers", ["parent_provider_id"]
    )
    op.create_table(
        "inventories",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        sa.Column("resource_class_id", sa.Integer, nullable=False),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("reserved", sa.Integer, nullable=False),
        sa.Column("min_unit", sa.Integer, nullable=False),
        sa.Column("max_unit", sa.Integer, nullable=False),
        sa.Column("step_size", sa.Integer, nullable=False),
        sa.Column("allocation_ratio", sa.Double(), nullable=False),
        *_stamps(),
        sa.PrimaryKeyConstraint("id", name="pk_inventories"),
        sa.UniqueConstraint(
            "resource_provider_id",
            "resource_class_id",
            name="uq_inventories_resource_provider_id_resource_class_id",
        ),
        sa.ForeignKeyConstraint(
            ["resource_provider_id"],
            ["resource_providers.id"],
            name="fk_inventories_resource_provider_id",
        ),
        sa.ForeignKeyConstraint(
            ["resource_class_id"], ["resource_classes.id"], name="fk_inventories_resource_class_id"
        ),
        **MYSQL,
    )
    op.create_index("ix_inventories_resource_class_id", "inventories", ["resource_class_id"])
    op.create_table(
        "consumers",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("consumer_type_id", sa.Integer, nullable=True),
        *_stamps(),
        sa.PrimaryKeyConstraint("id", name="pk_consumers"),
        sa.UniqueConstraint("uuid", name="uq_consumers_uuid"),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], name="fk_consumers_project_id"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_consumers_user_id"),
        sa.ForeignKeyConstraint(
            ["consumer_type_id"], ["consumer_types.id"], name="fk_consumers_consumer_type_id"
        ),
        **MYSQL,
    )
    op.create_index("ix_consumers_project_id_user_id", "consumers", ["project_id", "user_id"])
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        sa.Column("consumer_id", sa.String(36), nullable=False),
        sa.Column("resource_class_id", sa.Integer, nullable=False),
        sa.Column("used", sa.Integer, nullable=False),
        *_stamps(),
        sa.PrimaryKeyConstraint("id", name="pk_allocations"),
        sa.ForeignKeyConstraint(
            ["resource_provider_id"],
            ["resource_providers.id"],
            name="fk_allocations_resource_provider_id",
        ),
        sa.ForeignKeyConstraint(
            ["resource_class_id"], ["resource_classes.id"], name="fk_allocations_resource_class_id"
        ),
        **MYSQL,
    )
    op.create_index("ix_allocations_consumer_id", "allocations", ["consumer_id"])
    op.create_index(
        "ix_allocations_resource_provider_id_resource_class_id_used",
        "allocations",
        ["resource_provider_id", "resource_class_id", "used"],
    )
    op.create_index("ix_allocations_resource_class_id", "allocations", ["resource_class_id"])
    op.create_table(
        "placement_aggregates",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        *_stamps(),
        sa.PrimaryKeyConstraint("id", name="pk_placement_aggregates"),
        sa.UniqueConstraint("uuid", name="uq_placement_aggregates_uuid"),
        **MYSQL,
    )
    op.create_table(
        "resource_provider_aggregates",
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        sa.Column("aggregate_id", sa.Integer, nullable=False),
        *_stamps(),
        sa.PrimaryKeyConstraint(
            "resource_provider_id", "aggregate_id", name="pk_resource_provider_aggregates"
        ),
        sa.ForeignKeyConstraint(
            ["resource_provider_id"],
            ["resource_providers.id"],
            name="fk_resource_provider_aggregates_resource_provider_id",
        ),
        sa.ForeignKeyConstraint(
            ["aggregate_id"],
            ["placement_aggregates.id"],
            name="fk_resource_provider_aggregates_aggregate_id",
        ),
        **MYSQL,
    )
    op.create_index(
        "ix_resource_provider_aggregates_aggregate_id",
        "resource_provider_aggregates",
        ["aggregate_id"],
    )
    op.create_table(
        "resource_provider_traits",
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        sa.Column("trait_id", sa.Integer, nullable=False),
        *_stamps(),
        sa.PrimaryKeyConstraint(
            "resource_provider_id", "trait_id", name="pk_resource_provider_traits"
        ),
        sa.ForeignKeyConstraint(
            ["resource_provider_id"],
            ["resource_providers.id"],
            name="fk_resource_provider_traits_resource_provider_id",
        ),
        sa.ForeignKeyConstraint(
            ["trait_id"], ["traits.id"], name="fk_resource_provider_traits_trait_id"
        ),
        **MYSQL,
    )
    op.create_index(
        "ix_resource_provider_traits_trait_id", "resource_provider_traits", ["trait_id"]
    )
