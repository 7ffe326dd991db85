"""What Berth knows about upstream Placement's database schema.

Upstream's Alembic history has five revisions; the tables and columns they
leave behind differ in one place only (``422ece571366`` adds
``consumer_types`` and ``consumers.consumer_type_id``), while
``611cd6dffd7b`` and ``b5c396305c25`` only refuse to run over data that
lacks root providers or consumer records, and ``a082b8bb98d0`` drops
indexes. Upstream's tables and columns carry the same names as Berth's, so
one reader serves both (see ``berth.db.transfer``).

This module writes its own description of the schema at the 16.0.0 head
(constraint and index names included, so upstream's later migrations find
what they expect), from a reading of upstream's migrations; upstream code
is not needed at run time.
"""

from __future__ import annotations

import os_resource_classes
import sqlalchemy as sa
from sqlalchemy.engine import Connection

INITIAL = "b4ed3a175331"
#: Upstream's revisions, oldest first; the last is the 16.0.0 head.
REVISIONS = (INITIAL, "611cd6dffd7b", "b5c396305c25", "422ece571366", "a082b8bb98d0")
HEAD = REVISIONS[-1]
#: The first revision with ``consumer_types`` and
#: ``consumers.consumer_type_id``.
CONSUMER_TYPES_FROM = "422ece571366"
#: The first revision that refuses allocations without a consumer record
#: and providers without a root; older databases may hold both.
COMPLETE_FROM = "b5c396305c25"

#: Upstream numbers custom resource classes from here; standard classes
#: take their index in ``os_resource_classes.STANDARDS``.
CUSTOM_CLASS_ID_MIN = 10000


class UnsupportedSchema(Exception):
    """The database is not at a revision of upstream Placement's schema."""


def has_consumer_types(revision: str) -> bool:
    return REVISIONS.index(revision) >= REVISIONS.index(CONSUMER_TYPES_FROM)


def detect_revision(conn: Connection) -> str:
    """The upstream revision the database is at.

    Raises UnsupportedSchema naming what was found when it is not one of
    ``REVISIONS``.
    """
    names = set(sa.inspect(conn).get_table_names())
    if "alembic_version" not in names:
        raise UnsupportedSchema(
            "the source database has no alembic_version table: it is not "
            "an upstream Placement database (run upstream's "
            "`placement-manage db sync` on it first)"
        )
    found = list(conn.scalars(sa.text("SELECT version_num FROM alembic_version")))
    if len(found) != 1 or found[0] not in REVISIONS:
        raise UnsupportedSchema(
            "the source database is at revision %s, which is not one of "
            "upstream Placement's (%s, the 16.0.0 head is %s)"
            % (", ".join(found) or "none", ", ".join(REVISIONS), HEAD)
        )
    if "berth_state" in names:
        raise UnsupportedSchema("the source database is a Berth database, not upstream's")
    return str(found[0])


def standard_class_id(name: str) -> int | None:
    """The id upstream gives a standard resource class (None: not one)."""
    try:
        return list(os_resource_classes.STANDARDS).index(name)
    except ValueError:
        return None


def standard_class_name(class_id: int) -> str | None:
    """The standard class upstream numbers ``class_id``, if any (old
    databases reference standard classes they never stored)."""
    standards = list(os_resource_classes.STANDARDS)
    return standards[class_id] if 0 <= class_id < len(standards) else None


def _stamps() -> list[sa.Column[object]]:
    return [
        sa.Column("created_at", sa.DateTime, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=True),
    ]


def _serial() -> sa.Column[int]:
    return sa.Column("id", sa.Integer, primary_key=True, autoincrement=True)


