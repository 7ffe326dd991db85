"""The Placement schema, in SQLAlchemy Core.

Designed for the queries Placement runs most: capacity per (provider,
class), trees by root, providers by trait and aggregate, and allocations by
consumer. See docs/schema.md for the reasoning behind each index.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# MySQL needs a bounded length for indexed strings; 255 matches upstream.
NAME = sa.String(255)
UUID = sa.String(36)


#: Binary collation on MySQL/MariaDB, so names and uuids compare exactly as
#: on SQLite and PostgreSQL (case-sensitive).
MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def _stamps() -> list[sa.Column[object]]:
    return [
        sa.Column("created_at", sa.DateTime, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=True),
    ]


def _names(name: str, column: str = "name") -> sa.Table:
    """A table of unique names (or external ids), each with its id."""
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(column, NAME, nullable=False, unique=True),
        *_stamps(),
        **MYSQL,
    )


resource_classes = _names("resource_classes")
traits = _names("traits")

resource_providers = sa.Table(
    "resource_providers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", UUID, nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("generation", sa.Integer, nullable=False, default=0),
    sa.Column(
        "root_provider_id",
        sa.Integer,
        sa.ForeignKey("resource_providers.id"),
        nullable=True,
        index=True,
    ),
    sa.Column(
        "parent_provider_id",
        sa.Integer,
        sa.ForeignKey("resource_providers.id"),
        nullable=True,
        index=True,
    ),
    *_stamps(),
    **MYSQL,
)

inventories = sa.Table(
    "inventories",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=False
    ),
    sa.Column(
        "resource_class_id",
        sa.Integer,
        sa.ForeignKey("resource_classes.id"),
        nullable=False,
        index=True,
    ),
    sa.Column("total", sa.Integer, nullable=False),
    sa.Column("reserved", sa.Integer, nullable=False),
    sa.Column("min_unit", sa.Integer, nullable=False),
    sa.Column("max_unit", sa.Integer, nullable=False),
    sa.Column("step_size", sa.Integer, nullable=False),
    # Double precision everywhere: MySQL's plain FLOAT would read 0.1 back
    # as 0.100000001.
    sa.Column("allocation_ratio", sa.Double(), nullable=False),
    *_stamps(),
    sa.UniqueConstraint("resource_provider_id", "resource_class_id"),
    **MYSQL,
)

projects = _names("projects", "external_id")
users = _names("users", "external_id")
consumer_types = _names("consumer_types")

consumers = sa.Table(
    "consumers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", UUID, nullable=False, unique=True),
    sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False, default=0),
    sa.Column("consumer_type_id", sa.Integer, sa.ForeignKey("consumer_types.id"), nullable=True),
    *_stamps(),
    # GET /usages reads a project's (and user's) consumers, their types
    # and uuids from this index alone.
    sa.Index(None, "project_id", "user_id", "consumer_type_id", "uuid"),
    **MYSQL,
)

allocations = sa.Table(
    "allocations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=False
    ),
    sa.Column("consumer_id", UUID, nullable=False),
    sa.Column(
        "resource_class_id", sa.Integer, sa.ForeignKey("resource_classes.id"), nullable=False
    ),
    sa.Column("used", sa.Integer, nullable=False),
    *_stamps(),
    # Usage per (provider, class) is summed on every claim and candidate
    # query; this index covers it.
    sa.Index(None, "resource_provider_id", "resource_class_id", "used"),
    # A consumer's allocations; covers the usage sums per project.
    sa.Index(None, "consumer_id", "resource_class_id", "used"),
    sa.Index(None, "resource_class_id"),
    **MYSQL,
)

placement_aggregates = sa.Table(
    "placement_aggregates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", UUID, nullable=False, unique=True),
    *_stamps(),
    **MYSQL,
)

resource_provider_aggregates = sa.Table(
    "resource_provider_aggregates",
    metadata,
    sa.Column(
        "resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), primary_key=True
    ),
    sa.Column(
        "aggregate_id",
        sa.Integer,
        sa.ForeignKey("placement_aggregates.id"),
        primary_key=True,
        index=True,
    ),
    *_stamps(),
    **MYSQL,
)

resource_provider_traits = sa.Table(
    "resource_provider_traits",
    metadata,
    sa.Column(
        "resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), primary_key=True
    ),
    sa.Column("trait_id", sa.Integer, sa.ForeignKey("traits.id"), primary_key=True, index=True),
    *_stamps(),
    **MYSQL,
)

# The change sequence (see berth.db.changes): one counter row per slot
# (database node), bumped by every write transaction that changes what the
# candidate engine caches, and one row per (slot, number, provider) it
# changed.
berth_state = sa.Table(
    "berth_state",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    # The newest number of this slot whose events the change feed pruned
    # (berth_events): a feed reader behind it has lost history.
    sa.Column("pruned", sa.BigInteger, nullable=False, server_default="0"),
    **MYSQL,
)

#: 64-bit ids that still autoincrement on SQLite (where only INTEGER does).
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

berth_changes = sa.Table(
    "berth_changes",
    metadata,
    sa.Column("id", BIG_ID, primary_key=True, autoincrement=True),
    # The counter row (berth_state.id) that numbered this change.
    sa.Column("slot", sa.Integer, nullable=False, server_default="1"),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.String(1), nullable=False),
    # No foreign key: the provider may be gone by the time this is read.
    # For kind "p" (berth.db.changes.PROJECT) it holds a projects.id.
    sa.Column("resource_provider_id", sa.Integer, nullable=True),
    # Kind "p" only: whose usage (users.id, consumer_types.id), of which
    # class, changed by how much; with no class, ``amount`` is the change
    # in the number of consumers holding allocations.
    sa.Column("user_id", sa.Integer, nullable=True),
    sa.Column("consumer_type_id", sa.Integer, nullable=True),
    sa.Column("resource_class_id", sa.Integer, nullable=True),
    sa.Column("amount", sa.BigInteger, nullable=True),
    sa.Index(None, "slot", "seq"),
    **MYSQL,
)

#: The change feed's event log (``berth.db.events``): what each numbered
#: write did, written by ``berth.db.changes.flush`` in the write's own
#: transaction, one row per event under the write's (slot, seq).
berth_events = sa.Table(
    "berth_events",
    metadata,
    sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("kind", sa.String(32), nullable=False),
    # A provider uuid, consumer uuid, resource class or trait name.
    sa.Column("subject", NAME, nullable=True),
    # The root provider uuid of the tree a provider event is about.
    sa.Column("tree", UUID, nullable=True),
    # The project (external id) of an allocation event's consumer.
    sa.Column("project", NAME, nullable=True),
    # When the write committed, in seconds since the epoch (retention).
    sa.Column("created_at", sa.Double, nullable=False),
    # {"new": ..., "old": ...} as JSON.
    sa.Column("body", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql"), nullable=False),
    **MYSQL,
)
