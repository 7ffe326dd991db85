"""Driver SQL runs thin from its second run
(``berth.db.connection``): no execution context, the same rows, keys,
errors, listeners and reconnection as SQLAlchemy's ``exec_driver_sql``,
on every backend; a write (no rows) runs thin from its second run too,
giving its row count; lists of parameter sets keep SQLAlchemy's path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import changes
from berth.db import connection as db_connection
from berth.db import thin as db_thin
from berth.db.engine import Database
from support.thin_probe import (
    NEEDS_THIN,
    PROBE,
    driver_texts,
    losing_the_first,
    outcome,
)

pytestmark = [NEEDS_THIN, pytest.mark.usefixtures("no_texts")]

ALL = "SELECT id, name, note FROM %s ORDER BY id" % PROBE.name


def _by_id(db: Database, low: int) -> tuple[str, tuple[int, ...]]:
    """A statement of one positional parameter, in the driver's style."""
    mark = db.read(changes.placeholder)
    return ("SELECT id, name FROM %s WHERE id >= %s ORDER BY id" % (PROBE.name, mark), (low,))


FORMS: dict[str, Callable[[Any], Any]] = {
    "all": lambda r: r.all(),
    "first": lambda r: r.first(),
    "scalar": lambda r: r.scalar(),
    "scalars": lambda r: r.scalars().all(),
    "mappings": lambda r: [dict(m) for m in r.mappings()],
    "iteration": lambda r: [tuple(row) for row in r],
    "by_name": lambda r: [(row.id, row.name) for row in r],
    "keys": lambda r: list(r.keys()),
    "types": lambda r: [[type(value) for value in row] for row in r],
}


