"""``berth.db.connection``'s gate: its shortcuts (sized IN lists, thin
SELECTs and driver SQL) run only on a SQLAlchemy release whose private
API they were checked against (``THIN``, decided at import); on any
other, every statement runs SQLAlchemy's public way, with the same
results, on every backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from packaging.version import Version
from sqlalchemy.engine import default

from berth.db import changes
from berth.db import connection as db_connection
from berth.db.engine import Database
from support.thin_probe import (
    FORMS,
    PROBE,
    losing_the_first,
    outcome,
    probe_select,
    spy_contexts,
)

#: Runs of each statement: from the third a statement runs thin when the
#: shortcuts are on (driver SQL from the second).
RUNS = 4

# Prebuilt, as the domain's statements are (a thin run needs the same
# statement object each time).
SELECT = probe_select()
NAME = sa.select(PROBE.c.name).where(PROBE.c.id == sa.bindparam("b_id"))
IN_LIST = (
    sa.select(PROBE.c.name)
    .where(PROBE.c.id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(PROBE.c.id)
)
UNION = sa.union_all(
    sa.select(PROBE.c.id).where(PROBE.c.id == sa.bindparam("a")),
    sa.select(PROBE.c.id).where(PROBE.c.id == sa.bindparam("b")),
)
SINCE = SELECT.where(PROBE.c.at >= sa.bindparam("since", type_=sa.DateTime))
UPDATE = (
    PROBE.update().where(PROBE.c.id == sa.bindparam("b_id")).values(note=sa.bindparam("b_note"))
)
ALL = "SELECT id, name, note FROM %s ORDER BY id" % PROBE.name


def _by_id(conn: Any) -> Any:
    """Driver SQL of one positional parameter, in the driver's style."""
    return conn.exec_driver_sql(
        "SELECT id, name FROM %s WHERE id >= %s ORDER BY id"
        % (PROBE.name, changes.placeholder(conn)),
        (2,),
    )


def _driver_update(conn: Any) -> Any:
    mark = changes.placeholder(conn)
    return conn.exec_driver_sql(
        "UPDATE %s SET note = %s WHERE id = %s" % (PROBE.name, mark, mark), ("x", 2)
    ).rowcount


def _select_as(form: str, low: int) -> Callable[[Any], Any]:
    """:data:`SELECT` run with ``low``, its result read as ``form``."""
    return lambda conn: FORMS[form](conn.execute(SELECT, {"low": low}))


#: What test_db_connection*.py run, as
#: (statement, what to run with a connection).
SCENARIOS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    **{
        "select_%s_%d" % (form, low): (SELECT, _select_as(form, low))
        for form in FORMS
        for low in (1, 3, 99)
    },  # three rows, one, none
    "scalar": (NAME, lambda conn: conn.scalar(NAME, {"b_id": 2})),
    "scalars": (NAME, lambda conn: list(conn.scalars(NAME, {"b_id": 1}))),
    "union": (UNION, lambda conn: sorted(conn.execute(UNION, {"a": 1, "b": 3}).scalars())),
    "sized_list": (IN_LIST, lambda conn: conn.execute(IN_LIST, {"ids": [3, 1]}).scalars().all()),
    "empty_list": (IN_LIST, lambda conn: conn.execute(IN_LIST, {"ids": []}).scalars().all()),
    "long_list": (
        IN_LIST,
        lambda conn: (
            conn.execute(IN_LIST, {"ids": list(range(db_connection.SIZED_LIST_MAX + 1))})
            .scalars()
            .all()
        ),
    ),
    "refused_value": (
        SINCE,
        lambda conn: conn.execute(SINCE, {"low": 1, "since": "not a date"}).all(),
    ),
    "update": (UPDATE, lambda conn: conn.execute(UPDATE, {"b_id": 2, "b_note": "x"}).rowcount),
    "driver_sql": (ALL, lambda conn: conn.exec_driver_sql(ALL).all()),
    "driver_sql_parameters": (None, lambda conn: _by_id(conn).all()),
    "driver_sql_update": (None, _driver_update),
}


