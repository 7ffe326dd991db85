"""Prebuilt SELECTs run thin from their third run (``berth.db.connection``):
no execution context, the same rows, types, errors, listeners and
reconnection as SQLAlchemy's own path, on every backend."""

from __future__ import annotations

import datetime as dt
import decimal
import gc
import weakref
from collections.abc import Callable, Iterator
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
    "runs SQLAlchemy's public way (test_db_connection_fallback.py)"
    % sa.__version__)
pytestmark = NEEDS_THIN

META = sa.MetaData()
# A table of this test's own, with the types whose values the database
# and SQLAlchemy's result processors shape (and NULLs of each).
PROBE = sa.Table(
    "berth_thin_probe", META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(50), nullable=False),
    sa.Column("flag", sa.Boolean, nullable=True),
    sa.Column("amount", sa.Numeric(10, 2), nullable=True),
    sa.Column("ratio", sa.Float, nullable=True),
    sa.Column("at", sa.DateTime, nullable=True),
    sa.Column("note", sa.String(50), nullable=True))
ROWS = [
    {"id": 1, "name": "one", "flag": True, "amount": decimal.Decimal("1.50"),
     "ratio": 1.5, "at": dt.datetime(2026, 12, 4, 1, 2, 3), "note": None},
    {"id": 2, "name": "two", "flag": False, "amount": decimal.Decimal("0.00"),
     "ratio": 16.0, "at": dt.datetime(2000, 1, 1), "note": "n"},
    {"id": 3, "name": "three", "flag": None, "amount": None, "ratio": None,
     "at": None, "note": None},
]


def _select() -> sa.Select[Any]:
    """The statement the tests run; built once per test and reused, as a
    module's prebuilt statement is (or per call, for the normal path: a
    statement's first run is always SQLAlchemy's)."""
    return (sa.select(PROBE.c.id, PROBE.c.name, PROBE.c.flag,
                      PROBE.c.amount, PROBE.c.ratio, PROBE.c.at,
                      PROBE.c.note, (PROBE.c.id * 2).label("twice"))
            .where(PROBE.c.id >= sa.bindparam("low")).order_by(PROBE.c.id))


@pytest.fixture
def probe(db: Database) -> Iterator[sa.Table]:
    PROBE.create(db.engine, checkfirst=True)
    try:
        with db.engine.begin() as conn:
            conn.execute(PROBE.delete())
            conn.execute(PROBE.insert(), ROWS)
        yield PROBE
    finally:
        PROBE.drop(db.engine, checkfirst=True)


def spy_contexts(db: Database, monkeypatch: pytest.MonkeyPatch,
                 hook: str, position: int) -> list[Any]:
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