def test_driver_sql_runs_thin_from_its_second_run(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    results = [
        db.read(lambda conn: (lambda r: (type(r), r.all()))(conn.exec_driver_sql(ALL)))
        for _ in range(4)
    ]
    assert text_contexts == [ALL]  # SQLAlchemy's context for the first run only
    assert [issubclass(kind, sa.CursorResult) for kind, _ in results] == [True, False, False, False]
    assert [rows for _, rows in results] == [results[0][1]] * 4
    assert [tuple(row) for row in results[0][1]] == [
        (1, "one", None),
        (2, "two", "n"),
        (3, "three", None),
    ]


@pytest.mark.parametrize("low", [1, 3, 99])  # three rows, one, none
@pytest.mark.parametrize("form", sorted(FORMS))
def test_results_are_the_normal_paths(
    db: Database, probe: sa.Table, text_contexts: list[str], form: str, low: int
) -> None:
    sql, params = _by_id(db, low)
    db.read(lambda conn: conn.exec_driver_sql(sql, params).all())
    del text_contexts[:]
    thin = outcome(lambda: db.read(lambda conn: FORMS[form](conn.exec_driver_sql(sql, params))))
    assert text_contexts == []
    # The same string run SQLAlchemy's way (forgotten, as a new one is).
    del driver_texts(db)[sql]
    normal = outcome(lambda: db.read(lambda conn: FORMS[form](conn.exec_driver_sql(sql, params))))
    assert text_contexts == [sql]
    assert thin == normal


def test_a_dict_of_parameters_runs_thin(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    mark = ":low" if db.engine.dialect.paramstyle == "qmark" else "%(low)s"
    sql = "SELECT name FROM %s WHERE id = %s" % (PROBE.name, mark)
    got = [db.read(lambda conn: conn.exec_driver_sql(sql, {"low": 2}).scalar()) for _ in range(3)]
    assert got == ["two"] * 3
    assert text_contexts == [sql]


def test_cursor_listeners_see_every_thin_statement(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    sql, params = _by_id(db, 2)
    seen: list[tuple[str, str, Any, bool]] = []

    def before(
        conn: Any, cursor: Any, statement: str, sent: Any, context: Any, executemany: bool
    ) -> None:
        assert isinstance(conn, db_connection.ThinConnection)
        seen.append(("before", statement, sent, executemany))

    def after(
        conn: Any, cursor: Any, statement: str, sent: Any, context: Any, executemany: bool
    ) -> None:
        seen.append(("after", statement, sent, executemany))

    sa.event.listen(db.engine, "before_cursor_execute", before)
    sa.event.listen(db.engine, "after_cursor_execute", after)
    try:
        rows = db.read(lambda conn: [conn.exec_driver_sql(sql, params).all() for _ in range(4)])
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", before)
        sa.event.remove(db.engine, "after_cursor_execute", after)
    assert text_contexts == [sql]  # three of the four ran thin
    assert rows == [rows[0]] * 4 and len(rows[0]) == 2
    assert [s[0] for s in seen] == ["before", "after"] * 4
    assert {s[1] for s in seen} == {sql}
    assert not any(s[3] for s in seen)
    # The parameters the driver got, as SQLAlchemy sends them.
    assert {repr(s[2]) for s in seen} == {repr(seen[0][2])}


def test_no_parameters_reach_the_driver_as_sqlalchemy_sends_them(
    db: Database, probe: sa.Table
) -> None:
    sent: list[Any] = []

    def before(conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
        sent.append(params)

    sa.event.listen(db.engine, "before_cursor_execute", before)
    try:
        for params in (None, (), None):
            db.read(lambda conn, p=params: conn.exec_driver_sql(ALL, p).all())
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", before)
    empty = () if db.engine.dialect.positional else {}
    assert sent == [empty] * 3


def test_an_error_is_wrapped_as_on_the_normal_path(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    db.read(lambda conn: conn.exec_driver_sql(ALL).all())
    PROBE.drop(db.engine)
    del text_contexts[:]
    thin = outcome(lambda: db.read(lambda conn: conn.exec_driver_sql(ALL).all()))
    assert text_contexts == []
    del driver_texts(db)[ALL]
    normal = outcome(lambda: db.read(lambda conn: conn.exec_driver_sql(ALL).all()))
    assert thin == normal
    assert thin[0] == "raised" and issubclass(thin[1], sa.exc.DBAPIError)


def test_database_run_runs_again_after_a_lost_connection(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    db.read(lambda conn: conn.exec_driver_sql(ALL).all())
    del text_contexts[:]
    rows, attempts = losing_the_first(db, lambda conn: conn.exec_driver_sql(ALL).all())
    assert [row.name for row in rows] == ["one", "two", "three"]
    assert attempts == 2
    assert text_contexts == []  # both attempts ran thin


def test_a_write_runs_thin_from_its_second_run_with_its_row_count(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    mark = db.read(changes.placeholder)
    update = "UPDATE %s SET note = %s WHERE id >= %s" % (PROBE.name, mark, mark)
    results = [
        db.run(lambda conn, low=low: conn.exec_driver_sql(update, ("x%d" % low, low)))
        for low in (3, 2, 9, 1)
    ]
    assert text_contexts == [update]  # SQLAlchemy's context for the first run only
    assert driver_texts(db)[update] == ()
    assert isinstance(results[0], sa.CursorResult)
    assert [type(r) for r in results[1:]] == [db_thin.Written] * 3
    assert [r.rowcount for r in results] == [1, 2, 0, 3]
    assert not any(r.returns_rows for r in results)
    assert db.read(
        lambda conn: (
            conn.exec_driver_sql("SELECT note FROM %s ORDER BY id" % PROBE.name).scalars().all()
        )
    ) == ["x1", "x1", "x1"]


def test_a_failed_write_is_wrapped_and_rolled_back_as_on_the_normal_path(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    mark = db.read(changes.placeholder)
    insert = "INSERT INTO %s (id, name) VALUES (%s, %s)" % (PROBE.name, mark, mark)
    db.run(lambda conn: conn.exec_driver_sql(insert, (10, "ten")))
    del text_contexts[:]

    def twice(conn: Any) -> None:
        conn.exec_driver_sql(insert, (11, "eleven"))
        conn.exec_driver_sql(insert, (2, "a taken id"))

    thin = outcome(lambda: db.run(twice))
    assert text_contexts == []
    del driver_texts(db)[insert]
    normal = outcome(lambda: db.run(lambda conn: conn.exec_driver_sql(insert, (2, "taken"))))
    assert text_contexts == [insert]
    assert thin == normal
    assert thin[0] == "raised" and issubclass(thin[1], sa.exc.IntegrityError)
    assert db.read(
        lambda conn: (
            conn.exec_driver_sql("SELECT id FROM %s ORDER BY id" % PROBE.name).scalars().all()
        )
    ) == [1, 2, 3, 10]


def test_parameter_sets_and_options_keep_sqlalchemys_path(
    db: Database, probe: sa.Table, text_contexts: list[str]
) -> None:
    mark = db.read(changes.placeholder)
    update = "UPDATE %s SET note = %s WHERE id = %s" % (PROBE.name, mark, mark)
    notes = "SELECT note FROM %s ORDER BY id" % PROBE.name
    before = db.read(lambda conn: conn.exec_driver_sql(notes).scalars().all())
    del text_contexts[:]
    for _ in range(3):
        db.run(lambda conn: conn.exec_driver_sql(update, [("y", 1), ("y", 3)]))
    assert text_contexts == [update] * 3
    assert db.read(lambda conn: conn.exec_driver_sql(notes).scalars().all()) == [
        "y",
        before[1],
        "y",
    ]
    del text_contexts[:]
    for _ in range(3):
        db.read(lambda conn: conn.exec_driver_sql(ALL, execution_options={"berth_probe": 1}).all())
    assert text_contexts == [ALL] * 3


def test_strings_kept_are_bounded(
    db: Database, probe: sa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_connection, "TEXTS_MAX", len(driver_texts(db)) + 2)
    for n in range(5):
        sql = "SELECT id FROM %s WHERE id > %d" % (PROBE.name, n)
        for _ in range(2):
            db.read(lambda conn, s=sql: conn.exec_driver_sql(s).all())
    kept = [s for s in driver_texts(db) if "WHERE id >" in s]
    assert len(kept) == 2
