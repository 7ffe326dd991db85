"""Consumers: who holds allocations, and the consumer generation.

A consumer row exists exactly while the consumer has allocations: it is
created by the first write that gives it some and deleted by the write
that takes the last away. Its generation moves by compare-and-swap on
every write that touches the consumer, so of two writers that read the
same generation only one can win -- also when the write empties it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from berth.db import tables as t
from berth.domain import common, errors

#: The name shown for a consumer that has no type (before 1.38 writes).
UNKNOWN_TYPE = "unknown"

CONCURRENT_MESSAGE = ("Inventory and/or allocations changed while "
                      "attempting to allocate: Another thread concurrently "
                      "updated the data. Please retry your update")


@dataclass(slots=True)
class Consumer:
    """One consumers row, with its project, user and type resolved."""

    id: int
    uuid: str
    project_id: int
    user_id: int
    generation: int
    consumer_type_id: int | None


# The statements every write of allocations runs, built once.
_C = t.consumers
_GET = sa.select(_C.c.id, _C.c.uuid, _C.c.project_id, _C.c.user_id,
                 _C.c.generation, _C.c.consumer_type_id
                 ).where(_C.c.uuid == sa.bindparam("b_uuid"))
_GET_LOCKED = _GET.with_for_update()
_INSERT = _C.insert()
_BUMP = _C.update().where(_C.c.id == sa.bindparam("b_id"),
                          _C.c.generation == sa.bindparam("b_generation"))
_SET_OWNER = _C.update().where(_C.c.id == sa.bindparam("b_id"))
_DELETE_UNUSED = _C.delete().where(
    _C.c.uuid.in_(sa.bindparam("b_uuids", expanding=True)),
    ~sa.exists(sa.select(t.allocations.c.id).where(
        t.allocations.c.consumer_id == _C.c.uuid)))


def get(conn: Connection, uuid: str, *, lock: bool = False) -> Consumer | None:
    """The consumer ``uuid``, or None; ``lock`` takes its row lock."""
    row = conn.execute(_GET_LOCKED if lock else _GET, {"b_uuid": uuid}).first()
    if row is None:
        return None
    return Consumer(row.id, row.uuid, row.project_id, row.user_id,
                    row.generation, row.consumer_type_id)


@dataclass(slots=True)
class Lookup:
    """What one write needs to know of a consumer before taking it: the
    ids of its owner as the request names them (None: no such row yet),
    the consumer itself (None: it does not exist) and whether any
    allocation carries its uuid."""

    project_id: int | None
    user_id: int | None
    type_id: int | None
    current: Consumer | None
    holds: bool


def _id_of(key: sa.Column[str], name: str) -> sa.ScalarSelect[int]:
    return (sa.select(key.table.c.id).where(key == sa.bindparam(name))
            .scalar_subquery())


def _consumer_column(column: sa.Column[int]) -> sa.ScalarSelect[int]:
    c = t.consumers
    return (sa.select(column).where(c.c.uuid == sa.bindparam("uuid"))
            .scalar_subquery())


_HOLDS = sa.exists(sa.select(t.allocations.c.id).where(
    t.allocations.c.consumer_id == sa.bindparam("uuid")))
#: What :func:`look_up` reads, by name: the owner's ids as the request
#: names them, the consumer's columns, and whether it holds anything.
_FIELDS: dict[str, sa.ColumnElement[int]] = {
    "project": _id_of(t.projects.c.external_id, "project"),
    "user": _id_of(t.users.c.external_id, "user"),
    "type": _id_of(t.consumer_types.c.name, "type"),
    "id": _consumer_column(t.consumers.c.id),
    "project_id": _consumer_column(t.consumers.c.project_id),
    "user_id": _consumer_column(t.consumers.c.user_id),
    "generation": _consumer_column(t.consumers.c.generation),
    "type_id": _consumer_column(t.consumers.c.consumer_type_id),
    "holds": sa.case((_HOLDS, 1), else_=0)}

# Built once: every write of allocations runs it, and one statement of
# scalar sub-queries is one round trip where separate look-ups were five.
_LOOK_UP = sa.select(*[value.label(name) for name, value in _FIELDS.items()])


def look_up_rows(kind: int) -> list[sa.Select]:  # type: ignore[type-arg]
    """:func:`look_up` as one row per field, (value, field name,
    ``kind``), for a caller that reads it in a ``UNION ALL`` of its own
    (parameters ``uuid``, ``project``, ``user`` and ``type``); turn the
    rows into a Lookup with :func:`lookup_of`."""
    return [sa.select(value.label("id"),
                      sa.literal_column("'%s'" % name).label("key"),
                      sa.literal_column(str(kind)).label("kind"))
            for name, value in _FIELDS.items()]


def lookup_of(uuid: str, values: dict[str, int | None]) -> Lookup:
    """The Lookup of consumer ``uuid`` from :func:`look_up_rows`'s rows
    (field name -> value)."""
    id_ = values["id"]
    current = (None if id_ is None else Consumer(
        id_, uuid, int(values["project_id"] or 0),
        int(values["user_id"] or 0), int(values["generation"] or 0),
        values["type_id"]))
    return Lookup(values["project"], values["user"], values["type"],
                  current, bool(values["holds"]))


def look_up(conn: Connection, uuid: str, project: str, user: str,
            type_name: str | None) -> Lookup:
    """The consumer ``uuid`` and the ids of project ``project``, user
    ``user`` and type ``type_name`` (external ids), in one statement;
    take missing owner rows with :func:`project_id` and the like."""
    row = conn.execute(_LOOK_UP, {"project": project, "user": user,
                                  "type": type_name, "uuid": uuid}).one()
    return lookup_of(uuid, dict(zip(_FIELDS, row, strict=True)))


def _get_or_create(conn: Connection, key: sa.Column[str], value: str) -> int:
    """Id of the row of ``key``'s table whose ``key`` is ``value``,
    inserted if missing.

    Almost every call finds the row, so the look-up runs bare; only the
    insert runs in a savepoint, and an insert that lost a race to a
    concurrent one finds the winner's row by looking again (never a 500).
    """
    query = sa.select(key.table.c.id).where(key == value)
    found = conn.scalar(query)
    if found is None:
        found = common.insert_unique(conn, key, value)
        if found is None:  # lost the race: the winner's
            found = conn.execute(query).scalar_one()
    return int(found)


def project_id(conn: Connection, external_id: str) -> int:
    """Id of project ``external_id``, created if needed."""
    return _get_or_create(conn, t.projects.c.external_id, external_id)


def user_id(conn: Connection, external_id: str) -> int:
    """Id of user ``external_id``, created if needed."""
    return _get_or_create(conn, t.users.c.external_id, external_id)


def consumer_type_id(conn: Connection, name: str) -> int:
    """Id of consumer type ``name``, created if needed."""
    return _get_or_create(conn, t.consumer_types.c.name, name)


def generation_conflict(expected: int | None, got: int | None) -> errors.ConcurrentUpdate:
    """Upstream's wording for a consumer generation mismatch."""
    shown = "null" if expected is None else str(expected)
    return errors.ConcurrentUpdate(
        "consumer generation conflict - expected %s but got %s"
        % (shown, got))


