"""Inventory and allocation records as drivers and Placement exchange
them: checking, comparing on the fields given, merging over what
Placement holds, and moving allocations between providers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from berth.domain.capacity import Inventory

__all__ = [
    "InventoryDict",
    "AllocationsDict",
    "normalize_inventory",
    "checked_inventory",
    "inventory_changed",
    "merge_inventory",
    "move_allocations",
]

InventoryDict = dict[str, dict[str, Any]]
#: ``{consumer_uuid: {"allocations": {rp_uuid: {"resources": {...}}}, ...}}``
AllocationsDict = dict[str, dict[str, Any]]
_DEFAULTS: dict[str, Any] = Inventory(total=0)._asdict()


def normalize_inventory(inventory: Mapping[str, Mapping[str, Any]]) -> InventoryDict:
    """Every record completed with Placement's defaults.

    Raises ValueError for a record without ``total`` or with a field
    Placement does not know.
    """
    result: InventoryDict = {}
    for rc, record in inventory.items():
        try:
            full = Inventory(**record)
        except TypeError as exc:
            raise ValueError("bad inventory record for %s: %s" % (rc, exc)) from None
        result[rc] = full._asdict()
    return result


def checked_inventory(inventory: Mapping[str, Mapping[str, Any]]) -> InventoryDict:
    """A copy of ``inventory`` as given, after checking every record."""
    normalize_inventory(inventory)
    return {rc: dict(record) for rc, record in inventory.items()}


def inventory_changed(
    current: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> bool:
    """True when ``new`` adds or drops a class, or states a field whose
    value differs from ``current``'s (a field ``current`` lacks counts as
    Placement's default). Fields ``new`` leaves out are not compared."""
    if set(current) != set(new):
        return True
    for rc, record in new.items():
        have = current[rc]
        for key, value in record.items():
            if have.get(key, _DEFAULTS.get(key)) != value:
                return True
    return False


def merge_inventory(
    current: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> InventoryDict:
    """``new``'s classes, each record being ``current``'s (if it had the
    class) with ``new``'s fields laid over it: what to write so that the
    fields a driver leaves out keep their value in Placement."""
    return {rc: {**current.get(rc, {}), **record} for rc, record in new.items()}


def move_allocations(
    allocations: AllocationsDict,
    source: str,
    target: str,
    resource_class: str,
    amount: int | None = None,
    consumers: Iterable[str] | None = None,
) -> int:
    """Move allocations of ``resource_class`` from provider ``source`` to
    ``target``, editing ``allocations`` in place (the shape of
    ``get_allocations_for_provider_tree``).

    ``amount`` caps what moves per consumer (default: all of it);
    ``consumers`` limits which consumers move. Returns the total moved.
    """
    total = 0
    for cuuid in list(consumers) if consumers is not None else list(allocations):
        by_rp = allocations.get(cuuid, {}).get("allocations", {})
        resources = by_rp.get(source, {}).get("resources", {})
        have = resources.get(resource_class, 0)
        move = have if amount is None else min(amount, have)
        if move <= 0:
            continue
        if move == have:
            del resources[resource_class]
        else:
            resources[resource_class] = have - move
        if not resources:
            del by_rp[source]
        dest = by_rp.setdefault(target, {}).setdefault("resources", {})
        dest[resource_class] = dest.get(resource_class, 0) + move
        total += move
    return total
