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

from typing import Any

import pytest
import sqlalchemy as sa

from berth.db.engine import Database
from support.thin_probe import ROLLBACK_INSERT, ROLLBACK_PROBE

BY_ID = sa.select(ROLLBACK_PROBE.c.name).where(ROLLBACK_PROBE.c.id == sa.bindparam("b_id"))


class Refused(Exception):
    """What a domain function raises to refuse a write (a 409)."""


def _prepared(conn: Any) -> set[str]:
    """The statements prepared on ``conn``'s session, by their text."""
    return {row[0] for row in conn.exec_driver_sql("SELECT statement FROM pg_prepared_statements")}


def _warm(db: Database) -> Any:
    """Run BY_ID until psycopg prepared it; its driver connection."""

    def read(conn: Any) -> Any:
        assert conn.execute(BY_ID, {"b_id": 1}).scalar() == "one"
        return conn.connection.driver_connection

    drivers = {id(db.read(read)) for _ in range(8)}
    assert len(drivers) == 1
    return db.read(lambda conn: conn.connection.driver_connection)


def _by_id_prepared(db: Database) -> bool:
    return any("berth_pg_rollback_probe" in text and "WHERE" in text for text in db.read(_prepared))


def test_connections_keep_prepared_statements_and_the_fast_path(rollback_db: Database) -> None:
    driver = _warm(rollback_db)
    assert type(driver).__name__ == "KeepingPrepared"
    assert _by_id_prepared(rollback_db)
    # No dialect listener: SQLAlchemy's faster paths stay open.
    assert not rollback_db.engine.dialect._has_events


def test_a_refused_write_is_undone_and_keeps_what_was_prepared(rollback_db: Database) -> None:
    driver = _warm(rollback_db)
    names = dict(driver._prepared._names)
    assert names

    def refuse(conn: Any) -> None:
        conn.execute(ROLLBACK_INSERT, {"id": 2, "name": "two"})
        assert conn.execute(BY_ID, {"b_id": 2}).scalar() == "two"
        raise Refused

    with pytest.raises(Refused):
        rollback_db.run(refuse)
    assert rollback_db.read(lambda conn: conn.execute(BY_ID, {"b_id": 2}).scalar()) is None
    assert rollback_db.read(lambda conn: conn.connection.driver_connection) is driver
    assert dict(driver._prepared._names) == names
    assert _by_id_prepared(rollback_db)
    # And in use: the next runs bind it by name, with no error.
    assert rollback_db.read(lambda conn: conn.execute(BY_ID, {"b_id": 1}).scalar()) == "one"


def test_a_failed_statement_rolls_back_and_the_connection_serves_on(rollback_db: Database) -> None:
    driver = _warm(rollback_db)

    def clash(conn: Any) -> None:
        conn.execute(ROLLBACK_INSERT, {"id": 3, "name": "three"})
        conn.execute(ROLLBACK_INSERT, {"id": 1, "name": "again"})  # a duplicate key

    with pytest.raises(sa.exc.IntegrityError):
        rollback_db.run(clash)
    assert driver.pgconn.transaction_status == 0  # IDLE
    names = rollback_db.read(
        lambda conn: conn.execute(
            sa.select(ROLLBACK_PROBE.c.id, ROLLBACK_PROBE.c.name).order_by(ROLLBACK_PROBE.c.id)
        ).all()
    )
    assert [tuple(row) for row in names] == [(1, "one")]
    assert _by_id_prepared(rollback_db)
    rollback_db.run(lambda conn: conn.execute(ROLLBACK_INSERT, {"id": 3, "name": "three"}))
    assert rollback_db.read(lambda conn: conn.execute(BY_ID, {"b_id": 3}).scalar()) == "three"


def test_a_rollback_to_a_savepoint_keeps_the_outer_transaction(rollback_db: Database) -> None:
    _warm(rollback_db)

    def nested(conn: Any) -> None:
        conn.execute(ROLLBACK_INSERT, {"id": 4, "name": "four"})
        with pytest.raises(sa.exc.IntegrityError):
            with conn.begin_nested():
                conn.execute(ROLLBACK_INSERT, {"id": 1, "name": "again"})
        conn.execute(ROLLBACK_INSERT, {"id": 5, "name": "five"})

    rollback_db.run(nested)
    ids = rollback_db.read(
        lambda conn: conn.scalars(
            sa.select(ROLLBACK_PROBE.c.id).order_by(ROLLBACK_PROBE.c.id)
        ).all()
    )
    assert ids == [1, 4, 5]
