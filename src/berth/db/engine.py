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
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from berth.db import changes, urls

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
    if backend == "sqlite":
        _setup_sqlite(engine, sqlite_synchronous)
    if backend == "mysql" and mysql_sql_mode:
        @event.listens_for(engine, "connect")
        def _mysql_mode(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("SET SESSION sql_mode = %s", (mysql_sql_mode,))
            cur.close()
    return engine


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

    @contextmanager
    def _tx(self, write: bool) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if self.backend == "sqlite":
                conn = conn.execution_options(
                    sqlite_begin="IMMEDIATE" if write else "DEFERRED")
            with conn.begin():
                yield conn

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
                LOG.debug("retrying transaction after %s", exc.orig)
                time.sleep(random.uniform(0.005, 0.02) * (2 ** attempt))
        raise AssertionError("unreachable")

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run a read-only ``fn(conn)`` in one consistent transaction."""
        return self.run(fn, write=False)

    def dispose(self) -> None:
        self.engine.dispose()
