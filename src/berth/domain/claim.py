"""Claims: what a write of allocations asks of each provider, checked as
upstream checks it.

A claim is one consumer's amount of one resource class on one provider.
Before ``berth.domain.allocation`` writes new claims, :func:`check` holds
each against the provider's inventory of its class: the inventory must
exist, the amount must respect ``min_unit``, ``max_unit`` and
``step_size``, and, with the claims before it, fit beside what the
provider's other consumers hold. Every failure is a CapacityExceeded
(409) with upstream's bare reason, raised in upstream's order.

The claims' providers are locked first (:func:`lock_providers`, step 4
of the write path in ``berth.domain.allocation``), then checked, then
written (:func:`insert`).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes, events
from berth.db import tables as t
from berth.domain import capacity, common, errors


@dataclass(slots=True)
class Claim:
    """One amount of one class on one provider, for one consumer."""

    provider_id: int
    provider_uuid: str
    class_name: str
    amount: int
    consumer_uuid: str
    #: Filled in by :func:`resolve_classes`.
    class_id: int = 0


def resolve_classes(claims: list[Claim], ids: dict[str, int]) -> None:
    """Set each claim's ``class_id`` from ``ids`` (class name -> id, of
    those that exist); UnknownResourceClass (400) for a class that does
    not exist (the first by name)."""
    names = {c.class_name for c in claims}
    for name in sorted(names):
        if name not in ids:
            raise errors.UnknownResourceClass("No such resource class %s." % name)
    for claim in claims:
        claim.class_id = ids[claim.class_name]


def check(conn: Connection, claims: list[Claim]) -> None:
    """Upstream's capacity rules, in upstream's order, for new claims
    (the consumers' old allocations already gone, the providers locked).

    Raises CapacityExceeded.
    """
    inventories, used = _capacity(
        conn, {c.provider_id for c in claims}, {c.class_id for c in claims}
    )
    with_inventory = {rp for rp, _ in inventories}
    missing = sorted({c.provider_uuid for c in claims if c.provider_id not in with_inventory})
    if missing:
        names = sorted({(c.class_id, c.class_name) for c in claims})
        raise _invalid(", ".join(n for _, n in names), ", ".join(missing))
    _verify(claims, inventories, used)


_INV = t.inventories
_ALLOC = t.allocations
# Built once (every claim runs it): each inventory with what is allocated
# of it, in one statement.
_CAPACITY = sa.select(
    _INV.c.resource_provider_id,
    _INV.c.resource_class_id,
    _INV.c.total,
    _INV.c.reserved,
    _INV.c.min_unit,
    _INV.c.max_unit,
    _INV.c.step_size,
    _INV.c.allocation_ratio,
    sa.select(common.sum_used(_ALLOC))
    .where(
        _ALLOC.c.resource_provider_id == _INV.c.resource_provider_id,
        _ALLOC.c.resource_class_id == _INV.c.resource_class_id,
    )
    .scalar_subquery(),
).where(
    _INV.c.resource_provider_id.in_(sa.bindparam("rps", expanding=True)),
    _INV.c.resource_class_id.in_(sa.bindparam("rcs", expanding=True)),
)


def _capacity(
    conn: Connection, provider_ids: set[int], class_ids: set[int]
) -> tuple[dict[tuple[int, int], capacity.Inventory], dict[tuple[int, int], int]]:
    """(provider id, class id) -> inventory, of those that exist, and ->
    the amount allocated of it (rows unpacked: reading a column by
    attribute costs several times as much)."""
    inventories: dict[tuple[int, int], capacity.Inventory] = {}
    used: dict[tuple[int, int], int] = {}
    for (
        provider_id,
        class_id,
        total,
        reserved,
        min_unit,
        max_unit,
        step_size,
        ratio,
        allocated,
    ) in conn.execute(_CAPACITY, {"rps": sorted(provider_ids), "rcs": sorted(class_ids)}):
        key = (provider_id, class_id)
        inventories[key] = capacity.Inventory(total, reserved, min_unit, max_unit, step_size, ratio)
        used[key] = int(allocated or 0)
    return inventories, used


def _invalid(class_name: str, provider: str) -> errors.CapacityExceeded:
    return errors.CapacityExceeded(
        "Inventory for '%s' on resource provider '%s' invalid." % (class_name, provider)
    )


def _unable(class_name: str, provider: str, why: str) -> errors.CapacityExceeded:
    return errors.CapacityExceeded(
        "Unable to create allocation for '%s' on resource provider '%s'. "
        "The requested amount would %s." % (class_name, provider, why)
    )


def _verify(
    claims: list[Claim],
    inventories: dict[tuple[int, int], capacity.Inventory],
    used: dict[tuple[int, int], int],
) -> None:
    """Each claim against its inventory: present, within the units, and
    (with the claims before it and ``used``) within capacity."""
    wanted: dict[tuple[int, int], int] = defaultdict(int)
    for claim in claims:
        key = (claim.provider_id, claim.class_id)
        wanted[key] += claim.amount
        inv = inventories.get(key)
        if inv is None:
            raise _invalid(claim.class_name, claim.provider_uuid)
        if capacity.unit_problem(inv, claim.amount) is not None:
            raise _unable(claim.class_name, claim.provider_uuid, "violate inventory constraints")
        if used.get(key, 0) + wanted[key] > inv.capacity:
            raise _unable(claim.class_name, claim.provider_uuid, "exceed the capacity")


# Locking the providers a write claims on, and writing its claims.
_PROVIDERS = t.resource_providers
_INSERT_ALLOCATIONS = t.allocations.insert()
#: The 409's message when a provider a write claims on was deleted
#: under it (upstream's wording for its lost generation race).
PROVIDER_DELETED_MESSAGE = (
    "Inventory and/or allocations changed while attempting to allocate: "
    "Another thread concurrently updated the resource provider data. "
    "Please retry your update"
)


# The generation moves without a compare-and-swap: the UPDATE itself
# takes the row lock, so what it adds to is the latest committed value.
_BUMP = (
    _PROVIDERS.update()
    .where(_PROVIDERS.c.id == sa.bindparam("rp"))
    .values(generation=_PROVIDERS.c.generation + 1, updated_at=sa.bindparam("stamp"))
)
_GENERATIONS = sa.select(_PROVIDERS.c.id, _PROVIDERS.c.generation).where(
    _PROVIDERS.c.id.in_(sa.bindparam("ids", expanding=True))
)
_BUMP_ALL = (
    _PROVIDERS.update()
    .values(generation=_PROVIDERS.c.generation + 1, updated_at=sa.bindparam("stamp"))
    .returning(_PROVIDERS.c.id, _PROVIDERS.c.generation)
)
# SQLite: one writer holds the whole database (``BEGIN IMMEDIATE``), so
# the order rows are written in cannot deadlock anything.
_BUMP_ALL_SQLITE = _BUMP_ALL.where(_PROVIDERS.c.id.in_(sa.bindparam("ids", expanding=True)))
# PostgreSQL: the sub-query takes the row locks in id order (its rows are
# locked as they leave the sort), as the one UPDATE per provider did.
_LOCKED = _PROVIDERS.alias("locked")
# The ids go as one array parameter, so the statement's text is the same
# for any number of providers: it is sent as driver SQL, which runs thin
# (``berth.db.connection``) where SQLAlchemy's path for an UPDATE cost
# more than the database's answer.
_BUMP_ALL_ORDERED = _BUMP_ALL.where(
    _PROVIDERS.c.id.in_(
        sa.select(_LOCKED.c.id)
        .where(_LOCKED.c.id == sa.any_(sa.bindparam("ids", type_=sa.ARRAY(sa.Integer))))
        .order_by(_LOCKED.c.id)
        .with_for_update()
    )
)


@functools.lru_cache(maxsize=4)
def _driver_sql(statement: sa.Update, dialect: sa.Dialect) -> tuple[str, dict[str, object]]:
    """``statement``'s text for ``dialect`` and the values it binds itself
    (the ``+ 1``)."""
    compiled = statement.compile(dialect=dialect)
    return compiled.string, {k: v for k, v in compiled.params.items() if v is not None}


def lock_providers(conn: Connection, provider_ids: set[int]) -> None:
    """Row-lock the providers in id order and bump their generations.

    The lock is taken before any usage is read, so capacity checks on one
    provider are serialized. A provider deleted since the write read it
    (the lock finds no row to bump) raises ClaimedProviderDeleted.
    """
    if not provider_ids:
        return
    stamp = common.now()
    ids = sorted(provider_ids)
    # The change feed's allocation events carry the new generations: one
    # UPDATE returns them all where the database can (SQLite, PostgreSQL);
    # else one UPDATE per provider, in id order, and one read after the
    # bumps (MySQL, MariaDB).
    name = conn.dialect.name
    if name in ("sqlite", "postgresql"):
        if name == "sqlite":
            bumped = conn.execute(_BUMP_ALL_SQLITE, {"ids": ids, "stamp": stamp}).all()
        else:
            text, fixed = _driver_sql(_BUMP_ALL_ORDERED, conn.dialect)
            bumped = conn.exec_driver_sql(text, {**fixed, "ids": ids, "stamp": stamp}).all()
        if len(bumped) != len(ids):
            raise errors.ClaimedProviderDeleted(PROVIDER_DELETED_MESSAGE)
    else:
        for provider_id in ids:
            if conn.execute(_BUMP, {"rp": provider_id, "stamp": stamp}).rowcount != 1:
                raise errors.ClaimedProviderDeleted(PROVIDER_DELETED_MESSAGE)
        bumped = conn.execute(_GENERATIONS, {"ids": ids}).all()
    for provider_id, generation in bumped:
        events.note_generation(conn, provider_id, int(generation))
    changes.note(conn, changes.USAGE, provider_ids)


def insert(conn: Connection, claims: list[Claim]) -> None:
    """Write ``claims`` as allocation rows (checked by :func:`check`): one
    statement (on PostgreSQL a claim's few rows go as one multi-row
    INSERT, ``berth.db.connection.ROWS_AT_ONCE``)."""
    if not claims:
        return
    stamp = common.now()
    conn.execute(
        _INSERT_ALLOCATIONS,
        [
            {
                "resource_provider_id": c.provider_id,
                "consumer_id": c.consumer_uuid,
                "resource_class_id": c.class_id,
                "used": c.amount,
                "created_at": stamp,
            }
            for c in claims
        ],
    )
