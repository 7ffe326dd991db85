"""Engine set-up and the one place where transactions are run and retried.

SQLite runs in WAL mode with foreign keys on, and every write transaction
starts with ``BEGIN IMMEDIATE`` so that two writers never deadlock while
upgrading a read lock (the cause of upstream's "database is locked" 500s);
a busy database makes the second writer wait ``busy_timeout`` instead.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from berth.db import changes

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: How long an SQLite writer waits for the lock before giving up (ms).
SQLITE_BUSY_TIMEOUT_MS = 30000
#: Attempts at a transaction that hit a deadlock or serialization failure.
TX_ATTEMPTS = 8

# Error codes that mean "the same transaction may succeed if run again".
_MYSQL_RETRY = {1205, 1213}  # lock wait timeout, deadlock
_PG_RETRY = {"40001", "40P01"}  # serialization failure, deadlock


def create_engine(url: str, *, pool_size: int = 5, max_overflow: int = 50,
                  pool_timeout: int = 30, recycle: int = 3600,
                  echo: bool = False, sqlite_synchronous: bool = True,
                  mysql_sql_mode: str | None = "TRADITIONAL") -> Engine:
    """Create an engine configured for Berth's transaction discipline."""
    parsed = sa.engine.make_url(url)
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {"echo": echo, "future": True}
    if backend == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if backend == "mysql" and parsed.drivername == "mysql":
        parsed = parsed.set(drivername="mysql+pymysql")
    if backend == "sqlite":
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
                                  "check_same_thread": False}
        if parsed.database in (None, "", ":memory:"):
            kwargs["poolclass"] = sa.pool.StaticPool
    else:
        kwargs.update(pool_size=pool_size, max_overflow=max_overflow,
                      pool_timeout=pool_timeout, pool_recycle=recycle,
                      pool_pre_ping=True)
    if backend == "mysql":
        kwargs.setdefault("connect_args", {})["charset"] = "utf8mb4"
        kwargs["isolation_level"] = "READ COMMITTED"
    engine = sa.create_engine(parsed, **kwargs)
    _time_statements(engine.dialect)
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

    def sql_time(self, seconds: float) -> None:
        """One statement took ``seconds``, from send to result."""


#: Execution option naming the Observer of the Database whose transaction
#: runs a statement.
_OBSERVER = "berth_observer"


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
            observer = (context.execution_options.get(_OBSERVER)
                        if context is not None else None)
            if observer is not None:
                observer.sql_time(time.perf_counter() - start)
    return timed


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
            cur.execute("PRAGMA synchronous=OFF")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql("BEGIN %s" % mode)


def is_retryable(exc: BaseException) -> bool:
    """True for deadlocks, serialization failures and a busy SQLite file."""
    if not isinstance(exc, sa.exc.DBAPIError) or exc.orig is None:
        return False
    orig = exc.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code in _PG_RETRY:
        return True
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _MYSQL_RETRY:
        return True
    msg = str(orig).lower()
    return "database is locked" in msg or "database table is locked" in msg


class Database:
    """An engine plus the transaction helpers the domain code uses."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend = engine.url.get_backend_name()
        #: told of connections, retries and SQL time (engines made by
        #: ``create_engine`` report SQL time)
        self.observer: Observer | None = None
        self._in_use = 0

    @contextmanager
    def _tx(self, write: bool) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            observer = self.observer
            if observer is not None:
                conn = conn.execution_options(berth_observer=observer)
                self._in_use += 1
                observer.connections_in_use(self._in_use)
            try:
                if self.backend == "sqlite":
                    conn = conn.execution_options(
                        sqlite_begin="IMMEDIATE" if write else "DEFERRED")
                with conn.begin():
                    yield conn
            finally:
                if observer is not None:
                    self._in_use -= 1
                    observer.connections_in_use(self._in_use)

    def run(self, fn: Callable[[Connection], T], *, write: bool = True) -> T:
        """Run ``fn(conn)`` in one transaction, retrying transient failures.

        Deadlocks, serialization failures and lock time-outs are retried
        with a short jittered back-off; any other error propagates and the
        transaction is rolled back, so a failed request changes nothing.
        What a write noted (``berth.db.changes``) is flushed last, in the
        same transaction.
        """
        for attempt in range(TX_ATTEMPTS):
            try:
                with self._tx(write) as conn:
                    changes.discard(conn)
                    result = fn(conn)
                    if write:
                        changes.flush(conn)
                    return result
            except sa.exc.DBAPIError as exc:
                if not is_retryable(exc) or attempt == TX_ATTEMPTS - 1:
                    raise
                if self.observer is not None:
                    self.observer.transaction_retried()
                LOG.debug("retrying transaction after %s", exc.orig)
                time.sleep(random.uniform(0.005, 0.02) * (2 ** attempt))
        raise AssertionError("unreachable")

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run a read-only ``fn(conn)`` in one consistent transaction."""
        return self.run(fn, write=False)

    def dispose(self) -> None:
        self.engine.dispose()
