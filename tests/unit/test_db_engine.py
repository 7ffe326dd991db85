"""The one place transactions are retried: which errors count as
transient, and that a transient failure is retried while others are not."""

from __future__ import annotations

import socket
import sqlite3

import pytest
import sqlalchemy as sa

from berth.api.app import create_app
from berth.db.engine import Database, create_engine, error_code, is_retryable, is_unavailable
from tests.conftest import Client, make_conf


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__("pg")
        self.sqlstate = sqlstate


def _wrap(orig: Exception) -> sa.exc.DBAPIError:
    return sa.exc.OperationalError("stmt", {}, orig)


@pytest.mark.parametrize(
    "orig,expected",
    [
        (sqlite3.OperationalError("database is locked"), True),
        (_PgError("40001"), True),  # serialization failure
        (_PgError("40P01"), True),  # deadlock
        (_PgError("23505"), False),  # unique violation
        (Exception(1213, "Deadlock found"), True),
        (Exception(1205, "Lock wait timeout"), True),
        (Exception(1062, "Duplicate entry"), False),
        (sqlite3.OperationalError("no such table: x"), False),
    ],
)
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


def _chained(first: BaseException, second: sa.exc.DBAPIError) -> sa.exc.DBAPIError:
    """``second`` raised while handling ``first``, as Python chains them."""
    try:
        try:
            raise first
        except BaseException:
            raise second  # noqa: B904 - implicit chaining is the point
    except sa.exc.DBAPIError as exc:
        return exc


def test_failed_rollback_to_savepoint_after_deadlock_is_retryable():
    # MariaDB drops the savepoint with the whole transaction on a deadlock.
    lost = _wrap(Exception(1305, "SAVEPOINT sa_savepoint_1 does not exist"))
    exc = _chained(_wrap(Exception(1213, "Deadlock found")), lost)
    assert error_code(exc) == "1213"
    assert is_retryable(exc)
    # The same 1305 with no deadlock behind it is a real error.
    assert error_code(_wrap(Exception(1305, "SAVEPOINT x does not exist"))) is None


def test_run_counts_retries_by_code_and_tells_listeners(tmp_path):
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "x.sqlite")))
    heard = []
    db.retries.listeners.append(heard.append)
    calls = []

    def flaky(conn):
        calls.append(1)
        if len(calls) == 1:
            raise _wrap(Exception(1213, "Deadlock found"))
        if len(calls) == 2:
            raise _wrap(sqlite3.OperationalError("database is locked"))
        return 1

    assert db.run(flaky) == 1
    assert db.retries.total == 2
    assert db.retries.by_code == {"1213": 1, "locked": 1}
    assert heard == ["1213", "locked"]


@pytest.mark.parametrize(
    "orig,expected",
    [
        (Exception(2003, "Can't connect to MySQL server"), True),
        (Exception(2013, "Lost connection to MySQL server during query"), True),
        (Exception(1047, "WSREP has not yet prepared node for application use"), True),
        (Exception(1213, "Deadlock found"), False),
        (_PgError("08006"), True),  # connection failure
        (_PgError("57P01"), True),  # admin shutdown
        (_PgError("23505"), False),
    ],
)
def test_is_unavailable(orig, expected):
    assert is_unavailable(_wrap(orig)) is expected
    assert not is_unavailable(ValueError("x"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("scheme", ["mysql+pymysql://root", "postgresql+psycopg://postgres"])
def test_unreachable_database_is_503_in_placement_format(scheme):
    url = "%s@127.0.0.1:%d/berth" % (scheme, _closed_port())
    db = Database(create_engine(url))
    with Client(create_app(make_conf(), db)) as client:
        resp = client.get("/resource_providers")
    assert resp.status_code == 503
    error = resp.json()["errors"][0]
    assert error["status"] == 503
    assert error["code"] == "placement.undefined_code"
    assert error["request_id"].startswith("req-")


def _lost() -> sa.exc.DBAPIError:
    """What SQLAlchemy raises when a statement finds its connection gone."""
    return sa.exc.OperationalError(
        "stmt", {}, Exception("server closed the connection"), connection_invalidated=True
    )


def test_a_lost_connection_runs_the_transaction_again_once(tmp_path):
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "x.sqlite")))
    calls = []

    def once_lost(conn):
        calls.append(1)
        if len(calls) == 1:
            raise _lost()
        return conn.execute(sa.text("SELECT 42")).scalar()

    assert db.run(once_lost) == 42
    assert db.read(lambda c: 7) == 7
    assert len(calls) == 2
    # Not a transient failure of the database: no retry counted.
    assert db.retries.total == 0

    calls.clear()

    def always_lost(conn):
        calls.append(1)
        raise _lost()

    with pytest.raises(sa.exc.OperationalError) as caught:
        db.read(always_lost)
    assert caught.value.connection_invalidated
    assert is_unavailable(caught.value)  # so the client gets a 503
    assert len(calls) == 2


