"""The connection ``Database.run`` hands out sizes the IN lists of the
statements it runs (``berth.db.connection``), on every backend."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from berth.db import connection as db_connection
from berth.db import tables as t
from berth.db.engine import Database
from support.thin_probe import NEEDS_THIN

TR = t.traits
# Prebuilt, as the domain's statements are: an IN list as an expanding
# parameter, beside a plain one.
BY_NAMES = (
    sa.select(TR.c.name)
    .where(TR.c.name.in_(sa.bindparam("names", expanding=True)), TR.c.name != sa.bindparam("b_not"))
    .order_by(TR.c.name)
)


def _run(db: Database, names: list[str]) -> tuple[list[str], list[str]]:
    """The names found, and the compiled text of what was sent."""
    sent: list[str] = []

    def listen(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
    ) -> None:
        if context.compiled is not None:
            sent.append(context.compiled.string)

    sa.event.listen(db.engine, "before_cursor_execute", listen)
    try:
        found = db.read(
            lambda conn: list(conn.execute(BY_NAMES, {"names": names, "b_not": "NONE"}).scalars())
        )
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", listen)
    return found, [s for s in sent if "traits" in s]


def test_the_connection_is_berths(db: Database) -> None:
    assert isinstance(db.read(lambda conn: conn), db_connection.ThinConnection)


@NEEDS_THIN
@pytest.mark.parametrize("count", [1, 3, db_connection.SIZED_LIST_MAX])
def test_a_short_list_runs_as_plain_parameters(db: Database, count: int) -> None:
    names = sorted(
        db.read(
            lambda conn: list(
                conn.execute(sa.select(TR.c.name).order_by(TR.c.name).limit(count)).scalars()
            )
        )
    )
    assert len(names) == count
    found, sent = _run(db, names)
    assert found == names
    assert len(sent) == 1 and "POSTCOMPILE" not in sent[0]


@pytest.mark.parametrize("count", [0, db_connection.SIZED_LIST_MAX + 1])
def test_an_empty_or_long_list_stays_expanding(db: Database, count: int) -> None:
    names = (
        sorted(
            db.read(
                lambda conn: list(
                    conn.execute(sa.select(TR.c.name).order_by(TR.c.name).limit(count)).scalars()
                )
            )
        )
        if count
        else []
    )
    assert len(names) == count
    found, sent = _run(db, names)
    assert found == names
    assert len(sent) == 1 and "POSTCOMPILE" in sent[0]


def test_sized_statements_are_built_once_per_length() -> None:
    params = {"names": ["A", "B"], "b_not": "C"}
    one, flat = db_connection.sized(BY_NAMES, params)
    two, _ = db_connection.sized(BY_NAMES, {**params, "names": ["D", "E"]})
    assert one is two and one is not BY_NAMES
    assert flat == {"names_0": "A", "names_1": "B", "b_not": "C"}
    assert params == {"names": ["A", "B"], "b_not": "C"}  # not changed


def test_a_list_for_a_parameter_that_is_not_expanding_is_left_alone() -> None:
    # An array parameter (PostgreSQL's unnest of a list) is not an IN list.
    stmt = sa.select(sa.func.unnest(sa.bindparam("ids", type_=postgresql.ARRAY(sa.Integer))))
    params = {"ids": [1, 2, 3]}
    assert db_connection.sized(stmt, params) == (stmt, params)
    text = sa.text("SELECT :ids")
    assert db_connection.sized(text, params) == (text, params)


@NEEDS_THIN
def test_scalar_and_scalars_size_lists_too(db: Database) -> None:
    count = (
        sa.select(sa.func.count())
        .select_from(TR)
        .where(TR.c.name.in_(sa.bindparam("names", expanding=True)))
    )
    names = db.read(
        lambda conn: list(conn.scalars(sa.select(TR.c.name).order_by(TR.c.name).limit(2)))
    )
    sent: list[str] = []

    def listen(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
    ) -> None:
        if context.compiled is not None and "traits" in statement:
            sent.append(context.compiled.string)

    sa.event.listen(db.engine, "before_cursor_execute", listen)
    try:
        assert db.read(lambda conn: conn.scalar(count, {"names": names})) == 2
        assert db.read(
            lambda conn: list(conn.scalars(BY_NAMES, {"names": names, "b_not": "NONE"}))
        ) == sorted(names)
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", listen)
    assert len(sent) == 2 and not any("POSTCOMPILE" in s for s in sent)
