"""Inventories: what each provider offers, per resource class.

The HTTP-facing operations (``add_inventory``, ``update_inventory``,
``replace_inventories``, ``delete_inventory``, ``delete_inventories``) check
the caller's provider generation, validate, write and bump the generation in
the caller's transaction, raising errors worded as upstream words them.

``set_inventories`` and ``check_in_use`` are the building blocks without
generation handling, for callers such as the reshaper that manage the
generation themselves.

What they all read first (the provider's inventories with the amounts
allocated), and what GET shows, is ``berth.domain.inventory_read``.

As upstream does, an inventory may shrink below what is already allocated
(the provider is then over-committed and a warning is logged); only
*removing* a class that still has allocations is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import tables as t
from berth.domain import change, common, errors, inventory_read
from berth.domain.capacity import MAX_CAPACITY, Inventory

LOG = logging.getLogger(__name__)


def make_inventory(data: Mapping[str, Any]) -> Inventory:
    """An Inventory from validated request fields, defaults filled in.

    BadRequest when its capacity is beyond what Berth computes exactly
    (``capacity.MAX_CAPACITY``): stored, such a record would make every
    later candidate query fail.
    """
    inv = Inventory(**{k: data[k] for k in inventory_read.FIELDS if k in data})
    if inv.allocation_ratio == 0:
        # -0.0 would read back as 0.0 from MySQL and as -0.0 elsewhere.
        inv = inv._replace(allocation_ratio=0.0)
    amount = (inv.total - inv.reserved) * inv.allocation_ratio
    if not -MAX_CAPACITY <= amount <= MAX_CAPACITY:
        raise errors.BadRequest(
            "Invalid inventory: its capacity, (total - reserved) * "
            "allocation_ratio = %g, is beyond %d, the largest Berth "
            "computes with exactly." % (amount, MAX_CAPACITY)
        )
    return inv


def capacity_problem(inv: Inventory, *, reserved_can_be_total: bool) -> str | None:
    """Why ``inv`` offers no usable capacity (None when it is fine).

    Before microversion 1.26 an inventory must leave capacity above zero;
    from 1.26 zero is allowed (reserved may equal total).
    """
    if inv.capacity < 0 or (inv.capacity == 0 and not reserved_can_be_total):
        if reserved_can_be_total:
            return "The reserved value is greater than total."
        return "The reserved value is greater than or equal to total."
    return None


def _invalid(rc: str, uuid: str, problem: str) -> str:
    return "Invalid inventory for '%s' on resource provider '%s'. %s" % (rc, uuid, problem)


def _in_use(classes: list[str], uuid: str) -> str:
    # Nova matches this wording with a regex: never change it. Classes
    # come in class id order (standard classes first), as upstream lists.
    return "Inventory for '%s' on resource provider '%s' in use." % (", ".join(classes), uuid)


def _values(inv: Inventory) -> dict[str, Any]:
    return {f: getattr(inv, f) for f in inventory_read.FIELDS}


def set_inventories(
    conn: Connection,
    provider_id: int,
    inventories: Mapping[str, Inventory],
    *,
    check_in_use: bool = True,
    before: inventory_read.Current | None = None,
) -> dict[str, Inventory]:
    """Replace the provider's whole inventory with ``inventories``;
    return the inventories it replaced, by class name (``before``, when
    the caller has just read them with ``inventory_read.current``, else
    read here).

    No generation handling: callers bump it. Raises NotFound naming the
    first unknown class ("No such resource class X."), and InventoryInUse
    when ``check_in_use`` and a removed class still has allocations.
    """
    if before is None:
        before = inventory_read.current(conn, provider_id)
    ids, unknown = inventory_read.known_classes(conn, list(inventories), before)
    if unknown:
        raise errors.NotFound("No such resource class %s." % unknown[0])
    inv = t.inventories
    existing = set(before)
    wanted = set(ids.values())
    removed = sorted(existing - wanted)
    if removed:
        if check_in_use:
            _refuse_in_use(conn, provider_id, inventory_read.used(before, removed))
        conn.execute(
            inv.delete().where(
                inv.c.resource_provider_id == provider_id, inv.c.resource_class_id.in_(removed)
            )
        )
    stamp = common.now()
    added = [
        {
            "resource_provider_id": provider_id,
            "resource_class_id": ids[n],
            "created_at": stamp,
            **_values(i),
        }
        for n, i in inventories.items()
        if ids[n] not in existing
    ]
    if added:
        conn.execute(inv.insert(), added)
    kept = [
        {"b_rp": provider_id, "b_rc": ids[n], "updated_at": stamp, **_values(i)}
        for n, i in inventories.items()
        if ids[n] in existing
    ]
    if kept:  # one statement for them all
        conn.execute(_UPDATE, kept)
    updated = {ids[n]: i for n, i in inventories.items() if ids[n] in existing}
    _warn_exceeded(conn, provider_id, updated, inventory_read.used(before, updated))
    return inventory_read.by_name(before)


# Built once: every inventory write of a class already there runs it.
_UPDATE = t.inventories.update().where(
    t.inventories.c.resource_provider_id == sa.bindparam("b_rp"),
    t.inventories.c.resource_class_id == sa.bindparam("b_rc"),
)


def record(
    conn: Connection,
    provider: common.WrittenProvider,
    old: Mapping[str, Inventory],
    new: Mapping[str, Inventory],
    generation: int,
) -> None:
    """Record the change feed's event of the provider's inventories
    replaced (``provider`` read with its root, at its old generation)."""
    change.set_event(
        conn,
        change.INVENTORIES,
        provider,
        (int(provider.generation), change.inventories_value(old)),
        (generation, change.inventories_value(new)),
    )


def _provider_uuid(conn: Connection, provider_id: int) -> str:
    rp = t.resource_providers
    return str(conn.execute(sa.select(rp.c.uuid).where(rp.c.id == provider_id)).scalar_one())


def _refuse_in_use(conn: Connection, provider_id: int, used: Mapping[int, int]) -> None:
    """InventoryInUse when ``used`` (class id -> amount allocated, of
    the classes to remove that have allocations) names any."""
    if used:
        names = common.resource_class_names(conn)
        raise errors.InventoryInUse(
            _in_use([names[c] for c in sorted(used)], _provider_uuid(conn, provider_id))
        )


def check_in_use(conn: Connection, provider_id: int) -> None:
    """Raise InventoryInUse when an allocated class has no inventory.

    For callers that change inventory and allocations together (the
    reshaper) and only want the end state checked.
    """
    inv = t.inventories
    have = {
        cid
        for (cid,) in conn.execute(
            sa.select(inv.c.resource_class_id).where(inv.c.resource_provider_id == provider_id)
        )
    }
    used = inventory_read.allocated(conn, provider_id)
    _refuse_in_use(
        conn, provider_id, {cid: amount for cid, amount in used.items() if cid not in have}
    )


def _warn_exceeded(
    conn: Connection, provider_id: int, updated: dict[int, Inventory], used: Mapping[int, int]
) -> None:
    """Log a warning when ``used`` (class id -> amount allocated) of an
    ``updated`` class now exceeds its capacity."""
    over = [cid for cid, amount in used.items() if amount > updated[cid].capacity]
    if over:
        names = common.resource_class_names(conn)
        LOG.warning(
            "Resource provider %s is now over capacity for %s: "
            "existing allocations exceed the new inventory.",
            _provider_uuid(conn, provider_id),
            ", ".join(sorted(names[c] for c in over)),
        )


def _check_generation(provider: common.WrittenProvider, generation: int) -> None:
    if provider.generation != generation:
        raise errors.ConcurrentUpdate("resource provider generation conflict")


def _check_capacity(
    uuid: str, items: Mapping[str, Inventory], reserved_can_be_total: bool, prefix: str
) -> None:
    for rc, inv in items.items():
        problem = capacity_problem(inv, reserved_can_be_total=reserved_can_be_total)
        if problem:
            raise errors.BadRequest("%s %s: %s" % (prefix, uuid, _invalid(rc, uuid, problem)))


# Built once: every POST of one class runs it.
_INSERT_ONE = t.inventories.insert()


def add_inventory(
    conn: Connection, uuid: str, rc: str, inv: Inventory, *, reserved_can_be_total: bool
) -> int:
    """Add one class to the provider's inventory; return the generation.

    NotFound (no provider), BadRequest (capacity, unknown class),
    ConcurrentUpdate (class already present, or a concurrent change).
    """
    provider, before = inventory_read.provider_current(conn, uuid)
    prefix = "Unable to create inventory for resource provider"
    _check_capacity(uuid, {rc: inv}, reserved_can_be_total, prefix)
    ids, unknown = inventory_read.known_classes(conn, [rc], before)
    if unknown:
        raise errors.BadRequest("%s %s: No such resource class %s." % (prefix, uuid, rc))
    if ids[rc] in before:
        raise errors.ConcurrentUpdate(
            "Update conflict: Inventory for '%s' on resource provider '%s' "
            "already exists." % (rc, uuid)
        )
    conn.execute(
        _INSERT_ONE,
        {
            "resource_provider_id": provider.id,
            "resource_class_id": ids[rc],
            "created_at": common.now(),
            **_values(inv),
        },
    )
    generation = common.bump_provider_generation(conn, provider.id, provider.generation)
    old = inventory_read.by_name(before)
    record(conn, provider, old, {**old, rc: inv}, generation)
    return generation


def update_inventory(
    conn: Connection,
    uuid: str,
    rc: str,
    inv: Inventory,
    generation: int,
    *,
    reserved_can_be_total: bool,
) -> int:
    """Change one class of the provider's inventory; return the generation.

    NotFound (no provider), ConcurrentUpdate (stale generation),
    BadRequest (capacity, class not in the inventory).
    """
    provider, before = inventory_read.provider_current(conn, uuid)
    _check_generation(provider, generation)
    _check_capacity(
        uuid, {rc: inv}, reserved_can_be_total, "Unable to update inventory for resource provider"
    )
    prefix = "No inventory record with resource class for resource provider %s: " % uuid
    ids, unknown = inventory_read.known_classes(conn, [rc], before)
    if unknown:
        raise errors.BadRequest(prefix + "No such resource class %s." % rc)
    result = None
    if ids[rc] in before:
        result = conn.execute(
            _UPDATE,
            {"b_rp": provider.id, "b_rc": ids[rc], "updated_at": common.now(), **_values(inv)},
        )
    if result is None or result.rowcount != 1:
        raise errors.BadRequest(prefix + "No inventory of class %s found." % rc)
    _warn_exceeded(conn, provider.id, {ids[rc]: inv}, inventory_read.used(before, [ids[rc]]))
    new_generation = common.bump_provider_generation(conn, provider.id, provider.generation)
    old = inventory_read.by_name(before)
    record(conn, provider, old, {**old, rc: inv}, new_generation)
    return new_generation


def replace_inventories(
    conn: Connection,
    uuid: str,
    inventories: Mapping[str, Inventory],
    generation: int,
    *,
    reserved_can_be_total: bool,
) -> int:
    """Replace the provider's whole inventory; return the new generation.

    NotFound (no provider), ConcurrentUpdate (stale generation),
    BadRequest (capacity, unknown class), InventoryInUse (a removed class
    has allocations).
    """
    provider, before = inventory_read.provider_current(conn, uuid)
    _check_generation(provider, generation)
    _check_capacity(
        uuid, inventories, reserved_can_be_total, "Unable to update inventory for resource provider"
    )
    try:
        old = set_inventories(conn, provider.id, inventories, before=before)
    except errors.InventoryInUse as exc:
        raise errors.InventoryInUse("update conflict: " + exc.message) from None
    except errors.NotFound as exc:
        raise errors.BadRequest(
            "Unknown resource class in inventory for resource provider %s: %s" % (uuid, exc.message)
        ) from None
    new_generation = common.bump_provider_generation(conn, provider.id, provider.generation)
    record(conn, provider, old, inventories, new_generation)
    return new_generation


def delete_inventories(conn: Connection, uuid: str) -> int:
    """Remove every inventory of the provider; return the generation.

    NotFound (no provider), InventoryInUse (a class has allocations).
    """
    provider, before = inventory_read.provider_current(conn, uuid)
    old = set_inventories(conn, provider.id, {}, before=before)
    generation = common.bump_provider_generation(conn, provider.id, provider.generation)
    record(conn, provider, old, {}, generation)
    return generation


def delete_inventory(conn: Connection, uuid: str, rc: str) -> int:
    """Remove one class from the provider's inventory; return generation.

    NotFound (no provider, or no such inventory), ConcurrentUpdate (the
    class has allocations: upstream reports it with that code).
    """
    provider, before = inventory_read.provider_current(conn, uuid)
    prefix = "No inventory of class %s found for delete: " % rc
    ids, unknown = inventory_read.known_classes(conn, [rc], before)
    if unknown:
        raise errors.NotFound(prefix + "No such resource class %s." % rc)
    try:
        # Allocations of a class with no inventory left (a stranded
        # one) refuse it too: read them then.
        _refuse_in_use(
            conn,
            provider.id,
            inventory_read.used(before, [ids[rc]])
            if ids[rc] in before
            else inventory_read.allocated(conn, provider.id, [ids[rc]]),
        )
    except errors.InventoryInUse as exc:
        raise errors.ConcurrentUpdate(
            "Unable to delete inventory of class %s: %s" % (rc, exc.message)
        ) from None
    it = t.inventories
    result = None
    if ids[rc] in before:
        result = conn.execute(
            it.delete().where(
                it.c.resource_provider_id == provider.id, it.c.resource_class_id == ids[rc]
            )
        )
    if result is None or result.rowcount != 1:
        raise errors.NotFound(prefix + "No inventory of class %s found for delete" % rc)
    generation = common.bump_provider_generation(conn, provider.id, provider.generation)
    old = inventory_read.by_name(before)
    record(conn, provider, old, {name: inv for name, inv in old.items() if name != rc}, generation)
    return generation
