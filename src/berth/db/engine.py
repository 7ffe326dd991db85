"""Engine set-up and the one place where transactions are run and retried.

SQLite runs in WAL mode with foreign keys on, and every write transaction
starts with ``BEGIN IMMEDIATE`` so that two writers never deadlock while
upgrading a read lock (the cause of upstream's "database is locked" 500s);
a busy database makes the second writer wait ``busy_timeout`` instead.

On PostgreSQL a read costs one round trip per statement and nothing
more. Reads run in autocommit: at READ COMMITTED (PostgreSQL's default,
and Berth's) every statement of a transaction takes its own snapshot, so
a transaction gives a read nothing but its ``BEGIN`` and ``COMMIT``, two
round trips. Pooled connections are not pinged on checkout (another round
trip): a transaction that finds its connection lost before it committed
runs again, once, on a new connection (``Database.run``), which is how a
server recovers by itself when its database returns. MariaDB/MySQL keep
both: PyMySQL's autocommit switch is a round trip of its own, and its
connections are pinged on checkout.

psycopg prepares a statement on the server after its fifth run on a
connection, and forgets every one of them at each ``ROLLBACK`` (it then
sends ``DEALLOCATE ALL``), in case the transaction created or dropped
what they name. Berth's transactions change no schema, and PostgreSQL
keeps prepared statements through a rollback, so its connections roll
back without forgetting (:func:`_rollback_keeping_prepared`): a 409 (a
generation conflict, rolled back) no longer costs the backend the next
five plannings of every statement. In a race of 16 schedulers, where a
few claims in a hundred are rolled back, keeping them brings the
backend's CPU per claim close to that of a race with no rollback
(bench/journal/2026-12-04.md, "The PostgreSQL claim race").
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from berth.db import changes, events, urls
from berth.db import connection as db_connection

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: How long an SQLite writer waits for the lock before giving up (ms).
SQLITE_BUSY_TIMEOUT_MS = 30000
#: Attempts at a transaction that hit a deadlock or serialization failure.
TX_ATTEMPTS = 8

# Error codes that mean "the same transaction may succeed if run again".
_MYSQL_RETRY = {1205, 1213}  # lock wait timeout, deadlock
_PG_RETRY = {"40001", "40P01"}  # serialization failure, deadlock
# Error codes that mean "the database server is not there to answer":
# can't connect, server gone away, lost connection, server shutting down,
# and Galera's "WSREP has not yet prepared node for application use" (a
# node cut off from the cluster's primary component).
_MYSQL_GONE = {1047, 1053, 2002, 2003, 2006, 2013, 2055, 4031}
# PostgreSQL: admin or crash shutdown, "cannot connect now".
_PG_GONE = {"57P01", "57P02", "57P03"}

#: Seconds a MariaDB/MySQL or PostgreSQL connection attempt may take, so
#: that a dead or partitioned node is a quick 503 rather than a hang.
CONNECT_TIMEOUT = 5
#: Seconds a MariaDB/MySQL socket read or write may block. Longer than
#: InnoDB's default lock wait (50 s), which answers 1205 (retried) first.
MYSQL_IO_TIMEOUT = 70


def create_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int = 50,
    pool_timeout: int = 30,
    recycle: int = 3600,
    echo: bool = False,
    sqlite_synchronous: bool = True,
    mysql_sql_mode: str | None = "TRADITIONAL",
) -> Engine:
    """Create an engine configured for Berth's transaction discipline.

    ``url`` may be any form upstream's configs use (``berth.db.urls``);
    what was changed to serve it is logged at debug level here, and once
    at start-up by the caller.
    """
    parsed, notes = urls.resolve(url)
    for note in notes:
        LOG.debug("%s", note)
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {"echo": echo, "future": True}
    if backend == "sqlite":
        kwargs["connect_args"] = {
            "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
            "check_same_thread": False,
        }
        if parsed.database in (None, "", ":memory:"):
            kwargs["poolclass"] = sa.pool.StaticPool
    else:
        kwargs.update(
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=pool_timeout,
            pool_recycle=recycle,
            # PostgreSQL: a lost connection is retried instead
            # (see the module's docstring).
            pool_pre_ping=backend != "postgresql",
        )
    if backend == "postgresql":
        kwargs.setdefault("connect_args", {})["connect_timeout"] = CONNECT_TIMEOUT
    if backend == "mysql":
        kwargs.setdefault("connect_args", {}).update(
            charset="utf8mb4",
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=MYSQL_IO_TIMEOUT,
            write_timeout=MYSQL_IO_TIMEOUT,
        )
        kwargs["isolation_level"] = "READ COMMITTED"
    engine = sa.create_engine(parsed, **kwargs)
    _time_statements(engine.dialect)
    if backend == "postgresql" and engine.dialect.driver == "psycopg":
        _rollback_keeping_prepared(engine)
    if backend == "sqlite":
        _setup_sqlite(engine, sqlite_synchronous)
    if backend == "mysql" and mysql_sql_mode:

        @event.listens_for(engine, "connect")
        def _mysql_mode(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("SET SESSION sql_mode = %s", (mysql_sql_mode,))
            cur.close()

    return engine


class Observer(Protocol):
    """Hears what the database layer does (metrics)."""

    def connections_in_use(self, count: int) -> None:
        """This process now has ``count`` connections checked out."""

    def transaction_retried(self) -> None:
        """A transaction failed transiently and is run again."""

    def sql_time(self, seconds: float, statements: int) -> None:
        """A transaction's ``statements`` took ``seconds`` in all, each
        from send to result (told once, as the transaction ends)."""


class _Tally:
    """A transaction's statements and their time, told to the observer
    once at its end: a metric's increment costs about a microsecond in
    prometheus-client's multiprocess mode (a lock, ``getpid``, a write to
    its file), two a statement were a few percent of a claim."""

    __slots__ = ("seconds", "statements")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.statements = 0

    def add(self, seconds: float) -> None:
        self.seconds += seconds
        self.statements += 1


#: Execution option holding the _Tally of the transaction that runs a
#: statement (when its Database has an observer).
_TALLY = db_connection.TALLY


def _time_statements(dialect: Any) -> None:
    """Time every statement the dialect sends, for the observer of the
    connection that sends it. Wrapping the dialect's execute methods costs
    about a microsecond a statement; SQLAlchemy's cursor events cost five
    (any listener moves every execution onto a slower path)."""
    for name in ("do_execute", "do_executemany", "do_execute_no_params"):
        setattr(dialect, name, _timed(getattr(dialect, name)))


def _timed(real: Callable[..., Any]) -> Callable[..., Any]:
    def timed(cursor: Any, statement: str, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return real(cursor, statement, *args)
        finally:
            context = args[-1] if args else None
            tally = context.execution_options.get(_TALLY) if context is not None else None
            if tally is not None:
                tally.add(time.perf_counter() - start)

    return timed


def _rollback_keeping_prepared(engine: Engine) -> None:
    """Make ``engine``'s psycopg connections roll back as psycopg does,
    less forgetting their prepared statements (see the module's
    docstring). Uses psycopg's private API (checked against 3.3.9):
    ``_rollback_gen``, ``_exec_command``, ``_num_transactions``, ``_tpc``,
    ``_pipeline``; ``tests/functional/test_db_pg_rollback.py`` pins it."""
    import psycopg
    from psycopg import pq

    class KeepingPrepared(psycopg.Connection[Any]):
        def rollback(self) -> None:
            with self.lock:
                self.wait(self._keeping_gen())

        def _keeping_gen(self) -> Any:
            if self._num_transactions or self._tpc or self._pipeline:
                # Not Berth's ways: psycopg's own rollback.
                return (yield from self._rollback_gen())
            if self.pgconn.transaction_status == pq.TransactionStatus.IDLE:
                return None
            return (yield from self._exec_command(b"ROLLBACK"))

    # The dialect's own method replaced, as _time_statements does: a
    # do_connect listener would mark the dialect as having events, which
    # moves every statement onto SQLAlchemy's slower path.
    def connect(*cargs: Any, **cparams: Any) -> Any:
        return KeepingPrepared.connect(*cargs, **cparams)

    engine.dialect.connect = connect  # type: ignore[method-assign]


def _setup_sqlite(engine: Engine, synchronous: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
        # Take transaction control away from pysqlite so BEGIN is ours.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=%d" % SQLITE_BUSY_TIMEOUT_MS)
        if engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode=WAL")
        if not synchronous:
            # In WAL mode NORMAL skips the fsync at each commit as OFF
            # does, but still syncs at checkpoints: a power loss may undo
            # the last commits, never corrupt the file (OFF could).
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        statement = "BEGIN %s" % options.get("sqlite_begin", "DEFERRED")
        # On the driver's connection: through exec_driver_sql this one
        # statement cost as much as a prebuilt SELECT (a third of an
        # empty transaction). Its errors (a lock not had within
        # busy_timeout) are wrapped as SQLAlchemy wraps them, so that
        # Database.run retries them, and it is timed as the dialect's
        # statements are (_time_statements).
        error = conn.dialect.loaded_dbapi.Error
        tally = options.get(_TALLY)
        start = time.perf_counter()
        try:
            driver = conn.connection.driver_connection
            assert driver is not None  # a connection in use has one
            driver.execute(statement)
        except error as exc:
            raise sa.exc.DBAPIError.instance(
                statement, None, exc, error, dialect=conn.dialect
            ) from exc
        finally:
            if tally is not None:
                tally.add(time.perf_counter() - start)


def _transient_code(exc: BaseException) -> str | None:
    """The code of ``exc`` when it alone says "run it again", else None."""
    if not isinstance(exc, sa.exc.DBAPIError) or exc.orig is None:
        return None
    orig = exc.orig
    # MySQL's own number first: PyMySQL also carries the SQLSTATE, and a
    # deadlock (1213) and a serialization failure share 40001.
    args: tuple[Any, ...] = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return str(args[0]) if args[0] in _MYSQL_RETRY else None
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code in _PG_RETRY:
        return str(code)
    msg = str(orig).lower()
    if "database is locked" in msg or "database table is locked" in msg:
        return "locked"
    return None


def error_code(exc: BaseException) -> str | None:
    """The code of the transient failure behind ``exc``, or None.

    Looks along the chain of exceptions raised while handling others:
    MariaDB and MySQL roll back the whole transaction on a deadlock (and
    Galera on a certification failure), so a deadlock inside a savepoint
    is followed by a failed ``ROLLBACK TO SAVEPOINT`` (1305). That error
    is what propagates, but the transaction is as retryable as the
    deadlock that caused it.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = _transient_code(current)
        if code is not None:
            return code
        current = current.__context__
    return None


