"""The connection ``Database.run`` and ``Database.read`` hand out.

It is SQLAlchemy's ``Connection`` (made by its constructor, as
``Engine.connect`` makes one), with three shortcuts in its ``execute``
and ``exec_driver_sql`` (when SQLAlchemy is a release they were checked
against: see the end):

- **IN lists sized.** A statement with expanding ``IN`` lists runs as a
  statement of one plain parameter per item, built once per list length.
  SQLAlchemy renders an expanding parameter into the statement's text on
  every execution, which costs more than running a one-row ``SELECT``
  on SQLite (bench/journal/2026-12-03.md); a statement of plain
  parameters is taken from its compiled cache as it is. So the domain code writes
  ``col.in_(sa.bindparam("ids", expanding=True))`` in a statement built
  once, passes a list, and gets the sized statement without asking.
- **Prebuilt SELECTs run thin.** Of the instructions SQLAlchemy
  spends on a one-row ``SELECT`` the driver takes a twentieth; most go to
  building an execution context and a ``CursorResult`` that are the same
  for every run of a statement built once at import time. So a ``SELECT``
  (or a ``UNION`` of them, or an ``UPDATE ... RETURNING`` that binds all
  it writes: a claim's provider lock and SQLite's numbering of a write)
  run with a dict of parameters is counted per
  dialect, under a weak reference to the statement object; on its second
  run its plan is kept (SQLAlchemy's compiled statement and its result
  metadata), and from the third on it runs without an execution context:
  the parameters through ``construct_params`` and the bind processors,
  the engine's ``before_cursor_execute``/``after_cursor_execute``
  listeners called as SQLAlchemy calls them, ``dialect.do_execute``,
  errors through the connection's ``_handle_dbapi_exception`` (so they are
  wrapped, and a lost connection invalidated, exactly as on the normal
  path, and ``Database.run`` retries and reconnects as before), and the
  rows fetched at once into an ``IteratorResult`` over SQLAlchemy's
  metadata.

  Anything else stays on SQLAlchemy's path: other writes, lists of parameter
  dicts, execution options, statements still expanding (empty lists or
  longer than :data:`SIZED_LIST_MAX`), other listeners (``before_execute``,
  the dialect's events, echo), a connection not plainly inside a live
  transaction. The plan holds the compiled statement by weak reference
  (the engine's compiled cache owns it, and it refers back to the first
  statement compiled), so a statement built per call is forgotten with
  it, and an evicted compiled statement is planned again.
- **Driver SQL runs thin.** ``exec_driver_sql`` of a
  string with one tuple or dict of parameters (or none: the change feed's
  position, read by every request, its changes, read after every write,
  and PostgreSQL's numbering of a write) runs SQLAlchemy's way once; when
  that gave rows from a plain cursor, the string's column names are kept
  per dialect (up to :data:`TEXTS_MAX` strings) and later runs send it as
  the prebuilt ``SELECT`` above does, with a context standing for a
  textual one, the rows in an ``IteratorResult`` over those names (as
  SQLAlchemy's path gives them: it has no types to process for a string).
  A string that gave no rows (a plain write: PostgreSQL's few rows at
  once, below) later gives a ``thin.Written``, which holds only its
  ``rowcount``. The same conditions send it SQLAlchemy's way instead. On PostgreSQL this
  path cost a worker several times what the driver alone spends on
  ``SELECT id, seq FROM berth_state`` (bench/journal/2026-12-04.md).

- **A few rows at once on PostgreSQL and SQLite.** ``execute`` of a plain
  ``INSERT`` (no ``RETURNING``) with a list of 1 to :data:`ROWS_AT_ONCE`
  parameter dicts of the same keys (an ``executemany``) sends, on
  PostgreSQL and SQLite, one ``INSERT`` of as many rows through
  ``exec_driver_sql`` (so it runs thin from its second run): psycopg runs
  an ``executemany`` as a pipeline, which cost a claim more than its
  three allocation rows (bench/journal/2026-12-06.md), and SQLAlchemy's
  context for one cost SQLite's claim about a tenth of its instructions
  (bench/journal/2026-12-07.md). The text is the statement's own
  compiled row repeated, built once per statement, keys and row count:
  on PostgreSQL with each row's parameters renamed, on SQLite with its
  ``?`` parameters sent row after row, each through its bind processor
  (SQLite's dates go as text). A statement whose row needs what only
  SQLAlchemy's path does (Python-side defaults, escaped names, and on
  PostgreSQL bind processors) keeps the ``executemany``, as do longer
  lists, far from the parameters a statement takes (65,535 on
  PostgreSQL, 32,766 on SQLite since 3.32, 999 before).

This module decides which statement takes a shortcut, and when (the
counts, the plans and names kept per dialect, whether the connection is
ready); the thin runs themselves, a statement's plan and the context
that stands for SQLAlchemy's, are ``berth.db.thin``.

These shortcuts use SQLAlchemy's private API: ``Select._compile_w_cache``,
``Engine._compiled_cache``, ``SQLCompiler.construct_params`` (and its
``_collected_params`` in 2.1), ``_bind_processors``, ``positiontup``,
``escaped_bind_names``, ``insert_prefetch``, ``update_prefetch``, ``effective_returning``,
``Update._return_defaults``, ``CursorResult._metadata``,
``Connection._handle_dbapi_exception``, ``_safe_close_cursor`` and its
transaction attributes. They were checked against SQLAlchemy 2.0.0 to
2.0.58 and 2.1.0 to 2.1.9 (:data:`VERIFIED`). At import the module checks
that the installed SQLAlchemy is one of those releases and that what it
touches is there with the keywords it passes (:data:`THIN`); under any
other release every statement runs SQLAlchemy's public way (no sized
lists, nothing thin): slower, with the same results.
``tests/functional/test_db_connection_thin.py`` pins the behaviour on each
backend, and ``tests/functional/test_db_connection_fallback.py`` the public
way.
"""