@pytest.fixture
def contexts(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The statements SQLAlchemy builds an execution context for."""
    return spy_contexts(db, monkeypatch, "_init_compiled", 6)  # invoked


def _read(db: Database, stmt: Any, params: Any,
          form: Callable[[Any], Any] = lambda r: r.all()) -> Any:
    return db.read(lambda conn: form(conn.execute(stmt, params)))


def _planned(db: Database, stmt: Any, params: dict[str, Any]) -> Any:
    """``stmt``, run twice (SQLAlchemy's way): from its next run, thin."""
    for _ in range(2):
        _read(db, stmt, params)
    return stmt


def _outcome(fn: Callable[[], Any]) -> tuple[Any, ...]:
    """What ``fn`` returned, or the classes of what it raised."""
    try:
        return ("returned", fn())
    except Exception as exc:  # compared, not swallowed
        return ("raised", type(exc), type(getattr(exc, "orig", None)))


def test_a_statement_runs_thin_from_its_third_run(
        db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    stmt = _select()
    results = [db.read(lambda conn: (lambda r: (type(r), r.all()))(
        conn.execute(stmt, {"low": 2}))) for _ in range(5)]
    # SQLAlchemy built a context for the first two runs only.
    assert [s is stmt for s in contexts] == [True, True]
    assert [issubclass(kind, sa.CursorResult) for kind, _ in results] == [
        True, True, False, False, False]
    assert [rows for _, rows in results] == [results[0][1]] * 5
    assert [row.id for row in results[0][1]] == [2, 3]


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
    "by_name": lambda r: [(row.name, row.twice, row.at, row._mapping["flag"],
                           row._mapping[PROBE.c.amount]) for row in r],
    "keys": lambda r: list(r.keys()),
    "types": lambda r: [[type(value) for value in row] for row in r],
}


@pytest.mark.parametrize("low", [1, 3, 99])  # three rows, one, none
@pytest.mark.parametrize("form", sorted(FORMS))
def test_results_are_the_normal_paths(db: Database, probe: sa.Table,
                                      contexts: list[Any], form: str,
                                      low: int) -> None:
    params = {"low": low}
    stmt = _planned(db, _select(), params)
    del contexts[:]
    thin = _outcome(lambda: _read(db, stmt, params, FORMS[form]))
    assert contexts == []
    normal = _outcome(lambda: _read(db, _select(), params, FORMS[form]))
    assert contexts != []
    assert thin == normal
    if low == 1 and form == "types":
        assert thin[1][0][:3] == [int, str, bool]
        assert thin[1][0][3] is decimal.Decimal
        assert thin[1][0][5] is dt.datetime
        assert set(thin[1][2][2:7]) == {type(None)}


def test_scalar_and_scalars_run_thin(db: Database, probe: sa.Table,
                                     contexts: list[Any]) -> None:
    name = sa.select(PROBE.c.name).where(PROBE.c.id == sa.bindparam("b_id"))
    got = [db.read(lambda conn: (conn.scalar(name, {"b_id": 2}),
                                 list(conn.scalars(name, {"b_id": 1}))))
           for _ in range(3)]
    assert got == [("two", ["one"])] * 3
    assert len(contexts) == 2


def test_cursor_listeners_and_the_observer_see_every_thin_statement(
        db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    stmt = _select()
    seen: list[tuple[str, str, Any, bool]] = []

    def before(conn: Any, cursor: Any, statement: str, params: Any,
               context: Any, executemany: bool) -> None:
        assert isinstance(conn, db_connection.Connection)
        seen.append(("before", statement, context.compiled.string,
                     executemany))

    def after(conn: Any, cursor: Any, statement: str, params: Any,
              context: Any, executemany: bool) -> None:
        seen.append(("after", statement, params, executemany))

    class Observer:
        times: list[float] = []

        def connections_in_use(self, count: int) -> None:
            pass

        def transaction_retried(self) -> None:
            pass

        def sql_time(self, seconds: float) -> None:
            self.times.append(seconds)

    observer = Observer()
    db.observer = observer
    empty = len(observer.times)
    db.read(lambda conn: None)
    per_transaction = len(observer.times) - empty  # SQLite's BEGIN
    sa.event.listen(db.engine, "before_cursor_execute", before)
    sa.event.listen(db.engine, "after_cursor_execute", after)
    try:
        before_runs = len(observer.times)
        rows = db.read(lambda conn: [conn.execute(stmt, {"low": 2}).all()
                                     for _ in range(6)])
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
        db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    stmt = _planned(db, _select(), {"low": 1})

    # A value the DateTime type's bind processor or the database refuses.
    def since() -> Any:
        return _select().where(PROBE.c.at >= sa.bindparam(
            "since", type_=sa.DateTime))

    planned = _planned(db, since(), {"low": 1,
                                     "since": dt.datetime(1999, 1, 1)})
    del contexts[:]
    bad = {"low": 1, "since": "not a date"}
    thin = _outcome(lambda: _read(db, planned, bad))
    assert contexts == []
    assert thin == _outcome(lambda: _read(db, since(), bad))
    # A table gone: the database's own error, on every backend.
    PROBE.drop(db.engine)
    del contexts[:]
    thin = _outcome(lambda: _read(db, stmt, {"low": 1}))
    assert contexts == []
    normal = _outcome(lambda: _read(db, _select(), {"low": 1}))
    assert thin == normal
    assert thin[0] == "raised" and issubclass(thin[1], sa.exc.DBAPIError)


@pytest.mark.parametrize("path", ["thin", "normal"])
def test_a_lost_connection_is_invalidated(db: Database, probe: sa.Table,
                                          path: str) -> None:
    stmt = _planned(db, _select(), {"low": 1})
    run = stmt if path == "thin" else _select()
    with db_connection.Connection(db.engine) as conn:
        conn.begin()  # left to close(): committing a lost one would raise
        driver = conn.connection.driver_connection
        assert driver is not None
        driver.close()
        with pytest.raises(sa.exc.DBAPIError) as caught:
            conn.execute(run, {"low": 1})
        assert caught.value.connection_invalidated
        assert conn.invalidated


def losing_the_first(db: Database, run: Callable[[Any], Any]
                     ) -> tuple[Any, int]:
    """What ``run(conn)`` in ``db.read`` returned, its first attempt's
    connection closed under it, and how many attempts it took."""
    attempts: list[int] = []

    def lose_the_first(conn: Any) -> Any:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            conn.connection.driver_connection.close()
        return run(conn)

    return db.read(lose_the_first), len(attempts)


def test_database_run_runs_again_after_a_lost_connection(
        db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    stmt = _planned(db, _select(), {"low": 3})
    del contexts[:]
    rows, attempts = losing_the_first(
        db, lambda conn: conn.execute(stmt, {"low": 3}).all())
    assert [row.name for row in rows] == ["three"]
    assert attempts == 2
    assert contexts == []  # both attempts ran thin


def _not_thin(db: Database, contexts: list[Any], run: Callable[[Any], Any],
              runs: int = 4) -> None:
    del contexts[:]
    for _ in range(runs):
        db.run(run)
    assert len(contexts) == runs


def test_writes_lists_and_options_stay_on_sqlalchemys_path(
        db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    update = (PROBE.update().where(PROBE.c.id == sa.bindparam("b_id"))
              .values(note=sa.bindparam("b_note")))
    _not_thin(db, contexts, lambda conn: conn.execute(
        update, {"b_id": 2, "b_note": "x"}))
    in_list = sa.select(PROBE.c.id).where(
        PROBE.c.id.in_(sa.bindparam("ids", expanding=True)))
    for ids in ([], list(range(db_connection.SIZED_LIST_MAX + 1))):
        _not_thin(db, contexts, lambda conn, ids=ids: conn.execute(
            in_list, {"ids": ids}).all())
    stmt = _select()
    _not_thin(db, contexts, lambda conn: conn.execute(
        stmt, {"low": 1}, execution_options={"berth_probe": 1}).all())
    optioned = _select().execution_options(berth_probe=1)
    _not_thin(db, contexts, lambda conn: conn.execute(
        optioned, {"low": 1}).all())
    # Another listener of the statement than the cursor's.
    heard: list[Any] = []

    def before_execute(conn: Any, clause: Any, *args: Any) -> None:
        heard.append(clause)

    sa.event.listen(db.engine, "before_execute", before_execute)
    try:
        _not_thin(db, contexts, lambda conn: conn.execute(
            stmt, {"low": 1}).all())
    finally:
        sa.event.remove(db.engine, "before_execute", before_execute)
    assert len(heard) == 4


def test_a_sized_list_is_a_plain_statement_and_runs_thin(
        db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    in_list = sa.select(PROBE.c.name).where(
        PROBE.c.id.in_(sa.bindparam("ids", expanding=True))).order_by(
            PROBE.c.id)
    got = [db.read(lambda conn: conn.execute(
        in_list, {"ids": [3, 1]}).scalars().all()) for _ in range(4)]
    assert got == [["one", "three"]] * 4
    assert len(contexts) == 2


def test_statements_built_per_call_are_not_kept(
        db: Database, probe: sa.Table, contexts: list[Any]) -> None:
    kept: list[weakref.ref[Any]] = []
    for _ in range(20):
        stmt = _select()
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
