"""The one place transactions are retried: which errors count as
transient, and that a transient failure is retried while others are not."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa

from berth.db.engine import Database, create_engine, is_retryable


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__("pg")
        self.sqlstate = sqlstate


def _wrap(orig: Exception) -> sa.exc.DBAPIError:
    return sa.exc.OperationalError("stmt", {}, orig)


@pytest.mark.parametrize("orig,expected", [
    (sqlite3.OperationalError("database is locked"), True),
    (_PgError("40001"), True),          # serialization failure
    (_PgError("40P01"), True),          # deadlock
    (_PgError("23505"), False),         # unique violation
    (Exception(1213, "Deadlock found"), True),
    (Exception(1205, "Lock wait timeout"), True),
    (Exception(1062, "Duplicate entry"), False),
    (sqlite3.OperationalError("no such table: x"), False),
])
def test_is_retryable(orig, expected):
    assert is_retryable(_wrap(orig)) is expected


def test_plain_exceptions_are_not_retryable():
    assert not is_retryable(ValueError("x"))


def test_run_retries_transient_failures_then_succeeds(tmp_path):
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "x.sqlite")))
    calls = []

    def flaky(conn):
        calls.append(1)
        if len(calls) < 3:
            raise _wrap(sqlite3.OperationalError("database is locked"))
        return conn.execute(sa.text("SELECT 42")).scalar()

    assert db.run(flaky) == 42
    assert len(calls) == 3


def test_run_does_not_retry_other_errors(tmp_path):
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "x.sqlite")))
    calls = []

    def broken(conn):
        calls.append(1)
        raise _wrap(sqlite3.OperationalError("no such table: x"))

    with pytest.raises(sa.exc.OperationalError):
        db.run(broken)
    assert len(calls) == 1


def test_failed_transaction_changes_nothing(tmp_path):
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "x.sqlite")))
    db.run(lambda c: c.execute(sa.text("CREATE TABLE t (x INTEGER)")))

    def half(conn):
        conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        db.run(half)
    assert db.read(lambda c: c.execute(sa.text("SELECT COUNT(*) FROM t")).scalar()) == 0
