"""Helpers shared by every domain module.

Convention: domain functions take an open ``Connection`` as their first
argument and never open or commit transactions themselves; the caller (a
handler, the reshaper, direct access) runs them inside ``Database.run`` so
that one request is one transaction.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid as uuidlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar, cast

import sqlalchemy as sa
from oslo_utils import uuidutils
from sqlalchemy.engine import Connection, CursorResult, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import elements, visitors

from berth.db import changes, events
from berth.db import tables as t
from berth.domain import errors

S = TypeVar("S", bound=sa.Executable)
#: What ``Connection.execute`` returns for a statement of untyped rows.
Rows = CursorResult[*tuple[Any, ...]]


def now() -> dt.datetime:
    """Naive UTC timestamp, as stored in created_at/updated_at."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def is_uuid_like(value: str) -> bool:
    """True for every spelling upstream accepts as a uuid (dashed or not,
    any case, braces, ``urn:uuid:``), as oslo.utils defines it."""
    return bool(uuidutils.is_uuid_like(value))


def normalize_uuid(value: str) -> str | None:
    """The canonical (lower-case, dashed) spelling of ``value``, or None
    when it is not a uuid as upstream accepts them."""
    return str(uuidlib.UUID(value)) if is_uuid_like(value) else None


def provider_by_uuid(conn: Connection, uuid: str) -> Row | None:  # type: ignore[type-arg]
    """The resource_providers row for ``uuid``, or None."""
    return conn.execute(_PROVIDER, {"b_uuid": uuid}).first()


# Built once: most writes start by reading their provider.
_PROVIDER = sa.select(t.resource_providers).where(
    t.resource_providers.c.uuid == sa.bindparam("b_uuid"))


_ROOT = t.resource_providers.alias("root")
#: Built once: the writers of a provider's inventories, traits and
#: aggregates read it, and its root's uuid for the change feed's event.
_PROVIDER_ROOT = (
    sa.select(t.resource_providers, _ROOT.c.uuid.label("root_uuid"))
    .select_from(t.resource_providers.outerjoin(
        _ROOT, _ROOT.c.id == t.resource_providers.c.root_provider_id))
    .where(t.resource_providers.c.uuid == sa.bindparam("b_uuid")))


def require_provider(conn: Connection, uuid: str,
                     message: str | None = None, *,
                     root: bool = False) -> Row:  # type: ignore[type-arg]
    """The provider row, or NotFound with upstream's wording. With
    ``root``, the row also has its root's uuid (``root_uuid``)."""
    row = (conn.execute(_PROVIDER_ROOT, {"b_uuid": uuid}).first() if root
           else provider_by_uuid(conn, uuid))
    if row is None:
        raise errors.NotFound(message or
                              "No resource provider with uuid %s found" % uuid)
    return row


class Provider(NamedTuple):
    """A provider as a writer of its inventories or traits reads it with
    its contents: what it compares and bumps, and what the change feed's
    event names (the provider and its tree)."""

    id: int
    uuid: str
    generation: int
    root_uuid: str | None


# Built once: every write to a provider runs it.
_BUMP = t.resource_providers.update().where(
    t.resource_providers.c.id == sa.bindparam("b_id"),
    t.resource_providers.c.generation == sa.bindparam("b_expected"))


def bump_provider_generation(conn: Connection, provider_id: int,
                             expected: int,
                             change: str = changes.STRUCTURE) -> int:
    """Compare-and-swap the provider generation; return the new one.

    The UPDATE takes the row lock, so concurrent writers to one provider
    serialize here and every loser sees ConcurrentUpdate (409). The
    provider is noted as changed (``change``: its structure, or with
    ``changes.USAGE`` only its usage) for the candidate cache.
    """
    result = conn.execute(_BUMP, {"b_id": provider_id, "b_expected": expected,
                                  "generation": expected + 1,
                                  "updated_at": now()})
    if result.rowcount != 1:
        raise errors.ConcurrentUpdate(
            "resource provider generation conflict")
    changes.note(conn, change, [provider_id])
    events.note_generation(conn, provider_id, expected + 1)
    return expected + 1


#: Lists up to this long get a statement of their own (see
#: :func:`execute`); longer ones keep the expanding parameter.
SIZED_LIST_MAX = 32


@functools.lru_cache(maxsize=512)
def _sized(stmt: S, sizes: tuple[tuple[str, int], ...]) -> S:
    """``stmt`` with each expanding parameter named in ``sizes`` replaced
    by that many plain ones (``name_0``, ``name_1``...)."""
    wanted = dict(sizes)

    def replace(element: Any, **_: Any) -> Any:
        if (isinstance(element, elements.BindParameter) and element.expanding
                and element.key in wanted):
            return sa.tuple_(*[
                sa.bindparam("%s_%d" % (element.key, i), type_=element.type)
                for i in range(wanted[element.key])])
        return None

    return cast(S, visitors.replacement_traverse(cast(Any, stmt), {},
                                                 replace))


