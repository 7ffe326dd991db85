"""Reading inventories: what GET shows, and what a write reads first.

``list_inventories`` and ``get_inventory`` answer the GETs. Every write
of ``berth.domain.inventory`` (and the reshaper's) starts by reading the
provider's inventories with the amount allocated of each class in one
statement (``current``, ``provider_current``: a ``Current``), then works
from what that read: the classes it has (``by_name``,
``known_classes``) and what is allocated of those it removes or shrinks
(``used``). ``allocated`` reads the amounts of classes the provider has
no inventory of.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnyRow
from berth.db import tables as t
from berth.domain import common, errors
from berth.domain.capacity import Inventory

FIELDS: tuple[str, ...] = Inventory._fields

#: A provider's inventories as a writer reads them first: class id ->
#: (class name, inventory, amount allocated or None when no allocation
#: is of that class).
Current = dict[int, tuple[str, Inventory, int | None]]


@dataclass(frozen=True, slots=True)
class Listing:
    """A provider's inventories, its generation and the newest change."""

    generation: int
    inventories: dict[str, Inventory]
    last_modified: dt.datetime | None


def _rows(conn: Connection, provider_id: int) -> list[AnyRow]:
    inv, rc = t.inventories, t.resource_classes
    return list(
        conn.execute(
            sa.select(rc.c.name, *[inv.c[f] for f in FIELDS], inv.c.created_at, inv.c.updated_at)
            .join(rc, rc.c.id == inv.c.resource_class_id)
            .where(inv.c.resource_provider_id == provider_id)
            .order_by(rc.c.id)
        )
    )


def _from_row(row: AnyRow) -> Inventory:
    values = row._mapping
    return Inventory(
        **{f: values[f] for f in FIELDS[:-1]}, allocation_ratio=float(values["allocation_ratio"])
    )


def list_inventories(conn: Connection, uuid: str) -> Listing:
    """The provider's inventories for GET (NotFound for a bad uuid)."""
    provider = common.require_provider(conn, uuid)
    rows = _rows(conn, provider.id)
    newest = max(
        (r.updated_at or r.created_at for r in rows if r.updated_at or r.created_at), default=None
    )
    return Listing(provider.generation, {r.name: _from_row(r) for r in rows}, newest)


def get_inventory(
    conn: Connection, uuid: str, rc: str
) -> tuple[Inventory, int, dt.datetime | None]:
    """One inventory, the provider generation and when it last changed."""
    provider = common.require_provider(conn, uuid)
    for row in _rows(conn, provider.id):
        if row.name == rc:
            return (_from_row(row), provider.generation, row.updated_at or row.created_at)
    raise errors.NotFound("No inventory of class %s for %s" % (rc, uuid))


# Built once: every inventory write reads what the provider has first,
# and how much of each class is allocated (to refuse removing a class in
# use, and to warn of one now over capacity).
_CURRENT = (
    sa.select(
        t.inventories.c.resource_class_id,
        t.resource_classes.c.name,
        *[t.inventories.c[f] for f in FIELDS],
        sa.select(common.sum_used(t.allocations))
        .where(
            t.allocations.c.resource_provider_id == t.inventories.c.resource_provider_id,
            t.allocations.c.resource_class_id == t.inventories.c.resource_class_id,
        )
        .scalar_subquery(),
    )
    .join(t.resource_classes, t.resource_classes.c.id == t.inventories.c.resource_class_id)
    .where(t.inventories.c.resource_provider_id == sa.bindparam("b_rp"))
)


def current(conn: Connection, provider_id: int) -> Current:
    """The provider's inventories, for a writer (one statement)."""
    found: Current = {}
    for cid, name, *values in conn.execute(_CURRENT, {"b_rp": provider_id}):
        _add(found, cid, name, values)
    return found


def _add(found: Current, cid: int, name: str, values: list[Any]) -> None:
    total, reserved, low, high, step, ratio, used = values
    found[int(cid)] = (
        name,
        Inventory(total, reserved, low, high, step, float(ratio)),
        None if used is None else int(used),
    )


# Built once: every inventory write starts with it. The provider (a
# common.WrittenProvider) and :data:`_CURRENT`'s rows, one per class it has (a
# provider without inventory is one row with no class), in one
# statement where there were two.
_PROVIDER_CURRENT = (
    sa.select(*common.PROVIDER_COLUMNS, *_CURRENT.selected_columns)
    .select_from(
        common.PROVIDER_WITH_ROOT.outerjoin(
            t.inventories, t.inventories.c.resource_provider_id == t.resource_providers.c.id
        ).outerjoin(
            t.resource_classes, t.resource_classes.c.id == t.inventories.c.resource_class_id
        )
    )
    .where(common.PROVIDER_BY_UUID)
)


def provider_current(conn: Connection, uuid: str) -> tuple[common.WrittenProvider, Current]:
    """The provider ``uuid`` and its inventories (:func:`current`);
    NotFound when there is no such provider."""
    provider = None
    found: Current = {}
    for id_, uuid_, generation, root, cid, name, *values in conn.execute(
        _PROVIDER_CURRENT, {"b_uuid": uuid}
    ):
        provider = common.WrittenProvider(id_, uuid_, generation, root)
        if cid is not None:
            _add(found, cid, name, values)
    if provider is None:
        raise common.no_provider(uuid)
    return provider, found


def by_name(found: Current) -> dict[str, Inventory]:
    """:func:`current`'s inventories by class name."""
    return {name: inv for name, inv, _ in found.values()}


def used(found: Current, class_ids: Iterable[int]) -> dict[int, int]:
    """:func:`current`'s amounts allocated, of the classes that have
    allocations among ``class_ids`` (each in ``found``)."""
    return {cid: amount for cid in class_ids if (amount := found[cid][2]) is not None}


def allocated(
    conn: Connection, provider_id: int, class_ids: list[int] | None = None
) -> dict[int, int]:
    """Allocated amount per class id on the provider."""
    if class_ids is None:
        rows = conn.execute(_USAGE, {"b_rp": provider_id})
    else:
        rows = conn.execute(_USAGE_OF, {"b_rp": provider_id, "b_rcs": sorted(class_ids)})
    return {class_id: int(used) for class_id, used in rows}


# Built once: every inventory write reads the usage of its provider.
_USAGE = (
    sa.select(t.allocations.c.resource_class_id, common.sum_used(t.allocations))
    .where(t.allocations.c.resource_provider_id == sa.bindparam("b_rp"))
    .group_by(t.allocations.c.resource_class_id)
)
_USAGE_OF = _USAGE.where(
    t.allocations.c.resource_class_id.in_(sa.bindparam("b_rcs", expanding=True))
)


def known_classes(
    conn: Connection, names: list[str], before: Current
) -> tuple[dict[str, int], list[str]]:
    """Known class ids by name, and the names that are unknown. Classes
    the provider has (``before``, from :func:`current`) are known from
    it: only the others are looked up."""
    have = {name: cid for cid, (name, _, _) in before.items()}
    ids = {n: have[n] for n in names if n in have}
    others = [n for n in names if n not in have]
    if others:
        ids.update(common.resource_class_ids(conn, others))
    return ids, [n for n in names if n not in ids]
