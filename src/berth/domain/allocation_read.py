"""Reading allocations: what a write reads first, and what GET shows.

An allocation write (``berth.domain.allocation``) starts with one
unlocked read, step 1 of its write path: ``first_read``, one statement
however much the write names (providers by uuid, classes by name, and
``consumer.PARTS``: the owners, each consumer's row and what it holds).
``DELETE /allocations/{c}`` reads its consumer's parts alone the same
way.

``for_consumer`` and ``for_provider`` answer ``GET /allocations/{c}``
and ``GET /resource_providers/{uuid}/allocations``, in upstream's order
(see the note above ``ConsumerView``).
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnySelect
from berth.db import tables as t
from berth.domain import consumer

# The first read's statements are built once (each costs more to build
# than to run): its IN lists are expanding parameters.
_RP = t.resource_providers
_RC = t.resource_classes
_PROVIDER, _CLASS = 0, 1

#: The parts of a write's first read, by the list parameter each reads:
#: providers by uuid and classes by name, and those of
#: ``consumer.PARTS``. One statement reads the parts a write needs (one
#: round trip where there were up to three, and one per consumer).
_PARTS: dict[str, list[AnySelect]] = {
    "uuids": [
        consumer.read_part(_PROVIDER, _RP.c.id, _RP.c.uuid).where(
            _RP.c.uuid.in_(sa.bindparam("uuids", expanding=True))
        )
    ],
    "names": [
        consumer.read_part(_CLASS, _RC.c.id, _RC.c.name).where(
            _RC.c.name.in_(sa.bindparam("names", expanding=True))
        )
    ],
    **consumer.PARTS,
}


@functools.cache
def _union(parts: tuple[str, ...]) -> sa.CompoundSelect[Any]:
    """The ``UNION ALL`` of the parts that read ``parts``, built once."""
    return sa.union_all(*[part for name in parts for part in _PARTS[name]])


@dataclass(slots=True)
class FirstRead:
    """What a write's first read found: provider stored uuid -> (id,
    uuid), class name -> id (of those that exist), and the consumers and
    owners (``consumer.Found``)."""

    providers: dict[str, tuple[int, str]] = field(default_factory=dict)
    classes: dict[str, int] = field(default_factory=dict)
    found: consumer.Found = field(default_factory=consumer.Found)


def first_read(conn: Connection, lists: dict[str, list[str]]) -> FirstRead:
    """What the parts of ``_PARTS`` find for the values of ``lists``,
    one statement for them all. A part whose list is empty is left out
    (it would find nothing, and SQLAlchemy would build its statement
    again on every run)."""
    read = FirstRead()
    given = {name: values for name, values in lists.items() if values}
    if not given:
        return read
    for row in conn.execute(_union(tuple(given)), given):
        if row[0] == _PROVIDER:
            read.providers[row[2]] = (row[1], row[2])
        elif row[0] == _CLASS:
            read.classes[row[2]] = row[1]
        else:
            read.found.add(row)
    return read


# The order of the reads. Upstream's two reads have no ORDER BY: its
# answers list the rows in the order the database returns them. Where
# the plan walks an index (on SQLite always; on PostgreSQL for a
# consumer's), that is a consumer's by ``consumer_id``, whose ties are in
# row id order, so the rows come as written, and a provider's by
# ``(resource_provider_id, resource_class_id, used)``. Berth orders by
# those keys, so that it lists as upstream does, on every backend.
# (Other plans, which PostgreSQL and MariaDB choose for small tables --
# a hash join, the consumers read first -- give orders that no client
# can rely on.)


@dataclass(slots=True)
class ConsumerView:
    """What ``GET /allocations/{consumer}`` shows."""

    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)
    project_id: str | None = None
    user_id: str | None = None
    generation: int | None = None
    consumer_type: str = consumer.UNKNOWN_TYPE
    last_modified: dt.datetime | None = None


def for_consumer(conn: Connection, consumer_uuid: str) -> ConsumerView:
    """The consumer's allocations by provider uuid, with its owner, in
    upstream's order: as written (providers in the order of the body that
    wrote them, and each one's classes too).

    ``project_id``/``user_id`` are None for allocations whose consumer
    record is missing (legacy data); callers show the configured
    incomplete-consumer ids for them.
    """
    a, rp, rc = t.allocations, t.resource_providers, t.resource_classes
    c, p, u = t.consumers, t.projects, t.users
    ct = t.consumer_types
    query = (
        sa.select(
            rp.c.uuid,
            rp.c.generation,
            rc.c.name,
            a.c.used,
            a.c.created_at,
            a.c.updated_at,
            p.c.external_id.label("project_id"),
            u.c.external_id.label("user_id"),
            c.c.generation.label("consumer_generation"),
            ct.c.name.label("consumer_type"),
        )
        .select_from(
            a.join(rp, rp.c.id == a.c.resource_provider_id)
            .join(rc, rc.c.id == a.c.resource_class_id)
            .outerjoin(c, c.c.uuid == a.c.consumer_id)
            .outerjoin(p, p.c.id == c.c.project_id)
            .outerjoin(u, u.c.id == c.c.user_id)
            .outerjoin(ct, ct.c.id == c.c.consumer_type_id)
        )
        .where(a.c.consumer_id == consumer_uuid)
        .order_by(a.c.id)
    )
    view = ConsumerView()
    for row in conn.execute(query):
        entry = view.allocations.setdefault(
            row.uuid, {"resources": {}, "generation": row.generation}
        )
        entry["resources"][row.name] = row.used
        view.last_modified = _later(view.last_modified, row.updated_at or row.created_at)
        view.project_id, view.user_id = row.project_id, row.user_id
        view.generation = row.consumer_generation
        view.consumer_type = row.consumer_type or consumer.UNKNOWN_TYPE
    return view


def _later(a: dt.datetime | None, b: dt.datetime | None) -> dt.datetime | None:
    if a is None or (b is not None and b > a):
        return b
    return a


def for_provider(
    conn: Connection, provider_id: int
) -> tuple[dict[str, dict[str, Any]], dt.datetime | None]:
    """Allocations on one provider by consumer uuid, each with its
    ``resources`` and ``consumer_generation`` (None for a consumer record
    that is missing), and the newest allocation timestamp.

    In upstream's order (see the note above ``ConsumerView``): rows by
    class id, amount, then as written, so classes in class-id order
    (standard ones in os-resource-classes' order, then custom ones as
    created), and each consumer where its first row falls."""
    a, rc, c = t.allocations, t.resource_classes, t.consumers
    query = (
        sa.select(
            a.c.consumer_id, rc.c.name, a.c.used, c.c.generation, a.c.created_at, a.c.updated_at
        )
        .select_from(
            a.join(rc, rc.c.id == a.c.resource_class_id).outerjoin(c, c.c.uuid == a.c.consumer_id)
        )
        .where(a.c.resource_provider_id == provider_id)
        .order_by(a.c.resource_class_id, a.c.used, a.c.id)
    )
    result: dict[str, dict[str, Any]] = {}
    newest: dt.datetime | None = None
    # A shared provider may hold thousands: unpacked, which costs a
    # fraction of reading each column by attribute.
    for uuid, class_name, used, generation, created, updated in conn.execute(query):
        entry = result.setdefault(uuid, {"resources": {}, "consumer_generation": generation})
        entry["resources"][class_name] = used
        newest = _later(newest, updated or created)
    return result, newest
