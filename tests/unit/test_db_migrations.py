"""Migrations: empty -> head works on every backend, and the migrated
schema matches the table definitions exactly."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from berth.db import migrate
from berth.db.engine import create_engine
from berth.db.tables import metadata
from support.databases import downgrade
from tests.conftest import BACKENDS, _server_db


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
            return (
                set(conn.scalars(sa.select(t.resource_classes.c.name))),
                set(conn.scalars(sa.select(t.traits.c.name))),
            )

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


def _fresh_engine(kind, tmp_path):
    """An engine on an empty database of ``kind``, and how to drop it."""
    if kind == "sqlite":
        url, drop = "sqlite:///%s" % (tmp_path / "m.sqlite"), None
    else:
        url, drop = _server_db(kind, str(tmp_path))
    return create_engine(url), drop


@pytest.mark.parametrize("kind", BACKENDS)
def test_0004_widens_the_usage_indexes_and_back(kind, tmp_path):
    """0004 replaces the consumers and allocations indexes with covering
    ones on every backend, keeps the rows, and its downgrade restores
    0003's indexes."""
    engine, drop = _fresh_engine(kind, tmp_path)

    def indexes():
        inspector = sa.inspect(engine)
        return {
            table: sorted(
                i["name"] for i in inspector.get_indexes(table) if i["name"].startswith("ix_")
            )
            for table in ("consumers", "allocations")
        }

    try:
        migrate.upgrade(engine, "0003")
        before = indexes()
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO projects (id, external_id) VALUES (1, 'p')"))
            conn.execute(sa.text("INSERT INTO users (id, external_id) VALUES (1, 'u')"))
            conn.execute(
                sa.text(
                    "INSERT INTO consumers (id, uuid, project_id, user_id, "
                    "generation) VALUES (1, 'c', 1, 1, 0)"
                )
            )
        migrate.upgrade(engine)
        assert indexes() == {
            "consumers": ["ix_consumers_project_id_user_id_consumer_type_id_uuid"],
            "allocations": [
                "ix_allocations_consumer_id_resource_class_id_used",
                "ix_allocations_resource_class_id",
                "ix_allocations_resource_provider_id_resource_class_id_used",
            ],
        }
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT uuid FROM consumers")).scalars().all() == ["c"]
        downgrade(engine, "0003")
        assert indexes() == before
        assert "ix_consumers_project_id_user_id" in before["consumers"]
    finally:
        engine.dispose()
        if drop is not None:
            drop()


@pytest.mark.parametrize("kind", BACKENDS)
def test_0005_adds_usage_amounts_to_change_rows_and_back(kind, tmp_path):
    """0005 gives change rows the columns of a project's usage amounts,
    keeps the rows there are, and its downgrade takes the columns away."""
    engine, drop = _fresh_engine(kind, tmp_path)

    def columns():
        return [c["name"] for c in sa.inspect(engine).get_columns("berth_changes")]

    try:
        migrate.upgrade(engine, "0004")
        before = columns()
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO berth_changes (slot, seq, kind, "
                    "resource_provider_id) VALUES (1, 1, 'u', 3)"
                )
            )
        migrate.upgrade(engine)
        assert columns() == before + ["user_id", "consumer_type_id", "resource_class_id", "amount"]
        with engine.connect() as conn:
            assert conn.execute(
                sa.text("SELECT kind, resource_provider_id, amount FROM berth_changes")
            ).all() == [("u", 3, None)]
        downgrade(engine, "0004")
        assert columns() == before
    finally:
        engine.dispose()
        if drop is not None:
            drop()
