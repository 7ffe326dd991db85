"""Helpers shared by every domain module.

Convention: domain functions take an open ``Connection`` as their first
argument and never open or commit transactions themselves; the caller (a
handler, the reshaper, direct access) runs them inside ``Database.run`` so
that one request is one transaction.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import re
import uuid as uuidlib
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple, overload

import sqlalchemy as sa
from oslo_utils import uuidutils
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from berth.db import AnyRow, AnySelect, changes, events
from berth.db import tables as t
from berth.domain import errors


def now() -> dt.datetime:
    """Naive UTC timestamp, as stored in created_at/updated_at."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def is_uuid_like(value: str) -> bool:
    """True for every spelling upstream accepts as a uuid (dashed or not,
    any case, braces, ``urn:uuid:``), as oslo.utils defines it."""
    return bool(uuidutils.is_uuid_like(value))


#: A uuid already in its canonical spelling (what clients nearly always
#: send): returned as it is, without parsing it twice.
_CANONICAL = re.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalize_uuid(value: str) -> str | None:
    """The canonical (lower-case, dashed) spelling of ``value``, or None
    when it is not a uuid as upstream accepts them."""
    if _CANONICAL.fullmatch(value):
        return value
    return str(uuidlib.UUID(value)) if is_uuid_like(value) else None


def provider_by_uuid(conn: Connection, uuid: str) -> AnyRow | None:
    """The resource_providers row for ``uuid``, or None."""
    return conn.execute(_PROVIDER, {"b_uuid": uuid}).first()


_RP = t.resource_providers
_ROOT = _RP.alias("root")


class WrittenProvider(NamedTuple):
    """A provider as a writer of its inventories, traits or aggregates
    reads it: what it compares and bumps, and what the change feed's
    event names (the provider and its tree)."""

    id: int
    uuid: str
    generation: int
    root_uuid: str | None


#: The columns of a :class:`WrittenProvider`, in its order, read from
#: :data:`PROVIDER_WITH_ROOT` (which a reader may join further).
PROVIDER_COLUMNS = (_RP.c.id, _RP.c.uuid, _RP.c.generation, _ROOT.c.uuid.label("root_uuid"))
#: ``resource_providers`` with its root (``root``).
PROVIDER_WITH_ROOT = _RP.outerjoin(_ROOT, _ROOT.c.id == _RP.c.root_provider_id)
#: The provider named by the parameter ``b_uuid``.
PROVIDER_BY_UUID = _RP.c.uuid == sa.bindparam("b_uuid")

# Built once: most writes start by reading their provider.
_PROVIDER = sa.select(_RP).where(PROVIDER_BY_UUID)

# Built once: the writers of a provider's traits and aggregates read it.
_PROVIDER_ROOT = (
    sa.select(*PROVIDER_COLUMNS).select_from(PROVIDER_WITH_ROOT).where(PROVIDER_BY_UUID)
)


def no_provider(uuid: str) -> errors.NotFound:
    """The NotFound of a provider ``uuid`` that does not exist, worded as
    upstream words it."""
    return errors.NotFound("No resource provider with uuid %s found" % uuid)


@overload
def require_provider(
    conn: Connection, uuid: str, message: str | None = None, *, root: Literal[False] = False
) -> AnyRow: ...


@overload
def require_provider(
    conn: Connection, uuid: str, message: str | None = None, *, root: Literal[True]
) -> WrittenProvider: ...


def require_provider(
    conn: Connection, uuid: str, message: str | None = None, *, root: bool = False
) -> AnyRow | WrittenProvider:
    """The provider row, or NotFound (:func:`no_provider`, or saying
    ``message``). With ``root``, a :class:`WrittenProvider` instead (with its
    root's uuid)."""
    row = (
        conn.execute(_PROVIDER_ROOT, {"b_uuid": uuid}).first()
        if root
        else provider_by_uuid(conn, uuid)
    )
    if row is None:
        raise (no_provider(uuid) if message is None else errors.NotFound(message))
    return WrittenProvider._make(row) if root else row


# Built once: every write to a provider runs it.
_BUMP = t.resource_providers.update().where(
    t.resource_providers.c.id == sa.bindparam("b_id"),
    t.resource_providers.c.generation == sa.bindparam("b_expected"),
)


