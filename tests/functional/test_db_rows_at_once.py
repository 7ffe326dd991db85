"""An ``executemany`` INSERT of a few rows (``berth.db.connection``, "A
few rows at once"): on PostgreSQL and SQLite one statement of as many
rows, past ``ROWS_AT_ONCE`` rows or where a row needs SQLAlchemy's path
(on PostgreSQL, a bind processor) an ``executemany`` as before, and on
MariaDB always the ``executemany``. The same rows land either way, and
errors are SQLAlchemy's."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import connection as db_connection
from berth.db.engine import Database
from support.statements import sent
from support.thin_probe import NEEDS_THIN, PROBE

pytestmark = NEEDS_THIN

AT_ONCE = db_connection.ROWS_AT_ONCE


def _rows(first: int, count: int, **more: Any) -> list[dict[str, Any]]:
    """``count`` probe rows from id ``first`` (no ``flag``: a Boolean has
    a bind processor on PostgreSQL)."""
    return [
        {
            "id": first + i,
            "name": "row %d" % i,
            "amount": decimal.Decimal(i) / 4,
            "ratio": i / 2,
            "at": dt.datetime(2026, 12, 6, i % 24, i % 60),
            "note": None if i % 2 else "note %d" % i,
            **more,
        }
        for i in range(count)
    ]


def _insert(db: Database, rows: list[dict[str, Any]]) -> list[str]:
    """Insert ``rows`` in one ``execute``: the INSERT statements sent."""
    with sent(db, lambda st: st.lstrip().startswith("INSERT INTO %s" % PROBE.name)) as found:
        db.run(lambda conn: conn.execute(PROBE.insert(), rows))
    return found


def _tuples(statement: str) -> int:
    """How many rows of values ``statement`` carries."""
    return statement.partition(" VALUES ")[2].count("), (") + 1


def _stored(db: Database, ids: list[int]) -> list[dict[str, Any]]:
    columns = [PROBE.c[name] for name in ("id", "name", "amount", "ratio", "at", "note")]
    query = sa.select(*columns).where(PROBE.c.id.in_(ids)).order_by(PROBE.c.id)
    return [dict(row._mapping) for row in db.read(lambda conn: conn.execute(query).all())]


@pytest.mark.parametrize("count", [1, 2, AT_ONCE, AT_ONCE + 1])
def test_few_rows_are_one_statement_but_on_mariadb(
    db: Database, probe: sa.Table, count: int
) -> None:
    rows = _rows(100, count)
    [statement] = _insert(db, rows)
    at_once = db.backend in ("postgresql", "sqlite") and count <= AT_ONCE
    assert _tuples(statement) == (count if at_once else 1)
    assert _stored(db, [r["id"] for r in rows]) == rows


def test_a_row_with_a_bind_processor_is_one_statement_on_sqlite_only(
    db: Database, probe: sa.Table
) -> None:
    rows = _rows(200, 3, flag=True)
    [statement] = _insert(db, rows)
    assert _tuples(statement) == (3 if db.backend == "sqlite" else 1)
    assert _stored(db, [r["id"] for r in rows]) == [
        {k: v for k, v in r.items() if k != "flag"} for r in rows
    ]
    flags = db.read(
        lambda conn: conn.execute(sa.select(PROBE.c.flag).where(PROBE.c.id >= 200)).scalars().all()
    )
    assert flags == [True, True, True]


def test_rows_of_other_keys_get_sqlalchemys_error(db: Database, probe: sa.Table) -> None:
    rows = _rows(300, 2)
    del rows[1]["note"]
    with pytest.raises(sa.exc.StatementError, match="note"):
        _insert(db, rows)
    assert _stored(db, [300, 301]) == []


def test_a_duplicate_row_is_an_integrity_error_and_nothing_lands(
    db: Database, probe: sa.Table
) -> None:
    rows = _rows(400, 3)
    rows[2]["id"] = 1  # the probe's first row
    with pytest.raises(sa.exc.IntegrityError):
        _insert(db, rows)
    assert _stored(db, [400, 401]) == []
