"""Running a statement thin: sent on a cursor without SQLAlchemy's
execution context (the two thin shortcuts of ``berth.db.connection``).

``plan`` looks at a prebuilt ``SELECT`` (or ``UPDATE ... RETURNING``)
that SQLAlchemy has just run and
keeps what later runs need in a ``Plan`` (the compiled statement, by
weak reference, and its result metadata), or answers ``NEVER`` for one
that must always go SQLAlchemy's way; ``Plan.run`` then sends it as
SQLAlchemy's ``_exec_single_context`` does (see ``_send``) and fetches
every row into an ``IteratorResult``. ``text_keys`` and ``run_text`` do
the same for driver SQL (a write's giving a ``Written``). ``ThinConnection`` decides which
statement runs here and when: on which run, and only on a connection
ready for it (``ThinConnection._thin_ready``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy import engine as sa_engine
from sqlalchemy.engine import cursor as sa_cursor
from sqlalchemy.engine.interfaces import BindTyping
from sqlalchemy.sql import compiler

#: A statement that can never run thin (its plan, once tried, said so).
NEVER = 0


def text_keys(dialect: Any, result: Any) -> tuple[str, ...] | None:
    """The column names of driver SQL just run into ``result``, when later
    runs of it may go thin (none, an empty tuple, when it gave no rows: a
    write, whose later runs give their row count); else None."""
    context = result.context
    if (
        dialect.server_side_cursors
        or context._is_server_side
        or context.executemany
        or context.cursor_fetch_strategy is not sa_cursor._DEFAULT_FETCH
    ):
        return None
    return tuple(result.keys()) if result.returns_rows else ()


class Written:
    """What a thin run of driver SQL that gives no rows (a write) returns:
    its row count, as SQLAlchemy's result of a write gives it."""

    __slots__ = ("rowcount",)
    returns_rows = False

    def __init__(self, rowcount: int) -> None:
        self.rowcount = rowcount

    def close(self) -> None:
        """Nothing to release: the cursor is closed."""


def run_text(
    conn: sa_engine.Connection, statement: str, parameters: Any, keys: tuple[str, ...]
) -> Any:
    """Driver SQL ``statement`` run thin on ``conn`` (which the caller
    found ready for it): the parameters as SQLAlchemy's path hands them
    to the driver (none: an empty dict, or tuple where
    the driver's style is positional), its rows under ``keys`` (none: a
    :class:`Written`)."""
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
    context = _TextContext(conn, statement, cursor, sent)
    if not keys:
        return Written(_send(conn, statement, cursor, sent, context, rows=False))
    rows = _send(conn, statement, cursor, sent, context)
    return sa_engine.IteratorResult(sa_engine.result.SimpleResultMetaData(keys), iter(rows))


class _Context:
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
        conn: sa_engine.Connection,
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


class _TextContext(_Context):
    """What stands for SQLAlchemy's context of a textual statement."""

    __slots__ = ()
    is_text = True

    def __init__(
        self, conn: sa_engine.Connection, statement: str, cursor: Any, parameters: Any
    ) -> None:
        self.root_connection = conn
        self.compiled = None  # type: ignore[assignment]
        self.invoked_statement = None
        self.execution_options = conn._execution_options
        self.cursor = cursor
        self.statement = statement
        self.parameters = [parameters]


class Plan:
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

    def run(self, conn: sa_engine.Connection, params: dict[str, Any]) -> Any:
        """The statement's result, run thin on ``conn`` (which the caller
        found ready for it: ``ThinConnection._thin_ready``); None when it
        must go SQLAlchemy's way (the compiled statement was evicted)."""
        compiled = self.compiled()
        if compiled is None:
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
    conn: sa_engine.Connection, compiled: compiler.SQLCompiler, plan: Plan, cursor: Any, sent: Any
) -> Any:
    """Send ``compiled`` with ``sent`` on ``cursor`` as SQLAlchemy's
    ``_exec_single_context`` does, and return all its rows."""
    context = _Context(conn, compiled, plan.invoked(), cursor, sent)
    rows = _send(conn, compiled.string, cursor, sent, context)
    return sa_engine.IteratorResult(plan.metadata, iter(rows))


def _send(
    conn: sa_engine.Connection,
    statement: str,
    cursor: Any,
    sent: Any,
    context: _Context,
    rows: bool = True,
) -> Any:
    """Send ``statement`` with ``sent`` on ``cursor`` as SQLAlchemy's
    ``_exec_single_context`` does (listeners, the dialect's
    ``do_execute``, errors), and fetch all its rows (or, ``rows`` false,
    take its row count)."""
    events = conn._has_events or conn.engine._has_events
    try:
        if events:
            for fn in conn.dispatch.before_cursor_execute:
                statement, sent = fn(conn, cursor, statement, sent, context, False)
        conn.dialect.do_execute(cursor, statement, sent, context)  # type: ignore[arg-type]
        if events:
            conn.dispatch.after_cursor_execute(conn, cursor, statement, sent, context, False)
        got = cursor.fetchall() if rows else cursor.rowcount
    except BaseException as e:
        conn._handle_dbapi_exception(e, statement, sent, cursor, context)  # type: ignore[arg-type]
    conn._safe_close_cursor(cursor)
    return got


def plan(
    conn: sa_engine.Connection, statement: Any, params: dict[str, Any], result: Any
) -> Plan | int:
    """The plan of ``statement``, just run by SQLAlchemy into ``result``
    with ``params``; :data:`NEVER` when it cannot run thin."""
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
        return NEVER
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
        or compiled.isdelete
        # An UPDATE with RETURNING of its own (not return_defaults)
        # whose values SQLAlchemy computes none of in Python: its rows
        # are all a thin run gives, and all its callers read. (Columns
        # set to SQL, such as generation + 1, are "postfetch" ones, which
        # a statement's own RETURNING leaves SQLAlchemy nothing to do for.)
        or (
            compiled.isupdate
            and (
                not compiled.effective_returning
                or compiled.insert_prefetch
                or compiled.update_prefetch
                or statement._return_defaults
            )
        )
        or not getattr(metadata, "_safe_for_cache", False)
        or any(isinstance(p, tuple) for p in compiled._bind_processors.values())
    ):
        return NEVER
    return Plan(compiled, statement, extracted, collected, metadata, dialect)