def test_a_connection_lost_while_committing_is_not_run_again(tmp_path):
    # The commit may have been applied: running it again could apply it
    # twice, so the error stands (the client gets a 503).
    engine = create_engine("sqlite:///%s" % (tmp_path / "x.sqlite"))
    db = Database(engine)

    @sa.event.listens_for(engine, "commit")
    def _gone(conn):
        raise _lost()

    calls = []
    with pytest.raises(sa.exc.OperationalError):
        db.run(lambda conn: calls.append(conn.execute(sa.text("SELECT 1"))))
    assert len(calls) == 1


def test_races_past_the_last_attempt_are_409_concurrent_update(tmp_path, monkeypatch):
    """When every attempt deadlocks (or, on Galera, loses certification),
    the client gets the 409 of a concurrent update, not a 500: nothing was
    written and trying again is what resolves it."""
    from berth.db import engine as engine_mod
    from berth.db import setup
    from berth.domain import allocation

    engine = create_engine("sqlite:///%s" % (tmp_path / "r.sqlite"))
    setup.prepare(engine)
    db = Database(engine)
    attempts = []

    def always_deadlocks(conn, requests, **kw):
        attempts.append(1)
        raise _wrap(Exception(1213, "Deadlock found"))

    monkeypatch.setattr(allocation, "replace_allocations", always_deadlocks)
    monkeypatch.setattr(engine_mod.time, "sleep", lambda s: None)
    consumer = "7f1c1e9a-1b2c-4d3e-8f4a-5b6c7d8e9f00"
    with Client(create_app(make_conf(), db)) as client:
        resp = client.put(
            "/allocations/" + consumer,
            json={
                "allocations": {"0b7a2f4e-3f7e-4a61-9a55-d1d6b0b7a0aa": {"resources": {"VCPU": 1}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        )
        assert resp.status_code == 409, resp.text
        error = resp.json()["errors"][0]
        assert error["code"] == "placement.concurrent_update"
        assert "Try the request again" in error["detail"]
        assert len(attempts) == engine_mod.TX_ATTEMPTS
        assert client.get("/allocations/" + consumer).json()["allocations"] == {}


def test_a_begin_that_finds_the_file_locked_is_retried(tmp_path, monkeypatch):
    # SQLite's BEGIN IMMEDIATE runs on the driver's connection: a lock not
    # had within busy_timeout must still come out as SQLAlchemy's error,
    # which Database.run retries.
    from berth.db import engine as engine_mod

    monkeypatch.setattr(engine_mod, "SQLITE_BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "x.sqlite"
    db = Database(create_engine("sqlite:///%s" % path))
    db.run(lambda conn: conn.exec_driver_sql("CREATE TABLE t (x INTEGER)"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    db.retries.listeners.append(lambda code: holder.execute("COMMIT"))

    def write(conn):
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        return conn.exec_driver_sql("SELECT count(*) FROM t").scalar()

    assert db.run(write) == 1
    assert db.retries.by_code == {"locked": 1}
    holder.close()


def test_begin_is_timed_for_the_observer(tmp_path):
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "x.sqlite")))
    times = []

    class Observer:
        def connections_in_use(self, count):
            pass

        def transaction_retried(self):
            pass

        def sql_time(self, seconds, statements):
            times.append((seconds, statements))

    db.observer = Observer()
    db.run(lambda conn: None)
    # BEGIN IMMEDIATE; COMMIT is the driver's commit()
    assert len(times) == 1 and times[0][1] == 1
    assert times[0][0] >= 0


def test_the_observer_hears_a_transactions_statements_once_at_its_end(tmp_path):
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "x.sqlite")))
    heard = []

    class Observer:
        def connections_in_use(self, count):
            heard.append(("in use", count))

        def transaction_retried(self):
            pass

        def sql_time(self, seconds, statements):
            heard.append(("sql", statements))

    db.observer = Observer()

    def work(conn):
        for _ in range(4):
            conn.exec_driver_sql("SELECT 1").all()
        assert heard == [("in use", 1)]  # nothing told mid-transaction

    db.read(work)
    # BEGIN and the four SELECTs, told after the connection went back.
    assert heard == [("in use", 1), ("in use", 0), ("sql", 5)]
    with pytest.raises(ZeroDivisionError):
        db.run(lambda conn: (conn.exec_driver_sql("SELECT 1"), 1 / 0))
    assert heard[-1] == ("sql", 2)  # a failed transaction's statements count too