from __future__ import annotations

import functools
import inspect
import re
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy import engine as sa_engine
from sqlalchemy.engine import cursor as sa_cursor
from sqlalchemy.engine.interfaces import BindTyping
from sqlalchemy.sql import compiler, elements, visitors

from berth.db import thin

#: The SQLAlchemy releases whose private API the shortcuts were checked
#: against, as (first, last) patch level of each series: 2.0.0, 2.0.10,
#: 2.0.30, 2.0.46 and 2.0.52 (OpenStack's 2026.1 and master constraints),
#: 2.0.58, 2.1.0, 2.1.5 and 2.1.9 pass ``tests/functional/test_db_connection*.py``
#: on SQLite, PostgreSQL and MariaDB.
#: 2.0 and 2.1 differ in two places: ``_compile_w_cache`` returns three
#: values in 2.0, four in 2.1 (the statement's collected parameters,
#: which ``construct_params`` then takes as ``_collected_params``).
VERIFIED: dict[tuple[int, int], tuple[int, int]] = {(2, 0): (0, 58), (2, 1): (0, 9)}


def private_api_checked(version: str) -> bool:
    """Whether SQLAlchemy ``version`` (``sa.__version__``) is a release in
    :data:`VERIFIED` (not a pre-, post- or development release) and its
    private API has the shape the shortcuts use
    (:func:`_private_api_shaped`)."""
    parts = version.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return False
    major, minor, patch = (int(part) for part in parts)
    span = VERIFIED.get((major, minor))
    return (
        span is not None
        and span[0] <= patch <= span[1]
        and _private_api_shaped(collects=(major, minor) >= (2, 1))
    )


