"""The connection ``Database.run`` and ``Database.read`` hand out.

It is SQLAlchemy's ``Connection`` (made by its constructor, as
``Engine.connect`` makes one), whose ``execute`` runs a statement with
expanding ``IN`` lists as a statement of one plain parameter per item,
built once per list length. SQLAlchemy renders an expanding parameter
into the statement's text on every execution, which costs 20-50 µs a
statement (more than running a one-row ``SELECT`` on SQLite); a
statement of plain parameters is taken from its compiled cache as it is.
So the domain code writes ``col.in_(sa.bindparam("ids", expanding=True))``
in a statement built once, passes a list, and gets the sized statement
without asking for it.
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy import engine as sa_engine
from sqlalchemy.sql import elements, visitors

#: Lists up to this long get a statement of their own; longer ones (and
#: empty ones) keep the expanding parameter.
SIZED_LIST_MAX = 32


class Connection(sa_engine.Connection):
    """A connection whose ``execute`` and ``scalar`` (and so
    ``scalars``) size the ``IN`` lists of their statements (see the
    module's docstring). Everything else is SQLAlchemy's, errors and
    reconnection included."""

    def execute(self, statement: Any, parameters: Any = None, *,
                execution_options: Any = None) -> Any:
        if type(parameters) is dict:
            statement, parameters = _maybe_sized(statement, parameters)
        return super().execute(statement, parameters,
                               execution_options=execution_options)

    def scalar(self, statement: Any, parameters: Any = None, *,
               execution_options: Any = None) -> Any:
        if type(parameters) is dict:
            statement, parameters = _maybe_sized(statement, parameters)
        return super().scalar(statement, parameters,
                              execution_options=execution_options)


def _maybe_sized(statement: Any, params: dict[str, Any]
                 ) -> tuple[Any, dict[str, Any]]:
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
    sizes = tuple(sorted(
        (key, len(value)) for key, value in params.items()
        if key in expanding and isinstance(value, list)
        and 0 < len(value) <= SIZED_LIST_MAX))
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
        element.key for element in visitors.iterate(statement)
        if isinstance(element, elements.BindParameter) and element.expanding)


@functools.lru_cache(maxsize=512)
def _sized(statement: Any, sizes: tuple[tuple[str, int], ...]) -> Any:
    """``statement`` with each expanding parameter named in ``sizes``
    replaced by that many plain ones."""
    wanted = dict(sizes)

    def replace(element: Any, **_: Any) -> Any:
        if (isinstance(element, elements.BindParameter) and element.expanding
                and element.key in wanted):
            return sa.tuple_(*[
                sa.bindparam("%s_%d" % (element.key, i), type_=element.type)
                for i in range(wanted[element.key])])
        return None

    return visitors.replacement_traverse(statement, {}, replace)
