"""Consumers: who holds allocations, and the consumer generation.

A consumer row exists exactly while the consumer has allocations: it is
created by the first write that gives it some and deleted by the write
that takes the last away. Its generation moves by compare-and-swap on
every write that touches the consumer, so of two writers that read the
same generation only one can win -- also when the write empties it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from berth.db import AnySelect
from berth.db import tables as t
from berth.domain import common, errors

#: The name shown for a consumer that has no type (before 1.38 writes).
UNKNOWN_TYPE = "unknown"

CONCURRENT_MESSAGE = (
    "Inventory and/or allocations changed while "
    "attempting to allocate: Another thread concurrently "
    "updated the data. Please retry your update"
)


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
#: Whose usages a consumer's allocations count in: (projects.id,
#: users.id, consumer_types.id or None).
Owner = tuple[int, int, "int | None"]

_C = t.consumers
_GET = sa.select(
    _C.c.id, _C.c.uuid, _C.c.project_id, _C.c.user_id, _C.c.generation, _C.c.consumer_type_id
).where(_C.c.uuid == sa.bindparam("b_uuid"))
_GET_LOCKED = _GET.with_for_update()
_INSERT = _C.insert()
_BUMP = _C.update().where(
    _C.c.id == sa.bindparam("b_id"), _C.c.generation == sa.bindparam("b_generation")
)
_DELETE_UNCHANGED = _C.delete().where(
    _C.c.id == sa.bindparam("b_id"), _C.c.generation == sa.bindparam("b_generation")
)
_SET_OWNER = _C.update().where(_C.c.id == sa.bindparam("b_id"))
_DELETE_UNUSED = _C.delete().where(
    _C.c.uuid.in_(sa.bindparam("b_uuids", expanding=True)),
    ~sa.exists(sa.select(t.allocations.c.id).where(t.allocations.c.consumer_id == _C.c.uuid)),
)


def get(conn: Connection, uuid: str, *, lock: bool = False) -> Consumer | None:
    """The consumer ``uuid``, or None; ``lock`` takes its row lock."""
    row = conn.execute(_GET_LOCKED if lock else _GET, {"b_uuid": uuid}).first()
    if row is None:
        return None
    return Consumer(
        row.id, row.uuid, row.project_id, row.user_id, row.generation, row.consumer_type_id
    )


#: The kinds of row a write's first read returns besides providers (0)
#: and classes (1) (``berth.domain.allocation_read``): a project, user or
#: consumer type by its external id or name, a consumer, and one
#: allocation a consumer holds.
PROJECT, USER, TYPE, CONSUMER, HELD = 2, 3, 4, 5, 6


def read_part(
    kind: int,
    id_: sa.ColumnElement[int],
    key: sa.ColumnElement[str],
    ids: tuple[sa.ColumnElement[int], ...] = (),
    names: tuple[sa.ColumnElement[str], ...] = (),
) -> AnySelect:
    """One part of a write's first read (a ``UNION ALL``: one round trip
    for all it needs): rows of ``kind``, an id, a key, up to four more
    ids and three names; what a part leaves out is a typed NULL
    (PostgreSQL settles the union's column types part by part)."""
    no_id = sa.cast(sa.null(), sa.Integer)
    no_name = sa.cast(sa.null(), sa.String)
    more = [*ids, *[no_id] * (4 - len(ids))]
    text = [*names, *[no_name] * (3 - len(names))]
    return sa.select(
        sa.literal_column(str(kind)).label("kind"),
        id_.label("id"),
        key.label("key"),
        *[c.label("n%d" % i) for i, c in enumerate(more)],
        *[c.label("s%d" % i) for i, c in enumerate(text)],
    )


def _named(kind: int, key: sa.Column[str], param: str) -> list[AnySelect]:
    return [
        read_part(kind, key.table.c.id, key).where(key.in_(sa.bindparam(param, expanding=True)))
    ]


_P, _U, _T = t.projects, t.users, t.consumer_types
_A, _RP, _RC = t.allocations, t.resource_providers, t.resource_classes
#: The parts of a write's first read about its consumers, by the list
#: parameter each reads: the owners the request names (ids by external
#: id or name), and each consumer's row, owner and allocations.
PARTS: dict[str, list[AnySelect]] = {
    "projects": _named(PROJECT, _P.c.external_id, "projects"),
    "users": _named(USER, _U.c.external_id, "users"),
    "types": _named(TYPE, _T.c.name, "types"),
    "consumers": [
        read_part(
            CONSUMER,
            _C.c.id,
            _C.c.uuid,
            (_C.c.project_id, _C.c.user_id, _C.c.generation, _C.c.consumer_type_id),
            (_P.c.external_id, _U.c.external_id, _T.c.name),
        )
        .select_from(
            _C.join(_P, _P.c.id == _C.c.project_id)
            .join(_U, _U.c.id == _C.c.user_id)
            .outerjoin(_T, _T.c.id == _C.c.consumer_type_id)
        )
        .where(_C.c.uuid.in_(sa.bindparam("consumers", expanding=True))),
        read_part(
            HELD,
            _A.c.resource_provider_id,
            _A.c.consumer_id,
            (_A.c.resource_class_id, _A.c.used),
            (_RP.c.uuid, _RC.c.name),
        )
        .select_from(
            _A.join(_RP, _RP.c.id == _A.c.resource_provider_id).join(
                _RC, _RC.c.id == _A.c.resource_class_id
            )
        )
        .where(_A.c.consumer_id.in_(sa.bindparam("consumers", expanding=True))),
    ],
}


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


@dataclass(slots=True)
class Found:
    """What a write's first read found of its consumers and owners (its
    rows of the kinds above, each given to :meth:`add`)."""

    #: (PROJECT, USER or TYPE, external id or name) -> id.
    ids: dict[tuple[int, str], int] = field(default_factory=dict)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    #: Consumer uuid -> its owner's (project, user, type name).
    owners: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    #: Consumer uuid -> its allocations, each (provider id, provider
    #: uuid, class id, class name, amount).
    held: dict[str, list[tuple[int, str, int, str, int]]] = field(default_factory=dict)

    def add(self, row: Any) -> None:
        """Take one row (kind, id, key, n0..n3, s0..s2) of the read."""
        kind, id_, key, n0, n1, n2, n3, s0, s1, s2 = row
        if kind == HELD:
            self.held.setdefault(key, []).append((int(id_), s0, int(n0), s1, int(n1)))
        elif kind == CONSUMER:
            self.consumers[key] = Consumer(int(id_), key, int(n0), int(n1), int(n2), n3)
            self.owners[key] = (s0, s1, s2)
        else:
            self.ids[(kind, key)] = int(id_)

    def lookup(self, uuid: str, project: str, user: str, type_name: str | None) -> Lookup:
        """The Lookup of consumer ``uuid`` for a write naming owner
        ``project``, ``user`` and ``type_name`` (external ids); take
        missing owner rows with :func:`project_id` and the like."""
        return Lookup(
            self.ids.get((PROJECT, project)),
            self.ids.get((USER, user)),
            None if type_name is None else self.ids.get((TYPE, type_name)),
            self.consumers.get(uuid),
            uuid in self.held,
        )


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
        "consumer generation conflict - expected %s but got %s" % (shown, got)
    )