def _private_api_shaped(*, collects: bool) -> bool:
    """Whether the private methods and attributes the shortcuts touch are
    there, with the keywords they pass (``collects``: whether
    ``construct_params`` should take ``_collected_params``)."""
    try:
        compile_kw = inspect.signature(sa.Select._compile_w_cache).parameters
        construct_kw = inspect.signature(compiler.SQLCompiler.construct_params).parameters
    except (AttributeError, TypeError, ValueError):  # gone, or compiled
        return False
    attributes = {
        sa_engine.Connection: (
            "_handle_dbapi_exception",
            "_safe_close_cursor",
            "_trans_context_manager",
        ),
        compiler.SQLCompiler: (
            "_bind_processors",
            "positiontup",
            "escaped_bind_names",
            "literal_execute_params",
            "post_compile_params",
            "schema_translate_map",
            "has_out_parameters",
            "insert_prefetch",
            "update_prefetch",
            "effective_returning",
        ),
        sa.Update: ("_return_defaults",),
        sa_cursor.CursorResultMetaData: ("_safe_for_cache",),
        sa_engine.default.DefaultExecutionContext: ("_is_server_side", "cursor_fetch_strategy"),
        sa_cursor: ("_DEFAULT_FETCH",),
        BindTyping: ("SETINPUTSIZES",),
    }
    return (
        {"dialect", "compiled_cache", "column_keys", "for_executemany", "schema_translate_map"}
        <= compile_kw.keys()
        and {"extracted_parameters", "escape_names"} <= construct_kw.keys()
        and ("_collected_params" in construct_kw) == collects
        and all(hasattr(owner, name) for owner, names in attributes.items() for name in names)
    )


#: Whether the shortcuts run (decided once, at import): when False every
#: statement goes SQLAlchemy's public way, with the same results.
THIN = private_api_checked(sa.__version__)

#: Lists up to this long get a statement of their own; longer ones (and
#: empty ones) keep the expanding parameter.
SIZED_LIST_MAX = 32

#: The most rows an ``executemany`` INSERT sends as one statement on
#: PostgreSQL and SQLite (a claim's few; the rows of a large ``POST /allocations``
#: or reshape stay an ``executemany``, and each row count's text is kept).
ROWS_AT_ONCE = 32

#: The execution option under which ``engine.Database`` keeps a
#: transaction's count and time of statements for its observer.
TALLY = "berth_tally"

#: The connection's own execution options a thin run may see (what
#: ``Database`` sets: SQLite's BEGIN, PostgreSQL's autocommit reads, the
#: statement tally); any other one sends a statement along SQLAlchemy's path.
THIN_OPTIONS = frozenset({"sqlite_begin", "isolation_level", TALLY})

#: The attribute of a dialect holding its statements' counts and plans
#: (on the dialect, not in a module dict: the plans refer to the dialect,
#: and so go with it).
_PLANS = "_berth_thin_plans"

#: The statements that may run thin: a SELECT, a UNION of them, and an
#: UPDATE (one with RETURNING: ``thin.plan`` refuses the others) (the
#: exact classes: a subclass may compile or execute its own way).
_PLANNED = (sa.Select, sa.CompoundSelect, sa.Update)

#: Driver SQL strings whose column names a dialect keeps (a string
#: built per call, such as an IN list of each length, is one each).
TEXTS_MAX = 256
#: The attribute of a dialect holding those strings' names (an empty
#: tuple: the string gave no rows; None: not from a plain cursor).
_TEXTS = "_berth_thin_texts"


