"""The text of a few rows at once (``berth.db.connection._rows_text``), on
PostgreSQL's dialect (no database): each row's parameters renamed, and
None for a row that needs SQLAlchemy's path."""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

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
    return db_connection._rows_text(DIALECT, statement, tuple(sorted(keys)), count)


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