def is_retryable(exc: BaseException) -> bool:
    """True for deadlocks, serialization failures and a busy SQLite file,
    also when they come wrapped in a later error (see :func:`error_code`)."""
    return error_code(exc) is not None


class Unavailable(Exception):
    """No connection to the database could be had (refused, timed out, or
    the pool is exhausted)."""


def is_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` says the database server cannot be reached, is
    shutting down or (Galera) has left the primary component: the client
    should get 503 and try again later."""
    if isinstance(exc, Unavailable):
        return True
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(code, str) and (code in _PG_GONE or code.startswith("08")):
        return True
    args: tuple[Any, ...] = getattr(orig, "args", ())
    return bool(args) and isinstance(args[0], int) and args[0] in _MYSQL_GONE


class RetryCounter:
    """How many transactions ``Database.run`` ran again, and why.

    ``by_code`` counts by the database's error code (``"1213"`` is a
    MariaDB/MySQL deadlock *or* a Galera certification failure,
    ``"40001"`` a PostgreSQL serialization failure, ``"locked"`` a busy
    SQLite file). Code that exports metrics reads the counts, or adds a
    listener, called with the code on every retry.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.by_code: dict[str, int] = {}
        self.listeners: list[Callable[[str], None]] = []

    def add(self, code: str) -> None:
        with self._lock:
            self.total += 1
            self.by_code[code] = self.by_code.get(code, 0) + 1
        for listener in self.listeners:
            listener(code)


class Database:
    """An engine plus the transaction helpers the domain code uses."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend = engine.url.get_backend_name()
        self.retries = RetryCounter()
        #: told of connections, retries and SQL time (engines made by
        #: ``create_engine`` report SQL time)
        self.observer: Observer | None = None
        self._in_use = 0
        #: How long (seconds) the change feed keeps its events.
        self.event_retention = events.DEFAULT_RETENTION
        #: execution options of a write and of a read transaction
        self._options: dict[bool, dict[str, Any]] = {True: {}, False: {}}
        if self.backend == "sqlite":
            self._options = {
                True: {"sqlite_begin": "IMMEDIATE"},
                False: {"sqlite_begin": "DEFERRED"},
            }
        elif (
            self.backend == "postgresql" and "isolation_level" not in engine.get_execution_options()
        ):
            # At READ COMMITTED (an engine set to a stricter level keeps
            # its transactions): see the module's docstring.
            self._options[False] = {"isolation_level": "AUTOCOMMIT"}

    @contextmanager
    def _tx(self, write: bool) -> Iterator[Connection]:
        try:
            # SQLAlchemy's Connection, whose execute sizes IN lists
            # (berth.db.connection), made as Engine.connect makes one.
            connection = db_connection.ThinConnection(self.engine)
        except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
            raise Unavailable(str(getattr(exc, "orig", exc))) from exc
        with connection as conn:
            observer = self.observer
            options = self._options[write]
            tally = None
            if observer is not None:
                tally = _Tally()
                options = {**options, _TALLY: tally}
                self._in_use += 1
                observer.connections_in_use(self._in_use)
            try:
                if options:
                    conn = conn.execution_options(**options)
                with conn.begin():
                    yield conn
            finally:
                if observer is not None:
                    self._in_use -= 1
                    observer.connections_in_use(self._in_use)
                    if tally is not None and tally.statements:
                        observer.sql_time(tally.seconds, tally.statements)

    def run(self, fn: Callable[[Connection], T], *, write: bool = True) -> T:
        """Run ``fn(conn)`` in one transaction, retrying transient failures.

        Deadlocks, serialization failures and lock time-outs are retried
        with a short jittered back-off, and a transaction whose connection
        was lost before it committed runs again at once, once, on a new
        connection; any other error propagates and the transaction is
        rolled back, so a failed request changes nothing. What a write
        noted (``berth.db.changes``) is flushed last, in the same
        transaction. Raises :class:`Unavailable` when no connection can
        be had.
        """
        reconnected = False
        for attempt in range(TX_ATTEMPTS):
            committing = False
            try:
                with self._tx(write) as conn:
                    changes.discard(conn)
                    result = fn(conn)
                    if write:
                        changes.flush(conn, self.event_retention)
                    committing = True
                return result
            except sa.exc.DBAPIError as exc:
                if exc.connection_invalidated and not committing and not reconnected:
                    # Nothing was committed (the server rolls back what a
                    # lost connection left open), so running it again
                    # cannot apply it twice.
                    reconnected = True
                    LOG.info(
                        "database connection lost; running the transaction again on a new one: %s",
                        exc.orig,
                    )
                    continue
                code = error_code(exc)
                if code is None or attempt == TX_ATTEMPTS - 1:
                    raise
                self.retries.add(code)
                if self.observer is not None:
                    self.observer.transaction_retried()
                LOG.debug(
                    "retrying transaction (attempt %d, code %s): %s", attempt + 2, code, exc.orig
                )
                time.sleep(random.uniform(0.005, 0.02) * (2**attempt))
        raise AssertionError("unreachable")

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run a read-only ``fn(conn)`` (it must not write): in one
        transaction on SQLite (one snapshot) and MariaDB/MySQL; on
        PostgreSQL in autocommit, each statement seeing what was committed
        before it began, as each statement of a READ COMMITTED
        transaction does."""
        return self.run(fn, write=False)

    def dispose(self) -> None:
        self.engine.dispose()