class ThinConnection(sa_engine.Connection):
    """A connection whose ``execute`` and ``scalar`` (and so ``scalars``)
    size the ``IN`` lists of their statements and run prebuilt
    ``SELECT`` statements thin (see the module's docstring). Results,
    errors and reconnection are SQLAlchemy's."""

    def execute(
        self, statement: Any, parameters: Any = None, *, execution_options: Any = None
    ) -> Any:
        if THIN and type(parameters) is dict:
            statement, parameters = _maybe_sized(statement, parameters)
            if type(statement) in _PLANNED and not execution_options:
                return self._planned(statement, parameters)
        elif (
            THIN
            and type(parameters) is list
            and 0 < len(parameters) <= ROWS_AT_ONCE
            and type(statement) is sa.Insert
            and not execution_options
            and self.dialect.name in ("postgresql", "sqlite")
        ):
            at_once = _rows_at_once(self.dialect, statement, parameters)
            if at_once is not None:
                return self.exec_driver_sql(*at_once)
        return super().execute(statement, parameters, execution_options=execution_options)

    def scalar(
        self, statement: Any, parameters: Any = None, *, execution_options: Any = None
    ) -> Any:
        if THIN and type(parameters) is dict:
            statement, parameters = _maybe_sized(statement, parameters)
            if type(statement) in _PLANNED and not execution_options:
                return self._planned(statement, parameters).scalar()
        return super().scalar(statement, parameters, execution_options=execution_options)

    def exec_driver_sql(
        self, statement: Any, parameters: Any = None, execution_options: Any = None
    ) -> Any:
        if (
            not THIN
            or type(statement) is not str
            or execution_options
            or type(parameters) not in (tuple, dict, type(None))
        ):
            # Options, or a list of parameter sets (executemany).
            return super().exec_driver_sql(statement, parameters, execution_options)
        texts: dict[str, tuple[str, ...] | None] | None = getattr(self.dialect, _TEXTS, None)
        if texts is None:
            texts = {}
            setattr(self.dialect, _TEXTS, texts)
        keys = texts.get(statement, thin.NEVER)
        if type(keys) is tuple and self._thin_ready():
            return thin.run_text(self, statement, parameters, keys)
        result = super().exec_driver_sql(statement, parameters)
        if keys is thin.NEVER and len(texts) < TEXTS_MAX:
            texts[statement] = thin.text_keys(self.dialect, result)
        return result

    def _planned(self, statement: Any, params: dict[str, Any]) -> Any:
        """``statement`` run thin once planned, else SQLAlchemy's way
        (planned on its second run)."""
        plans: weakref.WeakKeyDictionary[Any, Any] | None = getattr(self.dialect, _PLANS, None)
        if plans is None:
            plans = weakref.WeakKeyDictionary()
            setattr(self.dialect, _PLANS, plans)
        seen = plans.get(statement)
        if type(seen) is thin.Plan:
            result = seen.run(self, params) if self._thin_ready() else None
            if result is not None:
                return result
            if seen.compiled() is None:  # evicted: plan it again
                plans[statement] = 1
            return super().execute(statement, params)
        result = super().execute(statement, params)
        if seen is None:
            plans[statement] = 1
        elif seen == 1 and self._thin_ready():
            plans[statement] = thin.plan(self, statement, params, result)
        return result

    def _thin_ready(self) -> bool:
        """Whether a statement may run here without SQLAlchemy's context:
        a live connection inside a live transaction (else SQLAlchemy's path
        begins, revalidates or raises), nothing logging, no options or
        listeners a thin run would skip."""
        trans = self._transaction
        nested = self._nested_transaction
        manager = self._trans_context_manager
        if (
            self._dbapi_connection is None
            or trans is None
            or not trans.is_active
            or (nested is not None and not nested.is_active)
            or (manager is not None and not manager._transaction_is_active())
            or self._echo
            or self.dialect._has_events
            or not THIN_OPTIONS.issuperset(self._execution_options)
        ):
            return False
        return not (
            (self._has_events or self.engine._has_events)
            and (self.dispatch.before_execute or self.dispatch.after_execute)
        )


def _rows_at_once(dialect: Any, statement: Any, rows: list[Any]) -> tuple[str, Any] | None:
    """The one-statement text of INSERT ``statement`` for ``rows`` (dicts
    of the same keys) and its parameters in the driver's style (named:
    row ``i``'s ``key`` as ``key__i``; positional: a tuple, row after
    row); None when it must stay an ``executemany``."""
    first = rows[0]
    if type(first) is not dict or any(
        type(row) is not dict or row.keys() != first.keys() for row in rows
    ):
        return None
    found = _rows_text(dialect, statement, tuple(sorted(first)), len(rows))
    if found is None:
        return None
    text, order = found
    if order is None:
        params = {}
        for i, row in enumerate(rows):
            for key, value in row.items():
                params["%s__%d" % (key, i)] = value
        return text, params
    return text, tuple(
        value(row[key]) if value else row[key] for row in rows for key, value in order
    )


#: A parameter in a compiled PostgreSQL statement (psycopg's ``pyformat``).
_PYFORMAT = re.compile(r"%\(([^)]+)\)s")