def create(conn: Connection, uuid: str, project: int, user: int,
           type_id: int | None, generation: int = 0) -> Consumer:
    """Insert a consumer; a concurrent insert of the same uuid is a
    ConcurrentUpdate (409), never an integrity error.

    No savepoint: the 409 ends the caller's transaction (nothing catches
    it inside one), and on PostgreSQL the failed insert has already
    aborted it."""
    try:
        result = conn.execute(_INSERT, {
            "uuid": uuid, "project_id": project, "user_id": user,
            "generation": generation, "consumer_type_id": type_id,
            "created_at": common.now()})
    except IntegrityError:
        raise errors.ConcurrentUpdate(CONCURRENT_MESSAGE) from None
    new_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    return Consumer(new_id, uuid, project, user, generation, type_id)


def update_owner(conn: Connection, consumer: Consumer, project: int,
                 user: int, type_id: int | None) -> None:
    """Point the consumer at another project, user or type (no bump)."""
    if (project, user, type_id) == (consumer.project_id, consumer.user_id,
                                    consumer.consumer_type_id):
        return
    conn.execute(_SET_OWNER, {"b_id": consumer.id, "project_id": project,
                              "user_id": user, "consumer_type_id": type_id,
                              "updated_at": common.now()})
    consumer.project_id, consumer.user_id = project, user
    consumer.consumer_type_id = type_id


def bump_generation(conn: Connection, consumer: Consumer) -> None:
    """Compare-and-swap the generation from the value read earlier.

    The UPDATE takes the row lock: a writer that read the same generation
    waits here, then finds the generation moved (or the row deleted) and
    gets ConcurrentUpdate (409).
    """
    result = conn.execute(_BUMP, {
        "b_id": consumer.id, "b_generation": consumer.generation,
        "generation": consumer.generation + 1, "updated_at": common.now()})
    if result.rowcount != 1:
        raise errors.ConcurrentUpdate(CONCURRENT_MESSAGE)
    consumer.generation += 1


def delete_if_unused(conn: Connection, uuids: Iterable[str]) -> None:
    """Delete those of ``uuids`` that no longer hold any allocation."""
    wanted = sorted(set(uuids))
    if not wanted:
        return
    conn.execute(_DELETE_UNUSED, {"b_uuids": wanted})


def names_of_types(conn: Connection, ids: Iterable[int | None]) -> dict[int, str]:
    """Consumer type id -> name, for the given ids."""
    wanted = sorted({i for i in ids if i is not None})
    if not wanted:
        return {}
    ct = t.consumer_types
    rows = conn.execute(sa.select(ct.c.id, ct.c.name)
                        .where(ct.c.id.in_(wanted)))
    return {id_: name for id_, name in rows}