def _runs(db: Database, run: Callable[[Any], Any]) -> list[tuple[Any, ...]]:
    return [outcome(lambda: db.run(run)) for _ in range(RUNS)]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_public_way_gives_what_the_shortcuts_give(
    db: Database, probe: sa.Table, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    statement, run = SCENARIOS[name]
    compiled = spy_contexts(db, monkeypatch, "_init_compiled", 6)
    strings = spy_contexts(db, monkeypatch, "_init_statement", 4)
    getattr(db.engine.dialect, db_connection._TEXTS, {}).clear()
    shortcuts = _runs(db, run)
    monkeypatch.setattr(db_connection, "THIN", False)
    del compiled[:], strings[:]
    public = _runs(db, run)
    assert public == shortcuts
    # Every run built SQLAlchemy's context, for the statement as written
    # (no sized copy of it).
    if isinstance(statement, str):
        assert strings.count(statement) == RUNS
    elif statement is not None:
        assert sum(s is statement for s in compiled) == RUNS
    else:
        assert len(strings) >= RUNS


def test_the_public_way_runs_again_after_a_lost_connection(
    db: Database, probe: sa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_connection, "THIN", False)
    for _ in range(2):
        db.read(lambda conn: conn.execute(SELECT, {"low": 3}).all())
    rows, attempts = losing_the_first(db, lambda conn: conn.execute(SELECT, {"low": 3}).all())
    assert [row.name for row in rows] == ["three"]
    assert attempts == 2


def _compile_w_cache_arity() -> int:
    """How many values the installed SQLAlchemy's ``_compile_w_cache``
    returns (3 in 2.0, 4 in 2.1)."""
    found = sa.select(sa.literal_column("1"))._compile_w_cache(
        dialect=default.DefaultDialect(),
        compiled_cache={},
        column_keys=[],
        for_executemany=False,
        schema_translate_map=None,
    )
    return len(found)


def test_the_gate_matches_the_installed_sqlalchemy() -> None:
    version = Version(sa.__version__)
    span = db_connection.VERIFIED.get((version.major, version.minor))
    expected = (
        str(version) == version.base_version  # a plain release
        and len(version.release) == 3
        and span is not None
        and span[0] <= version.micro <= span[1]
    )
    assert db_connection.THIN is expected, sa.__version__
    if expected:
        # The shape the code unpacks, seen by running it.
        assert _compile_w_cache_arity() == (4 if version.release[:2] >= (2, 1) else 3)


@pytest.mark.parametrize("version", ["2.0.0", "2.0.46", "2.0.52", "2.0.58", "2.1.0", "2.1.9"])
def test_verified_releases_pass_on_their_own_shape(version: str) -> None:
    """(The shape probed is the installed SQLAlchemy's: releases of its
    series pass.)"""
    if not db_connection.THIN:
        pytest.skip("SQLAlchemy %s takes the public way" % sa.__version__)
    if version[:4] != sa.__version__[:4]:
        pytest.skip("a %s release has the other series' shape" % version[:3])
    assert db_connection.private_api_checked(version)


@pytest.mark.parametrize(
    "version",
    ["1.4.54", "2.0.59", "2.1.10", "2.2.0", "3.0.0", "2.1.0b1", "2.1", "2.1.0.dev0+local"],
)
def test_other_releases_take_the_public_way(version: str) -> None:
    assert not db_connection.private_api_checked(version)


def test_a_release_of_another_shape_takes_the_public_way(monkeypatch: pytest.MonkeyPatch) -> None:
    version = sa.__version__
    if not db_connection.THIN:
        pytest.skip("SQLAlchemy %s already takes the public way" % version)
    # The other series' construct_params: 2.0's claimed to be 2.1's.
    other = "2.1.0" if version.startswith("2.0.") else "2.0.0"
    assert not db_connection.private_api_checked(other)
    monkeypatch.delattr(sa.engine.Connection, "_safe_close_cursor")
    assert not db_connection.private_api_checked(version)
