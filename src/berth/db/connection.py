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
  (or a ``UNION`` of them) run with a dict of parameters is counted per
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

  Anything else stays on SQLAlchemy's path: writes, lists of parameter
  dicts, execution options, statements still expanding (empty lists or
  longer than :data:`SIZED_LIST_MAX`), other listeners (``before_execute``,
  the dialect's events, echo), a connection not plainly inside a live
  transaction. The plan holds the compiled statement by weak reference
  (the engine's compiled cache owns it, and it refers back to the first
  statement compiled), so a statement built per call is forgotten with
  it, and an evicted compiled statement is planned again.
- **Driver SQL that returns rows runs thin.** ``exec_driver_sql`` of a
  string with one tuple or dict of parameters (or none: the change feed's
  position, read by every request, its changes, read after every write,
  and PostgreSQL's numbering of a write) runs SQLAlchemy's way once; when
  that gave rows from a plain cursor, the string's column names are kept
  per dialect (up to :data:`TEXTS_MAX` strings) and later runs send it as
  the prebuilt ``SELECT`` above does, with a context standing for a
  textual one, the rows in an ``IteratorResult`` over those names (as
  SQLAlchemy's path gives them: it has no types to process for a string).
  The same conditions send it SQLAlchemy's way instead; a string that
  gave no rows (a plain write) always goes that way. On PostgreSQL this
  path cost a worker several times what the driver alone spends on
  ``SELECT id, seq FROM berth_state`` (bench/journal/2026-12-04.md).

These shortcuts use SQLAlchemy's private API: ``Select._compile_w_cache``,
``Engine._compiled_cache``, ``SQLCompiler.construct_params`` (and its
``_collected_params`` in 2.1), ``_bind_processors``, ``positiontup``,
``escaped_bind_names``, ``CursorResult._metadata``,
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
import weakref
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import engine as sa_engine
from sqlalchemy.engine import cursor as sa_cursor
from sqlalchemy.engine.interfaces import BindTyping
from sqlalchemy.sql import compiler, elements, visitors

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
        ),
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

#: The connection's own execution options a thin run may see (what
#: ``Database`` sets: SQLite's BEGIN, PostgreSQL's autocommit reads, the
#: observer); any other one sends a statement along SQLAlchemy's path.
THIN_OPTIONS = frozenset({"sqlite_begin", "isolation_level", "berth_observer"})

#: The attribute of a dialect holding its statements' counts and plans
#: (on the dialect, not in a module dict: the plans refer to the dialect,
#: and so go with it).
_PLANS = "_berth_thin_plans"

#: The statements that may run thin: a SELECT and a UNION of them (the
#: exact classes: a subclass may compile or execute its own way).
_SELECTS = (sa.Select, sa.CompoundSelect)

#: A statement that can never run thin (its plan, once tried, said so).
_NEVER = 0

#: Driver SQL strings whose column names a dialect keeps (a string
#: built per call, such as an IN list of each length, is one each).
TEXTS_MAX = 256
#: The attribute of a dialect holding those strings' names (None: the
#: string gave no rows, or not from a plain cursor).
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
            if type(statement) in _SELECTS and not execution_options:
                return self._select(statement, parameters)
        return super().execute(statement, parameters, execution_options=execution_options)

    def scalar(
        self, statement: Any, parameters: Any = None, *, execution_options: Any = None
    ) -> Any:
        if THIN and type(parameters) is dict:
            statement, parameters = _maybe_sized(statement, parameters)
            if type(statement) in _SELECTS and not execution_options:
                return self._select(statement, parameters).scalar()
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
        keys = texts.get(statement, _NEVER)
        if type(keys) is tuple and self._thin_ready():
            return _run_text(self, statement, parameters, keys)
        result = super().exec_driver_sql(statement, parameters)
        if keys is _NEVER and len(texts) < TEXTS_MAX:
            texts[statement] = _text_keys(self.dialect, result)
        return result

    def _select(self, statement: Any, params: dict[str, Any]) -> Any:
        """``statement`` run thin once planned, else SQLAlchemy's way
        (planned on its second run)."""
        plans: weakref.WeakKeyDictionary[Any, Any] | None = getattr(self.dialect, _PLANS, None)
        if plans is None:
            plans = weakref.WeakKeyDictionary()
            setattr(self.dialect, _PLANS, plans)
        seen = plans.get(statement)
        if type(seen) is _Plan:
            result = seen.run(self, params)
            if result is not None:
                return result
            if seen.compiled() is None:  # evicted: plan it again
                plans[statement] = 1
            return super().execute(statement, params)
        result = super().execute(statement, params)
        if seen is None:
            plans[statement] = 1
        elif seen == 1 and self._thin_ready():
            plans[statement] = _plan(self, statement, params, result)
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


def _text_keys(dialect: Any, result: Any) -> tuple[str, ...] | None:
    """The column names of driver SQL just run into ``result``, when later
    runs of it may go thin; else None."""
    context = result.context
    if (
        not result.returns_rows
        or dialect.server_side_cursors
        or context._is_server_side
        or context.executemany
        or context.cursor_fetch_strategy is not sa_cursor._DEFAULT_FETCH
    ):
        return None
    return tuple(result.keys())


def _run_text(conn: ThinConnection, statement: str, parameters: Any, keys: tuple[str, ...]) -> Any:
    """Driver SQL ``statement`` run thin: the parameters as SQLAlchemy's
    path hands them to the driver (none: an empty dict, or tuple where
    the driver's style is positional), its rows under ``keys``."""
    dialect = conn.dialect
    sent: Any = parameters
    if not sent:
        sent = dialect.execute_sequence_format() if dialect.positional else {}
    try:
        dbapi_connection = conn._dbapi_connection
        assert dbapi_connection is not None  # _thin_ready checked
        cursor = dbapi_connection.cursor()
    except BaseException as e:
        conn._handle_dbapi_exception(e, statement, sent, None, None)
    context = _ThinTextContext(conn, statement, cursor, sent)
    rows = _send(conn, statement, cursor, sent, context)
    return sa_engine.IteratorResult(sa_engine.result.SimpleResultMetaData(keys), iter(rows))


class _ThinContext:
    """What stands for SQLAlchemy's execution context in a thin run: the
    attributes cursor listeners and the dialect's timed ``do_execute``
    (``berth.db.engine``) read, and what ``_handle_dbapi_exception`` asks
    of one (a context present means errors raised by listeners are not
    wrapped, as on the normal path)."""

    __slots__ = (
        "root_connection",
        "compiled",
        "invoked_statement",
        "execution_options",
        "cursor",
        "statement",
        "parameters",
    )
    executemany = False
    isinsert = isupdate = isdelete = is_crud = is_text = isddl = False

    def __init__(
        self,
        conn: ThinConnection,
        compiled: compiler.SQLCompiler,
        invoked: Any,
        cursor: Any,
        parameters: Any,
    ) -> None:
        self.root_connection = conn
        self.compiled = compiled
        self.invoked_statement = invoked
        self.execution_options = conn._execution_options
        self.cursor = cursor
        self.statement = compiled.string
        self.parameters = [parameters]

    def handle_dbapi_exception(self, e: BaseException) -> None:
        """The default context's, which does nothing."""


class _ThinTextContext(_ThinContext):
    """What stands for SQLAlchemy's context of a textual statement."""

    __slots__ = ()
    is_text = True

    def __init__(self, conn: ThinConnection, statement: str, cursor: Any, parameters: Any) -> None:
        self.root_connection = conn
        self.compiled = None  # type: ignore[assignment]
        self.invoked_statement = None
        self.execution_options = conn._execution_options
        self.cursor = cursor
        self.statement = statement
        self.parameters = [parameters]


class _Plan:
    """What a thin run of one statement on one dialect needs."""

    __slots__ = (
        "compiled",
        "invoked",
        "extracted",
        "collected",
        "metadata",
        "positional",
        "binds",
        "sequence",
        "__weakref__",
    )

    def __init__(
        self,
        compiled: compiler.SQLCompiler,
        invoked: Any,
        extracted: Any,
        collected: Any,
        metadata: Any,
        dialect: Any,
    ) -> None:
        #: weak: the engine's compiled cache owns it (see the module's
        #: docstring); gone means evicted, and the statement is planned again
        self.compiled = weakref.ref(compiled)
        self.invoked = weakref.ref(invoked)
        self.extracted = extracted
        self.collected = collected
        self.metadata = metadata
        processors: dict[str, Callable[[Any], Any]] = dict(compiled._bind_processors)  # type: ignore[arg-type]
        self.positional = compiled.positional
        #: (key in construct_params, key sent, bind processor or None)
        #: in the order the driver wants them
        names = (
            compiled.positiontup if compiled.positional else list(compiled.bind_names.values())
        ) or []
        escaped: dict[str, str] = dict(compiled.escaped_bind_names or {})
        self.binds = [(name, escaped.get(name, name), processors.get(name)) for name in names]
        self.sequence = dialect.execute_sequence_format

    def run(self, conn: ThinConnection, params: dict[str, Any]) -> Any:
        """The statement's result, run thin; None when it must go
        SQLAlchemy's way (the connection isn't ready for it, or the
        compiled statement was evicted)."""
        compiled = self.compiled()
        if compiled is None or not conn._thin_ready():
            return None
        try:
            if self.collected is None:  # always, before SQLAlchemy 2.1
                values = compiled.construct_params(
                    params, extracted_parameters=self.extracted, escape_names=False
                )
            else:
                values = compiled.construct_params(
                    params,
                    extracted_parameters=self.extracted,
                    escape_names=False,
                    _collected_params=self.collected,
                )
            if self.positional:
                sent: Any = self.sequence(
                    [value(values[key]) if value else values[key] for key, _, value in self.binds]
                )
            else:
                sent = {
                    name: value(values[key]) if value else values[key]
                    for key, name, value in self.binds
                }
            dbapi_connection = conn._dbapi_connection
            assert dbapi_connection is not None  # _thin_ready checked
            cursor = dbapi_connection.cursor()
        except BaseException as e:
            # Where the normal path fails building its context: no cursor,
            # no context (so a TypeError from a bind processor is wrapped
            # in a StatementError there as here).
            conn._handle_dbapi_exception(e, compiled.string, [params], None, None)
        return _execute(conn, compiled, self, cursor, sent)


def _execute(
    conn: ThinConnection, compiled: compiler.SQLCompiler, plan: _Plan, cursor: Any, sent: Any
) -> Any:
    """Send ``compiled`` with ``sent`` on ``cursor`` as SQLAlchemy's
    ``_exec_single_context`` does, and return all its rows."""
    context = _ThinContext(conn, compiled, plan.invoked(), cursor, sent)
    rows = _send(conn, compiled.string, cursor, sent, context)
    return sa_engine.IteratorResult(plan.metadata, iter(rows))


def _send(
    conn: ThinConnection, statement: str, cursor: Any, sent: Any, context: _ThinContext
) -> list[Any]:
    """Send ``statement`` with ``sent`` on ``cursor`` as SQLAlchemy's
    ``_exec_single_context`` does (listeners, the dialect's
    ``do_execute``, errors), and fetch all its rows."""
    events = conn._has_events or conn.engine._has_events
    try:
        if events:
            for fn in conn.dispatch.before_cursor_execute:
                statement, sent = fn(conn, cursor, statement, sent, context, False)
        conn.dialect.do_execute(cursor, statement, sent, context)  # type: ignore[arg-type]
        if events:
            conn.dispatch.after_cursor_execute(conn, cursor, statement, sent, context, False)
        rows = cursor.fetchall()
    except BaseException as e:
        conn._handle_dbapi_exception(e, statement, sent, cursor, context)  # type: ignore[arg-type]
    conn._safe_close_cursor(cursor)
    return rows  # type: ignore[no-any-return]


def _plan(conn: ThinConnection, statement: Any, params: dict[str, Any], result: Any) -> _Plan | int:
    """The plan of ``statement``, just run by SQLAlchemy into ``result``
    with ``params``; :data:`_NEVER` when it cannot run thin."""
    dialect = conn.dialect
    context = result.context
    if (
        statement._execution_options
        or not result.returns_rows
        or dialect.bind_typing is BindTyping.SETINPUTSIZES
        or dialect.server_side_cursors
        or context._is_server_side
        or context.cursor_fetch_strategy is not sa_cursor._DEFAULT_FETCH
    ):
        return _NEVER
    # (compiled, extracted, cache_hit) in 2.0; collected before cache_hit
    # in 2.1 (see VERIFIED).
    found = statement._compile_w_cache(
        dialect=dialect,
        compiled_cache=conn.engine._compiled_cache,
        column_keys=sorted(params),
        for_executemany=False,
        schema_translate_map=None,
        linting=dialect.compiler_linting | compiler.WARN_LINTING,
    )
    compiled, extracted = found[0], found[1]
    collected = found[2] if len(found) == 4 else None
    metadata = result._metadata
    if (
        compiled is not context.compiled  # not cached: nothing to keep
        or not isinstance(compiled, compiler.SQLCompiler)
        or compiled.literal_execute_params
        or compiled.post_compile_params
        or compiled.schema_translate_map
        or compiled.has_out_parameters
        or compiled.isinsert
        or compiled.isupdate
        or compiled.isdelete
        or not getattr(metadata, "_safe_for_cache", False)
        or any(isinstance(p, tuple) for p in compiled._bind_processors.values())
    ):
        return _NEVER
    return _Plan(compiled, statement, extracted, collected, metadata, dialect)


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
