"""The reshaper: replace several providers' inventories and several
consumers' allocations in one transaction.

Inventories cannot simply be replaced first (a class that still has
allocations cannot be removed) nor last (allocations cannot be made
against classes that do not exist yet). So, as upstream does, in three
steps inside the caller's transaction:

1. *interim* inventory: for each provider with a non-empty new inventory,
   the union of its current and its new records (new records win);
2. the consumers' allocations are replaced, checked against that interim
   inventory -- which holds the final record for every class that stays;
3. the *final* inventory is set; a class removed while still allocated is
   refused (InventoryInUse).

Any error propagates and the caller's rollback undoes all of it.
Provider generations move exactly as upstream moves them: +1 for each
inventory step that runs and +1 where the allocation write bumps them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnyRow, events
from berth.db import tables as t
from berth.domain import allocation, change, common, errors, inventory, inventory_read
from berth.domain.allocation import ConsumerAllocations
from berth.domain.capacity import Inventory

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProviderInventory:
    """The final inventory wanted for one provider, and the generation the
    caller last saw."""

    generation: int
    inventories: Mapping[str, Inventory]


@dataclass(slots=True)
class _Target:
    id: int
    uuid: str
    root_uuid: str
    #: The generation when locked, and its inventories then (read by
    #: the first inventory step that runs).
    generation: int
    wanted: ProviderInventory
    old: dict[str, Inventory] | None = None


def _root_uuids(conn: Connection, rows: Iterable[AnyRow]) -> dict[int, str]:
    """Root provider id -> uuid for the locked ``rows`` (the change
    feed's events name the tree): no statement when each root is among
    them, else one plain read (a lock on a root outside the id order
    every writer locks in could deadlock)."""
    rows = list(rows)
    found = {r.id: r.uuid for r in rows}
    missing = sorted({r.root_provider_id for r in rows} - set(found))
    if missing:
        rp = t.resource_providers
        found.update(conn.execute(sa.select(rp.c.id, rp.c.uuid).where(rp.c.id.in_(missing))))
    return found


def _lock_targets(conn: Connection, wanted: Mapping[str, ProviderInventory]) -> list[_Target]:
    """Resolve and row-lock the providers (in id order, like every other
    writer) and check the generations the caller gave."""
    rp = t.resource_providers
    rows = {
        r.uuid: r
        for r in conn.execute(
            sa.select(rp.c.id, rp.c.uuid, rp.c.generation, rp.c.root_provider_id)
            .where(rp.c.uuid.in_(sorted(wanted)))
            .order_by(rp.c.id)
            .with_for_update()
        )
    }
    roots = _root_uuids(conn, rows.values())
    targets = []
    for uuid, inv in wanted.items():
        row = rows.get(uuid)
        if row is None:
            raise errors.ProviderNotFoundInBody(
                "Resource provider %s in inventories not found: No resource "
                "provider with uuid %s found" % (uuid, uuid)
            )
        if row.generation != inv.generation:
            raise errors.ConcurrentUpdate(
                "resource provider generation conflict for provider %s: "
                "actual: %s, given: %s" % (uuid, row.generation, inv.generation)
            )
        targets.append(_Target(row.id, uuid, roots[row.root_provider_id], int(row.generation), inv))
    return targets


def _validate(conn: Connection, targets: list[_Target]) -> None:
    names = {rc for tg in targets for rc in tg.wanted.inventories}
    known = common.resource_class_ids(conn, names)
    for tg in targets:
        for rc, inv in tg.wanted.inventories.items():
            if rc not in known:
                raise errors.UnknownResourceClass(
                    "malformed reshaper data: No such resource class %s." % rc
                )
            if inv.capacity < 0:
                raise errors.CapacityExceeded(
                    "Unable to allocate inventory: Invalid inventory for "
                    "'%s' on resource provider '%s'. The reserved value is "
                    "greater than total." % (rc, tg.uuid)
                )


def _bump(conn: Connection, tg: _Target) -> int:
    """+1 on a provider this transaction holds locked; the new generation.

    Every bump in the transaction notes the generation it gave
    (``events.note_generation``), the allocation write's too, so the
    current one is known without reading it."""
    return common.bump_provider_generation(
        conn, tg.id, events.generations(conn).get(tg.id, tg.generation)
    )


def _interim(conn: Connection, targets: list[_Target]) -> None:
    for tg in targets:
        # Upstream skips this step for an empty new inventory (it would
        # rewrite the current one unchanged) -- and so its generation bump.
        if not tg.wanted.inventories:
            continue
        before = inventory_read.current(conn, tg.id)
        tg.old = inventory_read.by_name(before)
        union = {**tg.old, **tg.wanted.inventories}
        inventory.set_inventories(conn, tg.id, union, check_in_use=False, before=before)
        _bump(conn, tg)


def _final(conn: Connection, targets: list[_Target]) -> None:
    for tg in targets:
        try:
            replaced = inventory.set_inventories(conn, tg.id, tg.wanted.inventories)
        except errors.InventoryInUse as exc:
            raise errors.InventoryInUse("update conflict: " + exc.message) from None
        generation = _bump(conn, tg)
        change.set_event(
            conn,
            change.INVENTORIES,
            tg,
            (tg.generation, change.inventories_value(replaced if tg.old is None else tg.old)),
            (generation, change.inventories_value(tg.wanted.inventories)),
        )


def reshape(
    conn: Connection, wanted: Mapping[str, ProviderInventory], requests: list[ConsumerAllocations]
) -> None:
    """Make ``wanted`` the providers' inventories and ``requests`` the
    consumers' allocations, atomically (in the caller's transaction).

    Raises ProviderNotFoundInBody (400) for an unknown provider in
    ``wanted``; ConcurrentUpdate (409) for a stale provider or consumer
    generation; UnknownResourceClass and ProviderNotFoundForWrite (400);
    CapacityExceeded (409) for allocations that do not fit; and
    InventoryInUse (409) for a removed class that is still allocated.
    """
    targets = _lock_targets(conn, wanted)
    _validate(conn, targets)
    LOG.debug("reshaping %d providers, %d consumers", len(targets), len(requests))
    _interim(conn, targets)
    try:
        allocation.replace_allocations(conn, requests)
    except errors.UnknownResourceClass as exc:
        raise errors.UnknownResourceClass("malformed reshaper data: " + exc.message) from None
    except errors.CapacityExceeded as exc:
        raise errors.CapacityExceeded("Unable to allocate inventory: " + exc.message) from None
    _final(conn, targets)