def execute(conn: Connection, stmt: sa.Executable,
            params: Mapping[str, Any]) -> Rows:
    """Run a prebuilt statement whose IN lists are expanding parameters
    (lists in ``params``) as a statement with one plain parameter per
    item, built once per list length (by :func:`_sized`).

    SQLAlchemy renders an expanding parameter into the statement's text
    on every execution, which costs 20-50 µs a statement (more than
    running a one-row ``SELECT`` on SQLite); a statement of plain
    parameters is taken from its compiled cache as it is. An empty list,
    or one longer than :data:`SIZED_LIST_MAX`, stays expanding.
    """
    sizes = tuple(sorted(
        (key, len(value)) for key, value in params.items()
        if isinstance(value, list) and 0 < len(value) <= SIZED_LIST_MAX))
    if not sizes:
        return conn.execute(stmt, params)
    flat = dict(params)
    for key, _ in sizes:
        for i, value in enumerate(flat.pop(key)):
            flat["%s_%d" % (key, i)] = value
    return conn.execute(_sized(stmt, sizes), flat)


# Built once per table: every claim sums usage, and an expression, which
# never changes once built, serves any number of statements and threads.
@functools.lru_cache(maxsize=8)
def sum_used(allocations: sa.FromClause) -> sa.Label[int]:
    """``SUM(allocations.used) AS used`` over ``allocations`` (the table or
    an alias of it): every usage sum, so each reads ``row.used`` and the
    covering indexes of ``berth.db.tables.allocations`` serve them all."""
    return sa.func.sum(allocations.c.used).label("used")


def insert_unique(conn: Connection, key: sa.Column[str], value: str,
                  stamp: dt.datetime | None = None) -> int | None:
    """Insert a row whose unique ``key`` column is ``value`` (created at
    ``stamp``, default now); its id, or None when the value is taken.

    The insert runs in a savepoint, so when a concurrent insert of the
    same value wins the race the caller's transaction stays usable (on
    PostgreSQL an error otherwise aborts all of it) and the caller reads
    the winner's row, as it sees fit.
    """
    try:
        with conn.begin_nested():
            result = conn.execute(key.table.insert().values(
                {key.name: value, "created_at": stamp or now()}))
    except IntegrityError:
        return None
    return int(result.inserted_primary_key[0])  # type: ignore[index]


def ids_by_name(conn: Connection, table: sa.Table,
                names: Iterable[str] | None = None) -> dict[str, int]:
    """name -> id in ``table`` (resource classes or traits) of ``names``
    (unknown ones are left out), or of every row when None."""
    if names is None:
        return {name: id_ for name, id_ in conn.execute(
            sa.select(table.c.name, table.c.id))}
    wanted = sorted(set(names))
    if not wanted:
        return {}
    return {name: id_ for name, id_ in execute(
        conn, _by_name(table), {"names": wanted})}


# Built once per table: every write naming classes or traits looks them up.
@functools.lru_cache(maxsize=8)
def _by_name(table: sa.Table) -> sa.Select[str, int]:
    return sa.select(table.c.name, table.c.id).where(
        table.c.name.in_(sa.bindparam("names", expanding=True)))


def resource_class_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Map the given class names to ids (unknown names are left out)."""
    return ids_by_name(conn, t.resource_classes, names)


def resource_class_names(conn: Connection) -> dict[int, str]:
    """Every class id -> name (the table is small)."""
    return {id_: name for name, id_ in
            ids_by_name(conn, t.resource_classes).items()}


def trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Map trait names to ids (unknown names are left out)."""
    return ids_by_name(conn, t.traits, names)


def row_by_name(conn: Connection, table: sa.Table,
                name: str) -> sa.Row | None:  # type: ignore[type-arg]
    """The row of ``table`` (classes or traits) named exactly ``name``.

    A case-insensitive MySQL collation could return another spelling;
    that counts as no match, so every database answers alike.
    """
    row = conn.execute(sa.select(table).where(table.c.name == name)).first()
    if row is not None and row.name != name:
        return None
    return row


def require_by_name(conn: Connection, table: sa.Table, name: str,
                    message: str) -> Row:  # type: ignore[type-arg]
    """The row of :func:`row_by_name`, or NotFound saying ``message``."""
    row = row_by_name(conn, table, name)
    if row is None:
        raise errors.NotFound(message)
    return row
