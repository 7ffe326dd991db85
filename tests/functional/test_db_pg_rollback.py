"""PostgreSQL: a rollback keeps the connection's prepared statements
(``berth.db.engine._rollback_keeping_prepared``).

psycopg prepares a statement on the server after its fifth run on a
connection and, left to itself, forgets all of them at every rollback; a
generation conflict (409) is a rolled-back write, so each one cost the
backend fresh plannings of every statement. These tests pin that a
rollback still undoes the transaction, in every state it can be in, and
that what was prepared stays prepared and in use.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db.engine import Database, create_engine

META = sa.MetaData()
PROBE = sa.Table(
    "berth_pg_rollback_probe", META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(50), nullable=False))
BY_ID = sa.select(PROBE.c.name).where(PROBE.c.id == sa.bindparam("b_id"))
INSERT = PROBE.insert()


class Refused(Exception):
    """What a domain function raises to refuse a write (a 409)."""


@pytest.fixture
def one(db_url: str) -> Iterator[Database]:
    """A database whose pool holds one connection, so that every
    transaction runs on the same one."""
    engine = create_engine(db_url, pool_size=1, max_overflow=0)
    if engine.dialect.name != "postgresql":
        engine.dispose()
        pytest.skip("psycopg's prepared statements: PostgreSQL only")
    PROBE.create(engine, checkfirst=True)
    try:
        with engine.begin() as conn:
            conn.execute(PROBE.delete())
            conn.execute(INSERT, [{"id": 1, "name": "one"}])
        yield Database(engine)
    finally:
        PROBE.drop(engine, checkfirst=True)
        engine.dispose()


def _prepared(conn: Any) -> set[str]:
    """The statements prepared on ``conn``'s session, by their text."""
    return {row[0] for row in conn.exec_driver_sql(
        "SELECT statement FROM pg_prepared_statements")}


def _warm(db: Database) -> Any:
    """Run BY_ID until psycopg prepared it; its driver connection."""
    def read(conn: Any) -> Any:
        assert conn.execute(BY_ID, {"b_id": 1}).scalar() == "one"
        return conn.connection.driver_connection
    drivers = {id(db.read(read)) for _ in range(8)}
    assert len(drivers) == 1
    return db.read(lambda conn: conn.connection.driver_connection)


def _by_id_prepared(db: Database) -> bool:
    return any("berth_pg_rollback_probe" in text and "WHERE" in text
               for text in db.read(_prepared))


def test_connections_keep_prepared_statements_and_the_fast_path(
        one: Database) -> None:
    driver = _warm(one)
    assert type(driver).__name__ == "KeepingPrepared"
    assert _by_id_prepared(one)
    # No dialect listener: SQLAlchemy's faster paths stay open.
    assert not one.engine.dialect._has_events


def test_a_refused_write_is_undone_and_keeps_what_was_prepared(
        one: Database) -> None:
    driver = _warm(one)
    names = dict(driver._prepared._names)
    assert names

    def refuse(conn: Any) -> None:
        conn.execute(INSERT, {"id": 2, "name": "two"})
        assert conn.execute(BY_ID, {"b_id": 2}).scalar() == "two"
        raise Refused

    with pytest.raises(Refused):
        one.run(refuse)
    assert one.read(lambda conn: conn.execute(BY_ID, {"b_id": 2}).scalar()
                    ) is None
    assert one.read(lambda conn: conn.connection.driver_connection) is driver
    assert dict(driver._prepared._names) == names
    assert _by_id_prepared(one)
    # And in use: the next runs bind it by name, with no error.
    assert one.read(lambda conn: conn.execute(BY_ID, {"b_id": 1}).scalar()
                    ) == "one"


def test_a_failed_statement_rolls_back_and_the_connection_serves_on(
        one: Database) -> None:
    driver = _warm(one)

    def clash(conn: Any) -> None:
        conn.execute(INSERT, {"id": 3, "name": "three"})
        conn.execute(INSERT, {"id": 1, "name": "again"})  # a duplicate key

    with pytest.raises(sa.exc.IntegrityError):
        one.run(clash)
    assert driver.pgconn.transaction_status == 0  # IDLE
    names = one.read(lambda conn: conn.execute(
        sa.select(PROBE.c.id, PROBE.c.name).order_by(PROBE.c.id)).all())
    assert [tuple(row) for row in names] == [(1, "one")]
    assert _by_id_prepared(one)
    one.run(lambda conn: conn.execute(INSERT, {"id": 3, "name": "three"}))
    assert one.read(lambda conn: conn.execute(BY_ID, {"b_id": 3}).scalar()
                    ) == "three"


def test_a_rollback_to_a_savepoint_keeps_the_outer_transaction(
        one: Database) -> None:
    _warm(one)

    def nested(conn: Any) -> None:
        conn.execute(INSERT, {"id": 4, "name": "four"})
        with pytest.raises(sa.exc.IntegrityError):
            with conn.begin_nested():
                conn.execute(INSERT, {"id": 1, "name": "again"})
        conn.execute(INSERT, {"id": 5, "name": "five"})

    one.run(nested)
    ids = one.read(lambda conn: conn.scalars(
        sa.select(PROBE.c.id).order_by(PROBE.c.id)).all())
    assert ids == [1, 4, 5]