def bump_provider_generation(
    conn: Connection, provider_id: int, expected: int, change: str = changes.STRUCTURE
) -> int:
    """Compare-and-swap the provider generation; return the new one.

    The UPDATE takes the row lock, so concurrent writers to one provider
    serialize here and every loser sees ConcurrentUpdate (409). The
    provider is noted as changed (``change``: its structure, or with
    ``changes.USAGE`` only its usage) for the candidate cache.
    """
    result = conn.execute(
        _BUMP,
        {
            "b_id": provider_id,
            "b_expected": expected,
            "generation": expected + 1,
            "updated_at": now(),
        },
    )
    if result.rowcount != 1:
        raise errors.ConcurrentUpdate("resource provider generation conflict")
    changes.note(conn, change, [provider_id])
    events.note_generation(conn, provider_id, expected + 1)
    return expected + 1


# Built once per table: every claim sums usage, and an expression, which
# never changes once built, serves any number of statements and threads.
@functools.lru_cache(maxsize=8)
def sum_used(allocations: sa.FromClause) -> sa.Label[int]:
    """``SUM(allocations.used) AS used`` over ``allocations`` (the table or
    an alias of it): every usage sum, so each reads ``row.used`` and the
    covering indexes of ``berth.db.tables.allocations`` serve them all."""
    return sa.func.sum(allocations.c.used).label("used")


def insert_unique(
    conn: Connection, key: sa.Column[str], value: str, stamp: dt.datetime | None = None
) -> int | None:
    """Insert a row whose unique ``key`` column is ``value`` (created at
    ``stamp``, default now); its id, or None when the value is taken.

    When a concurrent insert of the same value wins the race, the
    caller's transaction stays usable and the caller reads the winner's
    row, as it sees fit. On PostgreSQL, where an error aborts the whole
    transaction, the insert runs in a savepoint for that; SQLite and
    MySQL undo only the failed statement, so there it needs none (two
    statements fewer).
    """
    params = {key.name: value, "created_at": stamp or now()}
    try:
        with conn.begin_nested() if conn.dialect.name == "postgresql" else contextlib.nullcontext():
            result = conn.execute(key.table.insert(), params)
    except IntegrityError:
        return None
    return inserted_id(result)


def inserted_id(result: sa.CursorResult[*tuple[Any, ...]]) -> int:
    """The id the one row an INSERT wrote was given."""
    key = result.inserted_primary_key
    assert key is not None  # SQLAlchemy types it Optional for other statements
    return int(key[0])


def ids_by_name(
    conn: Connection, table: sa.Table, names: Iterable[str] | None = None
) -> dict[str, int]:
    """name -> id in ``table`` (resource classes or traits) of ``names``
    (unknown ones are left out), or of every row when None."""
    if names is None:
        return {name: id_ for name, id_ in conn.execute(sa.select(table.c.name, table.c.id))}
    wanted = sorted(set(names))
    if not wanted:
        return {}
    return {name: id_ for name, id_ in conn.execute(_by_name(table), {"names": wanted})}


# Built once per table: every write naming classes or traits looks them up.
@functools.lru_cache(maxsize=8)
def _by_name(table: sa.Table) -> sa.Select[str, int]:
    return sa.select(table.c.name, table.c.id).where(
        table.c.name.in_(sa.bindparam("names", expanding=True))
    )


def resource_class_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Map the given class names to ids (unknown names are left out)."""
    return ids_by_name(conn, t.resource_classes, names)


def resource_class_names(conn: Connection) -> dict[int, str]:
    """Every class id -> name (the table is small)."""
    return {id_: name for name, id_ in ids_by_name(conn, t.resource_classes).items()}


def trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Map trait names to ids (unknown names are left out)."""
    return ids_by_name(conn, t.traits, names)


def row_by_name(conn: Connection, table: sa.Table, name: str) -> AnyRow | None:
    """The row of ``table`` (classes or traits) named exactly ``name``.

    A case-insensitive MySQL collation could return another spelling;
    that counts as no match, so every database answers alike.
    """
    row = conn.execute(_named(table), {"b_name": name}).first()
    if row is not None and row.name != name:
        return None
    return row


# Built once per table: every class or trait write reads its row.
@functools.lru_cache(maxsize=8)
def _named(table: sa.Table) -> AnySelect:
    return sa.select(table).where(table.c.name == sa.bindparam("b_name"))


def require_by_name(conn: Connection, table: sa.Table, name: str, message: str) -> AnyRow:
    """The row of :func:`row_by_name`, or NotFound saying ``message``."""
    row = row_by_name(conn, table, name)
    if row is None:
        raise errors.NotFound(message)
    return row