@functools.lru_cache(maxsize=256)
def _rows_text(
    dialect: Any, statement: Any, keys: tuple[str, ...], count: int
) -> tuple[str, tuple[tuple[str, Any], ...] | None] | None:
    """``statement`` (an INSERT) compiled for rows of ``keys``, its row
    written ``count`` times, and how a row's parameters are sent: None
    for named ones (row ``i``'s ``key`` renamed ``<key>__<i>``, as
    PostgreSQL's psycopg takes them), else each ``(key, bind processor or
    None)`` in the row's order (SQLite's ``?``); None when its row needs
    SQLAlchemy's path."""
    compiled = statement.compile(dialect=dialect, column_keys=list(keys), for_executemany=True)
    if (
        not isinstance(compiled, compiler.SQLCompiler)
        or compiled.insert_prefetch
        or compiled.effective_returning
        or compiled.escaped_bind_names
        or compiled.literal_execute_params
        or compiled.post_compile_params
    ):
        return None
    processors = compiled._bind_processors
    head, found, row = compiled.string.partition(" VALUES ")
    if not found or not (row.startswith("(") and row.endswith(")")):
        return None
    if compiled.positional:
        order = tuple(compiled.positiontup or ())
        if (
            dialect.paramstyle != "qmark"
            or sorted(order) != list(keys)
            or row.count("?") != len(order)
            or any(isinstance(p, tuple) for p in processors.values())
        ):
            return None
        rows = ", ".join([row] * count)
        return "%s VALUES %s" % (head, rows), tuple((k, processors.get(k)) for k in order)
    names = _PYFORMAT.findall(row)
    if (
        any(p is not None for p in processors.values())
        or sorted(names) != list(keys)
        or "%" in _PYFORMAT.sub("", row)
    ):
        return None
    return "%s VALUES %s" % (head, ", ".join(_renamed(row, i) for i in range(count))), None


def _renamed(row: str, i: int) -> str:
    """``row`` with each parameter ``key`` renamed ``key__<i>``."""
    return _PYFORMAT.sub(lambda m: "%%(%s__%d)s" % (m.group(1), i), row)


def _maybe_sized(statement: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """:func:`sized`, once a list is seen among ``params`` (the check
    that every statement pays, a fraction of a microsecond)."""
    for value in params.values():
        if type(value) is list:
            return sized(statement, params)
    return statement, params


def sized(statement: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``statement`` and ``params`` with each expanding parameter given a
    list of 1 to :data:`SIZED_LIST_MAX` items replaced by that many plain
    ones (``name_0``, ``name_1``...); as they are when there is none.
    A list bound to a parameter that is not expanding (an array) is left
    alone."""
    expanding = _expanding(statement)
    if not expanding:
        return statement, params
    sizes = tuple(
        sorted(
            (key, len(value))
            for key, value in params.items()
            if key in expanding and isinstance(value, list) and 0 < len(value) <= SIZED_LIST_MAX
        )
    )
    if not sizes:
        return statement, params
    flat = dict(params)
    for key, _ in sizes:
        for i, value in enumerate(flat.pop(key)):
            flat["%s_%d" % (key, i)] = value
    return _sized(statement, sizes), flat


@functools.lru_cache(maxsize=512)
def _expanding(statement: Any) -> frozenset[str]:
    """The keys of ``statement``'s expanding parameters."""
    if not isinstance(statement, sa.sql.ClauseElement):
        return frozenset()
    return frozenset(
        element.key
        for element in visitors.iterate(statement)
        if isinstance(element, elements.BindParameter) and element.expanding
    )


@functools.lru_cache(maxsize=512)
def _sized(statement: Any, sizes: tuple[tuple[str, int], ...]) -> Any:
    """``statement`` with each expanding parameter named in ``sizes``
    replaced by that many plain ones."""
    wanted = dict(sizes)

    def replace(element: Any, **_: Any) -> Any:
        if (
            isinstance(element, elements.BindParameter)
            and element.expanding
            and element.key in wanted
        ):
            return sa.tuple_(
                *[
                    sa.bindparam("%s_%d" % (element.key, i), type_=element.type)
                    for i in range(wanted[element.key])
                ]
            )
        return None

    return visitors.replacement_traverse(statement, {}, replace)
