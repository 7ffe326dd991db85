"""Prebuilt SELECTs run thin from their third run (``berth.db.connection``):
no execution context, the same rows, types, errors, listeners and
reconnection as SQLAlchemy's own path, on every backend."""

from __future__ import annotations

import datetime as dt
import decimal
import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import connection as db_connection
from berth.db.engine import Database
from support.thin_probe import (
    FORMS,
    NEEDS_THIN,
    PROBE,
    losing_the_first,
    outcome,
    probe_select,
)

pytestmark = NEEDS_THIN


def _read(
    db: Database, stmt: Any, params: Any, form: Callable[[Any], Any] = lambda r: r.all()
) -> Any:
    return db.read(lambda conn: form(conn.execute(stmt, params)))


def _planned(db: Database, stmt: Any, params: dict[str, Any]) -> Any:
    """``stmt``, run twice (SQLAlchemy's way): from its next run, thin."""
    for _ in range(2):
        _read(db, stmt, params)
    return stmt


def test_a_statement_runs_thin_from_its_third_run(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    stmt = probe_select()
    results = [
        db.read(lambda conn: (lambda r: (type(r), r.all()))(conn.execute(stmt, {"low": 2})))
        for _ in range(5)
    ]
    # SQLAlchemy built a context for the first two runs only.
    assert [s is stmt for s in contexts] == [True, True]
    assert [issubclass(kind, sa.CursorResult) for kind, _ in results] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert [rows for _, rows in results] == [results[0][1]] * 5
    assert [row.id for row in results[0][1]] == [2, 3]


def test_an_update_returning_runs_thin_from_its_third_run(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    if db.backend == "mysql":
        pytest.skip("MariaDB has no UPDATE ... RETURNING (Berth's writes there do without)")
    stmt = (
        PROBE.update()
        .where(PROBE.c.id >= sa.bindparam("low"))
        .values(note=sa.bindparam("note"))
        .returning(PROBE.c.id, PROBE.c.note)
    )

    def bump(i: int) -> Any:
        return db.run(
            lambda conn: (lambda r: (type(r), sorted(tuple(row) for row in r)))(
                conn.execute(stmt, {"low": 2, "note": "n%d" % i})
            )
        )

    results = [bump(i) for i in range(4)]
    assert [s is stmt for s in contexts] == [True, True]
    assert [issubclass(kind, sa.CursorResult) for kind, _ in results] == [True, True, False, False]
    assert [rows for _, rows in results] == [[(2, "n%d" % i), (3, "n%d" % i)] for i in range(4)]
    notes = sa.select(PROBE.c.note).order_by(PROBE.c.id)
    assert db.read(lambda conn: conn.execute(notes).scalars().all())[1:] == ["n3", "n3"]


@pytest.mark.parametrize("low", [1, 3, 99])  # three rows, one, none
@pytest.mark.parametrize("form", sorted(FORMS))
def test_results_are_the_normal_paths(
    db: Database, probe: sa.Table, contexts: list[Any], form: str, low: int
) -> None:
    params = {"low": low}
    stmt = _planned(db, probe_select(), params)
    del contexts[:]
    thin = outcome(lambda: _read(db, stmt, params, FORMS[form]))
    assert contexts == []
    normal = outcome(lambda: _read(db, probe_select(), params, FORMS[form]))
    assert contexts != []
    assert thin == normal
    if low == 1 and form == "types":
        assert thin[1][0][:3] == [int, str, bool]
        assert thin[1][0][3] is decimal.Decimal
        assert thin[1][0][5] is dt.datetime
        assert set(thin[1][2][2:7]) == {type(None)}


def test_scalar_and_scalars_run_thin(db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    name = sa.select(PROBE.c.name).where(PROBE.c.id == sa.bindparam("b_id"))
    got = [
        db.read(
            lambda conn: (conn.scalar(name, {"b_id": 2}), list(conn.scalars(name, {"b_id": 1})))
        )
        for _ in range(3)
    ]
    assert got == [("two", ["one"])] * 3
    assert len(contexts) == 2


def test_cursor_listeners_and_the_observer_see_every_thin_statement(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    stmt = probe_select()
    seen: list[tuple[str, str, Any, bool]] = []

    def before(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
    ) -> None:
        assert isinstance(conn, db_connection.ThinConnection)
        seen.append(("before", statement, context.compiled.string, executemany))

    def after(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
    ) -> None:
        seen.append(("after", statement, params, executemany))

    class Observer:
        times: list[float] = []

        def connections_in_use(self, count: int) -> None:
            pass

        def transaction_retried(self) -> None:
            pass

        def sql_time(self, seconds: float, statements: int) -> None:
            self.times.extend([seconds / statements] * statements)

    observer = Observer()
    db.observer = observer
    empty = len(observer.times)
    db.read(lambda conn: None)
    per_transaction = len(observer.times) - empty  # SQLite's BEGIN
    sa.event.listen(db.engine, "before_cursor_execute", before)
    sa.event.listen(db.engine, "after_cursor_execute", after)
    try:
        before_runs = len(observer.times)
        rows = db.read(lambda conn: [conn.execute(stmt, {"low": 2}).all() for _ in range(6)])
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", before)
        sa.event.remove(db.engine, "after_cursor_execute", after)
    assert len(contexts) == 2  # four of the six ran thin
    assert rows == [rows[0]] * 6 and len(rows[0]) == 2
    sql = str(stmt.compile(db.engine))
    assert [s[0] for s in seen] == ["before", "after"] * 6
    assert {s[1] for s in seen} == {sql}
    assert {s[2] for s in seen[::2]} == {sql}
    assert not any(s[3] for s in seen)
    # The parameters the driver got, as SQLAlchemy sends them.
    assert len({repr(s[2]) for s in seen[1::2]}) == 1
    assert len(observer.times) - before_runs == per_transaction + 6


def test_an_error_is_wrapped_as_on_the_normal_path(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    stmt = _planned(db, probe_select(), {"low": 1})

    # A value the DateTime type's bind processor or the database refuses.
    def since() -> Any:
        return probe_select().where(PROBE.c.at >= sa.bindparam("since", type_=sa.DateTime))

    planned = _planned(db, since(), {"low": 1, "since": dt.datetime(1999, 1, 1)})
    del contexts[:]
    bad = {"low": 1, "since": "not a date"}
    thin = outcome(lambda: _read(db, planned, bad))
    assert contexts == []
    assert thin == outcome(lambda: _read(db, since(), bad))
    # A table gone: the database's own error, on every backend.
    PROBE.drop(db.engine)
    del contexts[:]
    thin = outcome(lambda: _read(db, stmt, {"low": 1}))
    assert contexts == []
    normal = outcome(lambda: _read(db, probe_select(), {"low": 1}))
    assert thin == normal
    assert thin[0] == "raised" and issubclass(thin[1], sa.exc.DBAPIError)


@pytest.mark.parametrize("path", ["thin", "normal"])
def test_a_lost_connection_is_invalidated(db: Database, probe: sa.Table, path: str) -> None:
    stmt = _planned(db, probe_select(), {"low": 1})
    run = stmt if path == "thin" else probe_select()
    with db_connection.ThinConnection(db.engine) as conn:
        conn.begin()  # left to close(): committing a lost one would raise
        driver = conn.connection.driver_connection
        assert driver is not None
        driver.close()
        with pytest.raises(sa.exc.DBAPIError) as caught:
            conn.execute(run, {"low": 1})
        assert caught.value.connection_invalidated
        assert conn.invalidated


def test_database_run_runs_again_after_a_lost_connection(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    stmt = _planned(db, probe_select(), {"low": 3})
    del contexts[:]
    rows, attempts = losing_the_first(db, lambda conn: conn.execute(stmt, {"low": 3}).all())
    assert [row.name for row in rows] == ["three"]
    assert attempts == 2
    assert contexts == []  # both attempts ran thin


def _not_thin(db: Database, contexts: list[Any], run: Callable[[Any], Any], runs: int = 4) -> None:
    del contexts[:]
    for _ in range(runs):
        db.run(run)
    assert len(contexts) == runs


def test_writes_lists_and_options_stay_on_sqlalchemys_path(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    update = (
        PROBE.update().where(PROBE.c.id == sa.bindparam("b_id")).values(note=sa.bindparam("b_note"))
    )
    _not_thin(db, contexts, lambda conn: conn.execute(update, {"b_id": 2, "b_note": "x"}))
    in_list = sa.select(PROBE.c.id).where(PROBE.c.id.in_(sa.bindparam("ids", expanding=True)))
    for ids in ([], list(range(db_connection.SIZED_LIST_MAX + 1))):
        _not_thin(db, contexts, lambda conn, ids=ids: conn.execute(in_list, {"ids": ids}).all())
    stmt = probe_select()
    _not_thin(
        db,
        contexts,
        lambda conn: conn.execute(stmt, {"low": 1}, execution_options={"berth_probe": 1}).all(),
    )
    optioned = probe_select().execution_options(berth_probe=1)
    _not_thin(db, contexts, lambda conn: conn.execute(optioned, {"low": 1}).all())
    # Another listener of the statement than the cursor's.
    heard: list[Any] = []

    def before_execute(conn: Any, clause: Any, *args: Any) -> None:
        heard.append(clause)

    sa.event.listen(db.engine, "before_execute", before_execute)
    try:
        _not_thin(db, contexts, lambda conn: conn.execute(stmt, {"low": 1}).all())
    finally:
        sa.event.remove(db.engine, "before_execute", before_execute)
    assert len(heard) == 4


def test_a_sized_list_is_a_plain_statement_and_runs_thin(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    in_list = (
        sa.select(PROBE.c.name)
        .where(PROBE.c.id.in_(sa.bindparam("ids", expanding=True)))
        .order_by(PROBE.c.id)
    )
    got = [
        db.read(lambda conn: conn.execute(in_list, {"ids": [3, 1]}).scalars().all())
        for _ in range(4)
    ]
    assert got == [["one", "three"]] * 4
    assert len(contexts) == 2


def test_statements_built_per_call_are_not_kept(
    db: Database, probe: sa.Table, contexts: list[Any]
) -> None:
    kept: list[weakref.ref[Any]] = []
    for _ in range(20):
        stmt = probe_select()
        kept.append(weakref.ref(stmt))
        for _ in range(3):  # the third thin: a plan was made for it
            _read(db, stmt, {"low": 2})
    assert len(contexts) == 40  # two a statement: each ran thin once
    del stmt, contexts[:]  # the spy's hold on them
    gc.collect()
    # The engine's compiled cache holds the first one compiled (its
    # compiled statement refers to it), as it does without Berth.
    assert sum(ref() is not None for ref in kept) <= 1
    db.engine.clear_compiled_cache()
    gc.collect()
    assert [ref() for ref in kept] == [None] * 20
