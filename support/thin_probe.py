"""Probe tables for the tests of ``berth.db.connection``'s thin path
(test_db_connection*.py): a table of every value type SQLAlchemy's result
processors shape, the statement the tests run on it, every way of reading
a result (``FORMS``), and spies on the execution contexts SQLAlchemy
builds; and the small table of test_db_pg_rollback.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import connection as db_connection
from berth.db.engine import Database

#: These tests pin the shortcuts, which run only on a SQLAlchemy release
#: they were checked against; on another, test_db_connection_fallback.py
#: pins the public way every statement takes instead.
NEEDS_THIN = pytest.mark.skipif(
    not db_connection.THIN,
    reason="SQLAlchemy %s is not a release berth.db.connection's shortcuts "
    "were checked against (VERIFIED): they are off, and every statement "
    "runs SQLAlchemy's public way (test_db_connection_fallback.py)" % sa.__version__,
)


META = sa.MetaData()


# A table of this test's own, with the types whose values the database
# and SQLAlchemy's result processors shape (and NULLs of each).
PROBE = sa.Table(
    "berth_thin_probe",
    META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(50), nullable=False),
    sa.Column("flag", sa.Boolean, nullable=True),
    sa.Column("amount", sa.Numeric(10, 2), nullable=True),
    sa.Column("ratio", sa.Float, nullable=True),
    sa.Column("at", sa.DateTime, nullable=True),
    sa.Column("note", sa.String(50), nullable=True),
)


ROWS = [
    {
        "id": 1,
        "name": "one",
        "flag": True,
        "amount": decimal.Decimal("1.50"),
        "ratio": 1.5,
        "at": dt.datetime(2026, 12, 4, 1, 2, 3),
        "note": None,
    },
    {
        "id": 2,
        "name": "two",
        "flag": False,
        "amount": decimal.Decimal("0.00"),
        "ratio": 16.0,
        "at": dt.datetime(2000, 1, 1),
        "note": "n",
    },
    {
        "id": 3,
        "name": "three",
        "flag": None,
        "amount": None,
        "ratio": None,
        "at": None,
        "note": None,
    },
]


def probe_select() -> sa.Select[Any]:
    """The statement the tests run; built once per test and reused, as a
    module's prebuilt statement is (or per call, for the normal path: a
    statement's first run is always SQLAlchemy's)."""
    return (
        sa.select(
            PROBE.c.id,
            PROBE.c.name,
            PROBE.c.flag,
            PROBE.c.amount,
            PROBE.c.ratio,
            PROBE.c.at,
            PROBE.c.note,
            (PROBE.c.id * 2).label("twice"),
        )
        .where(PROBE.c.id >= sa.bindparam("low"))
        .order_by(PROBE.c.id)
    )


def spy_contexts(
    db: Database, monkeypatch: pytest.MonkeyPatch, hook: str, position: int
) -> list[Any]:
    """What SQLAlchemy builds an execution context for, from now on
    (what a thin run does without): argument ``position`` of each call
    of the context class's constructor ``hook``."""
    seen: list[Any] = []
    base: Any = db.engine.dialect.execution_ctx_cls

    def spied(cls: Any, *args: Any, **kw: Any) -> Any:
        seen.append(args[position])
        return getattr(super(Spy, cls), hook)(*args, **kw)

    Spy = type("Spy", (base,), {hook: classmethod(spied)})
    monkeypatch.setattr(db.engine.dialect, "execution_ctx_cls", Spy)
    return seen


def outcome(fn: Callable[[], Any]) -> tuple[Any, ...]:
    """What ``fn`` returned, or the classes of what it raised."""
    try:
        return ("returned", fn())
    except Exception as exc:  # compared, not swallowed
        return ("raised", type(exc), type(getattr(exc, "orig", None)))


FORMS: dict[str, Callable[[Any], Any]] = {
    "all": lambda r: r.all(),
    "first": lambda r: r.first(),
    "one": lambda r: r.one(),
    "one_or_none": lambda r: r.one_or_none(),
    "scalar": lambda r: r.scalar(),
    "scalar_one": lambda r: r.scalar_one(),
    "scalars": lambda r: r.scalars().all(),
    "scalars_of_a_column": lambda r: r.scalars(5).all(),
    "mappings": lambda r: [dict(m) for m in r.mappings()],
    "iteration": lambda r: [tuple(row) for row in r],
    "by_name": lambda r: [
        (row.name, row.twice, row.at, row._mapping["flag"], row._mapping[PROBE.c.amount])
        for row in r
    ],
    "keys": lambda r: list(r.keys()),
    "types": lambda r: [[type(value) for value in row] for row in r],
}


def losing_the_first(db: Database, run: Callable[[Any], Any]) -> tuple[Any, int]:
    """What ``run(conn)`` in ``db.read`` returned, its first attempt's
    connection closed under it, and how many attempts it took."""
    attempts: list[int] = []

    def lose_the_first(conn: Any) -> Any:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            conn.connection.driver_connection.close()
        return run(conn)

    return db.read(lose_the_first), len(attempts)


def driver_texts(db: Database) -> dict[str, Any]:
    return getattr(db.engine.dialect, db_connection._TEXTS, {})


#: test_db_pg_rollback.py's table: psycopg's prepared statements after a
#: rollback.
ROLLBACK_META = sa.MetaData()


ROLLBACK_PROBE = sa.Table(
    "berth_pg_rollback_probe",
    ROLLBACK_META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(50), nullable=False),
)


ROLLBACK_INSERT = ROLLBACK_PROBE.insert()