def create(
    conn: Connection, uuid: str, project: int, user: int, type_id: int | None, generation: int = 0
) -> Consumer:
    """Insert a consumer; a concurrent insert of the same uuid is a
    ConcurrentUpdate (409), never an integrity error.

    No savepoint: the 409 ends the caller's transaction (nothing catches
    it inside one), and on PostgreSQL the failed insert has already
    aborted it."""
    try:
        result = conn.execute(
            _INSERT,
            {
                "uuid": uuid,
                "project_id": project,
                "user_id": user,
                "generation": generation,
                "consumer_type_id": type_id,
                "created_at": common.now(),
            },
        )
    except IntegrityError:
        raise errors.ConcurrentUpdate(CONCURRENT_MESSAGE) from None
    new_id = common.inserted_id(result)
    return Consumer(new_id, uuid, project, user, generation, type_id)


def create_all(conn: Connection, new: list[tuple[str, Owner]]) -> None:
    """Insert the consumers ``new`` (uuid, and project, user and type
    ids), each at generation 1, in the order given, in one statement
    (``executemany``); a concurrent insert of one of them is a
    ConcurrentUpdate (409), as in :func:`create`."""
    if not new:
        return
    stamp = common.now()
    rows = [
        {
            "uuid": uuid,
            "project_id": project,
            "user_id": user,
            "generation": 1,
            "consumer_type_id": type_id,
            "created_at": stamp,
        }
        for uuid, (project, user, type_id) in new
    ]
    try:
        # As a list, never a dict: one row then needs no RETURNING of its
        # id, and on PostgreSQL a few rows go as one statement
        # (berth.db.connection.ROWS_AT_ONCE).
        conn.execute(_INSERT, rows)
    except IntegrityError:
        raise errors.ConcurrentUpdate(CONCURRENT_MESSAGE) from None


def update_owner(
    conn: Connection, consumer: Consumer, project: int, user: int, type_id: int | None
) -> None:
    """Point the consumer at another project, user or type (no bump)."""
    if (project, user, type_id) == (
        consumer.project_id,
        consumer.user_id,
        consumer.consumer_type_id,
    ):
        return
    conn.execute(
        _SET_OWNER,
        {
            "b_id": consumer.id,
            "project_id": project,
            "user_id": user,
            "consumer_type_id": type_id,
            "updated_at": common.now(),
        },
    )
    consumer.project_id, consumer.user_id = project, user
    consumer.consumer_type_id = type_id


def bump_generations(conn: Connection, taken: list[Consumer]) -> None:
    """Compare-and-swap each consumer's generation from the value read
    earlier, in the order given (the lock order), one statement for all
    of them (``executemany``: one round trip on PostgreSQL).

    Each UPDATE takes its row lock: a writer that read the same
    generation waits here, then finds the generation moved (or the row
    deleted) and gets ConcurrentUpdate (409). The rows changed are
    counted over all of them, so any one lost is the 409.
    """
    if not taken:
        return
    stamp = common.now()
    params = [
        {
            "b_id": c.id,
            "b_generation": c.generation,
            "generation": c.generation + 1,
            "updated_at": stamp,
        }
        for c in taken
    ]
    # One dict runs as a single statement (the claim's path).
    result = conn.execute(_BUMP, params if len(params) > 1 else params[0])
    if result.rowcount != len(params):
        raise errors.ConcurrentUpdate(CONCURRENT_MESSAGE)
    for c in taken:
        c.generation += 1


def delete_unchanged(conn: Connection, consumer: Consumer) -> bool:
    """Delete the consumer if its generation is still the one read
    (``consumer.generation``); whether it was. The DELETE takes the row
    lock, as :func:`bump_generations`' UPDATE does: a writer that holds
    it is waited for, and then the row it left is compared."""
    return bool(
        conn.execute(
            _DELETE_UNCHANGED, {"b_id": consumer.id, "b_generation": consumer.generation}
        ).rowcount
        == 1
    )


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
    rows = conn.execute(sa.select(ct.c.id, ct.c.name).where(ct.c.id.in_(wanted)))
    return {id_: name for id_, name in rows}
