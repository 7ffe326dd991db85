"""The text of a few rows at once (``berth.db.connection._rows_text``), on
PostgreSQL's dialect (no database): each row's parameters renamed, and
None for a row that needs SQLAlchemy's path; on SQLite's, the row
repeated and its parameters sent in order, each through its bind
processor."""

from __future__ import annotations

import datetime as dt
import re

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from berth.db import connection as db_connection

META = sa.MetaData()
TABLE = sa.Table(
    "rows_text",
    META,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(20), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False, default=0),
    sa.Column("on", sa.Boolean, nullable=True),
    sa.Column("at", sa.DateTime, nullable=True),
)
DIALECT = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]


def _text(statement: sa.Insert, keys: list[str], count: int) -> str | None:
    found = db_connection._rows_text(DIALECT, statement, tuple(sorted(keys)), count)
    if found is None:
        return None
    assert found[1] is None  # named parameters
    return found[0]


def test_each_row_has_its_own_parameters() -> None:
    text = _text(TABLE.insert(), ["name", "generation", "at"], 3)
    assert text is not None
    head, _, rows = text.partition(" VALUES ")
    assert head == "INSERT INTO rows_text (name, generation, at)"
    assert re.findall(r"%\(([^)]+)\)s", rows) == [
        "%s__%d" % (key, i) for i in range(3) for key in ("name", "generation", "at")
    ]
    assert rows.count("), (") == 2


def test_rows_that_need_sqlalchemys_path_get_none() -> None:
    # generation left out: SQLAlchemy fills its default in, row by row
    assert _text(TABLE.insert(), ["name"], 2) is None
    # a Boolean: psycopg's dialect converts it (a bind processor)
    assert _text(TABLE.insert(), ["name", "generation", "on"], 2) is None
    # RETURNING: the rows' results are SQLAlchemy's to give
    assert _text(TABLE.insert().returning(TABLE.c.id), ["name", "generation"], 2) is None
    # a column name SQLAlchemy must escape in a parameter's name
    odd = sa.Table("odd", sa.MetaData(), sa.Column("a b", sa.Integer), sa.Column("c", sa.Integer))
    assert _text(odd.insert(), ["a b", "c"], 2) is None
    # a literal percent sign in the row's text
    literal = TABLE.insert().values(name=sa.literal_column("'100%%'"))
    assert _text(literal, ["generation"], 2) is None


def test_sqlite_rows_are_positional_and_processed() -> None:
    dialect = sqlite.pysqlite.dialect()  # type: ignore[no-untyped-call]
    keys = ("at", "generation", "name", "on")
    found = db_connection._rows_text(dialect, TABLE.insert(), keys, 2)
    assert found is not None
    text, order = found
    assert text == (
        'INSERT INTO rows_text (name, generation, "on", at) VALUES (?, ?, ?, ?), (?, ?, ?, ?)'
    )
    assert order is not None and [key for key, _ in order] == ["name", "generation", "on", "at"]
    at = dt.datetime(2026, 12, 7, 14, 10, 5, 123)
    rows = [
        {"name": "a", "generation": 1, "on": True, "at": at},
        {"name": "b", "generation": 2, "on": None, "at": None},
    ]
    sent = db_connection._rows_at_once(dialect, TABLE.insert(), rows)
    assert sent == (text, ("a", 1, 1, "2026-12-07 14:10:05.000123", "b", 2, None, None))