def head_metadata() -> sa.MetaData:
    """Upstream's tables at the 16.0.0 head, as its migrations leave them."""
    md = sa.MetaData()
    sa.Table(
        "alembic_version",
        md,
        sa.Column("version_num", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    _add_names(md)
    _add_providers(md)
    _add_allocations(md)
    _add_links(md)
    return md


def _add_names(md: sa.MetaData) -> None:
    """The tables of unique names: classes, traits, consumer types,
    projects and users."""
    for name, column, kind in (
        ("resource_classes", "name", sa.String(255)),
        ("traits", "name", sa.Unicode(255)),
        ("consumer_types", "name", sa.Unicode(255)),
        ("projects", "external_id", sa.String(255)),
        ("users", "external_id", sa.String(255)),
    ):
        sa.Table(
            name,
            md,
            *_stamps(),
            _serial(),
            sa.Column(column, kind, nullable=False),
            sa.UniqueConstraint(column, name="uniq_%s0%s" % (name, column)),
        )


def _add_providers(md: sa.MetaData) -> None:
    """Providers and their inventories."""
    rp = sa.Table(
        "resource_providers",
        md,
        *_stamps(),
        _serial(),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.Unicode(200), nullable=True),
        sa.Column("generation", sa.Integer, nullable=True),
        sa.Column(
            "root_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=True
        ),
        sa.Column(
            "parent_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=True
        ),
        sa.UniqueConstraint("name", name="uniq_resource_providers0name"),
        sa.UniqueConstraint("uuid", name="uniq_resource_providers0uuid"),
    )
    sa.Index("resource_providers_parent_provider_id_idx", rp.c.parent_provider_id)
    sa.Index("resource_providers_root_provider_id_idx", rp.c.root_provider_id)
    inv = sa.Table(
        "inventories",
        md,
        *_stamps(),
        _serial(),
        *[
            sa.Column(c, sa.Integer, nullable=False)
            for c in (
                "resource_provider_id",
                "resource_class_id",
                "total",
                "reserved",
                "min_unit",
                "max_unit",
                "step_size",
            )
        ],
        sa.Column("allocation_ratio", sa.Float, nullable=False),
        sa.UniqueConstraint(
            "resource_provider_id",
            "resource_class_id",
            name="uniq_inventories0resource_provider_resource_class",
        ),
    )
    sa.Index("inventories_resource_class_id_idx", inv.c.resource_class_id)


def _add_allocations(md: sa.MetaData) -> None:
    """Allocations and their consumers."""
    alloc = sa.Table(
        "allocations",
        md,
        *_stamps(),
        _serial(),
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        sa.Column("consumer_id", sa.String(36), nullable=False),
        sa.Column("resource_class_id", sa.Integer, nullable=False),
        sa.Column("used", sa.Integer, nullable=False),
    )
    sa.Index(
        "allocations_resource_provider_class_used_idx",
        alloc.c.resource_provider_id,
        alloc.c.resource_class_id,
        alloc.c.used,
    )
    sa.Index("allocations_resource_class_id_idx", alloc.c.resource_class_id)
    sa.Index("allocations_consumer_id_idx", alloc.c.consumer_id)
    cons = sa.Table(
        "consumers",
        md,
        *_stamps(),
        _serial(),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("generation", sa.Integer, server_default=sa.text("0"), nullable=False),
        sa.Column(
            "consumer_type_id",
            sa.Integer,
            sa.ForeignKey("consumer_types.id", name="consumers_consumer_type_id_fkey"),
            nullable=True,
        ),
        sa.UniqueConstraint("uuid", name="uniq_consumers0uuid"),
    )
    sa.Index(
        "consumers_project_id_user_id_uuid_idx", cons.c.project_id, cons.c.user_id, cons.c.uuid
    )
    sa.Index("consumers_project_id_uuid_idx", cons.c.project_id, cons.c.uuid)
    sa.Index("consumers_consumer_type_id_idx", cons.c.consumer_type_id)


def _add_links(md: sa.MetaData) -> None:
    """Aggregates, and which providers are in which aggregate and have
    which trait."""
    sa.Table(
        "placement_aggregates",
        md,
        *_stamps(),
        _serial(),
        sa.Column("uuid", sa.String(36), nullable=True),
        sa.UniqueConstraint("uuid", name="uniq_placement_aggregates0uuid"),
    )
    rpa = sa.Table(
        "resource_provider_aggregates",
        md,
        *_stamps(),
        sa.Column("resource_provider_id", sa.Integer, primary_key=True),
        sa.Column("aggregate_id", sa.Integer, primary_key=True),
    )
    sa.Index("resource_provider_aggregates_aggregate_id_idx", rpa.c.aggregate_id)
    rpt = sa.Table(
        "resource_provider_traits",
        md,
        *_stamps(),
        sa.Column("trait_id", sa.Integer, sa.ForeignKey("traits.id"), primary_key=True),
        sa.Column(
            "resource_provider_id",
            sa.Integer,
            sa.ForeignKey("resource_providers.id"),
            primary_key=True,
        ),
    )
    sa.Index(
        "resource_provider_traits_resource_provider_trait_idx",
        rpt.c.resource_provider_id,
        rpt.c.trait_id,
    )
