"""Migrations: empty -> head works on every backend, and the migrated
schema matches the table definitions exactly."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from berth.db import migrate
from berth.db.tables import metadata


def test_database_is_at_head(engine):
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_models_and_migrations_agree(engine):
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, metadata)
    assert diff == []


def test_upgrade_is_idempotent_and_seeds_standard_data(engine):
    import os_resource_classes
    import os_traits
    import sqlalchemy as sa

    from berth.db import tables as t
    migrate.upgrade(engine)
    with engine.connect() as conn:
        classes = set(conn.scalars(sa.select(t.resource_classes.c.name)))
        traits = set(conn.scalars(sa.select(t.traits.c.name)))
    assert set(os_resource_classes.STANDARDS) <= classes
    assert set(os_traits.get_traits()) <= traits
