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


def test_prepare_migrates_then_seeds_in_one_place(tmp_path):
    """``setup.prepare`` is the one "migrate, then seed": it refuses a
    database behind head unless asked to upgrade, migrates without
    seeding itself, and seeds (again) every time it runs."""
    import os_resource_classes
    import os_traits
    import pytest
    import sqlalchemy as sa

    from berth.db import setup
    from berth.db import tables as t
    from berth.db.engine import create_engine

    engine = create_engine("sqlite:///%s" % (tmp_path / "p.sqlite"))

    def names():
        with engine.connect() as conn:
            return (set(conn.scalars(sa.select(t.resource_classes.c.name))),
                    set(conn.scalars(sa.select(t.traits.c.name))))

    with pytest.raises(setup.NotMigrated, match="berth db sync"):
        setup.prepare(engine, upgrade=False)
    migrate.upgrade(engine)
    assert names() == (set(), set())
    setup.prepare(engine, upgrade=False)
    classes, traits = names()
    assert set(os_resource_classes.STANDARDS) == classes
    assert set(os_traits.get_traits()) == traits
    with engine.begin() as conn:
        conn.execute(t.traits.delete().where(t.traits.c.name == "HW_CPU_X86_AVX2"))
    setup.prepare(engine)
    assert names() == (classes, traits)
    engine.dispose()
