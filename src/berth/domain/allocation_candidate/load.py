"""Reading the world from the database: whole, some providers, or usage.

A whole load is seven set-based queries (classes, traits, providers,
inventories, usage, provider traits, provider aggregates), never one
query per provider. Refreshing some providers runs the same queries for
just those ids and patches the indexes in memory where those providers
sit (``world_patch.with_changes``), or rebuilds them when that is wiser. A
usage refresh is one grouped query over the providers whose allocations
changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnySelect
from berth.db import tables as t
from berth.domain import common, errors
from berth.domain.allocation_candidate import world_patch
from berth.domain.allocation_candidate.provider import Provider, room_of
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory


def class_ids(names: Iterable[str], known: dict[str, int]) -> dict[str, int]:
    """``names`` resolved against ``known``; an unknown one is a 400."""
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        if name not in known:
            raise errors.BadRequest(
                "Invalid resource class in resources parameter: No such resource class %s." % name
            )
    return {n: known[n] for n in wanted}


def trait_ids(names: Iterable[str], known: dict[str, int], prefix: str = "") -> dict[str, int]:
    """``names`` resolved against ``known``; unknown ones are a 400 that
    names all of them."""
    wanted = set(names)
    missing = sorted(wanted - set(known))
    if missing:
        raise errors.BadRequest("%sNo such trait(s): %s." % (prefix, ", ".join(missing)))
    return {n: known[n] for n in wanted}


# Class and trait names are joined into each query rather than looked up
# in a map read earlier: under READ COMMITTED a class or trait created and
# used between two statements would otherwise be an unknown id.


_AL, _RC = t.allocations, t.resource_classes
_USAGE = (
    sa.select(_AL.c.resource_provider_id, _RC.c.name, common.sum_used(_AL))
    .join(_RC, _RC.c.id == _AL.c.resource_class_id)
    .group_by(_AL.c.resource_provider_id, _RC.c.name)
)
# Built once: the candidate cache reads it after every claim, for the
# providers the claim touched.
_USAGE_OF = _USAGE.where(_AL.c.resource_provider_id.in_(sa.bindparam("ids", expanding=True)))


def usage(conn: Connection, provider_ids: Iterable[int] | None = None) -> dict[int, dict[str, int]]:
    """provider id -> class -> amount allocated (of ``provider_ids``, or
    of every provider); a provider with nothing allocated maps to {}."""
    result: dict[int, dict[str, int]] = {}
    if provider_ids is None:
        rows = conn.execute(_USAGE)
    else:
        wanted = sorted(set(provider_ids))
        result = {pid: {} for pid in wanted}
        rows = conn.execute(_USAGE_OF, {"ids": wanted})
    for pid, name, used in rows:
        if used:
            result.setdefault(pid, {})[name] = int(used)
    return result


def load_world(conn: Connection) -> tuple[World, dict[str, int], dict[str, int]]:
    """Every provider with all its inventories, usage, traits and
    aggregates; and the resource class and trait name -> id maps."""
    classes = common.ids_by_name(conn, t.resource_classes)
    traits = common.ids_by_name(conn, t.traits)
    return World(_providers(conn, None)), classes, traits


def refresh_providers(
    conn: Connection, world: World, provider_ids: Iterable[int], *, in_place: bool = False
) -> tuple[World, dict[str, int], dict[str, int]]:
    """``world`` with ``provider_ids`` read again whole (new ones added,
    deleted ones dropped) and its indexes kept when only inventory
    amounts changed, patched where the changed providers sit
    (``world_patch.with_changes``), or else rebuilt; and fresh class and trait
    maps (a class or trait created since may be in use now)."""
    ids = sorted(set(provider_ids))
    classes = common.ids_by_name(conn, t.resource_classes)
    traits = common.ids_by_name(conn, t.traits)
    fresh = _providers(conn, ids)
    if len(fresh) == len(ids):
        same_shape = world_patch.with_providers(world, fresh, in_place=in_place)
        if same_shape is not None:
            return same_shape, classes, traits
    found = {p.id for p in fresh}
    gone = {pid for pid in ids if pid not in found}

    def known(pid: int | None) -> bool:
        return pid is None or pid in found or (pid in world.providers and pid not in gone)

    if not all(known(p.root_id) and known(p.parent_id) for p in fresh):
        # Moved under a provider created after the change rows were read
        # (READ COMMITTED): read everything instead.
        return load_world(conn)
    patched = world_patch.with_changes(world, fresh, gone, in_place=in_place)
    if patched is not None:
        return patched, classes, traits
    providers = dict(world.providers)
    for pid in gone:
        providers.pop(pid, None)
    for p in fresh:
        providers[p.id] = p
    return World(providers.values()), classes, traits


def _providers(conn: Connection, ids: list[int] | None) -> list[Provider]:
    """The providers ``ids`` (None: all), read whole.

    They are built tree by tree, in the order the search visits them
    (roots in uuid order, each tree's providers in uuid order), so that
    the objects of neighbouring trees sit on the same memory pages: a
    search that reads a thousand trees then touches (and so, in a forked
    worker, copies) a few pages instead of one page per provider. Equal
    label sets, inventories and names are one object each.
    """
    same: dict[Any, Any] = {}
    stock = _inventories(conn, ids)
    used = usage(conn, ids)
    traits = _trait_names(conn, ids, same)
    members = _aggregate_uuids(conn, ids, same)
    return _built(_tree_ordered(conn, ids), stock, used, traits, members, same)


def _only(query: AnySelect, column: sa.Column[Any], ids: list[int] | None) -> AnySelect:
    """``query`` narrowed to the providers ``ids`` (None: all)."""
    return query if ids is None else query.where(column.in_(ids))


#: A provider's inventory of one class as read: (class, total, reserved,
#: min_unit, max_unit, step_size, allocation_ratio)
_Stock = tuple[Any, ...]


def _inventories(conn: Connection, ids: list[int] | None) -> dict[int, list[_Stock]]:
    """provider id -> its inventories, class by class."""
    inv, rcs = t.inventories, t.resource_classes
    stock: dict[int, list[_Stock]] = {}
    for row in conn.execute(
        _only(
            sa.select(
                inv.c.resource_provider_id,
                rcs.c.name,
                inv.c.total,
                inv.c.reserved,
                inv.c.min_unit,
                inv.c.max_unit,
                inv.c.step_size,
                inv.c.allocation_ratio,
            ).join(rcs, rcs.c.id == inv.c.resource_class_id),
            inv.c.resource_provider_id,
            ids,
        )
    ):
        stock.setdefault(row[0], []).append(tuple(row[1:]))
    return stock


def _trait_names(
    conn: Connection, ids: list[int] | None, same: dict[Any, Any]
) -> dict[int, list[str]]:
    """provider id -> its trait names, in trait id order (each name one
    object, through ``same``)."""
    rpt, tr = t.resource_provider_traits, t.traits
    labels: dict[int, list[str]] = {}
    for pid, name in conn.execute(
        _only(
            sa.select(rpt.c.resource_provider_id, tr.c.name).join(tr, tr.c.id == rpt.c.trait_id),
            rpt.c.resource_provider_id,
            ids,
        ).order_by(rpt.c.resource_provider_id, rpt.c.trait_id)
    ):
        labels.setdefault(pid, []).append(same.setdefault(name, name))
    return labels


def _aggregate_uuids(
    conn: Connection, ids: list[int] | None, same: dict[Any, Any]
) -> dict[int, list[str]]:
    """provider id -> the uuids of its aggregates (each one object,
    through ``same``)."""
    rpa, agg = t.resource_provider_aggregates, t.placement_aggregates
    members: dict[int, list[str]] = {}
    for pid, uuid in conn.execute(
        _only(
            sa.select(rpa.c.resource_provider_id, agg.c.uuid).join(
                agg, agg.c.id == rpa.c.aggregate_id
            ),
            rpa.c.resource_provider_id,
            ids,
        )
    ):
        members.setdefault(pid, []).append(same.setdefault(uuid, uuid))
    return members


def _tree_ordered(conn: Connection, ids: list[int] | None) -> list[tuple[Any, ...]]:
    """(id, uuid, root id, parent id) of each provider, tree by tree:
    by the uuid of its root (its own when the root is not read), then
    by its own."""
    rp = t.resource_providers
    rows = [
        tuple(row)
        for row in conn.execute(
            _only(
                sa.select(rp.c.id, rp.c.uuid, rp.c.root_provider_id, rp.c.parent_provider_id),
                rp.c.id,
                ids,
            )
        )
    ]
    uuids = {row[0]: row[1] for row in rows}
    rows.sort(key=lambda row: (uuids.get(row[2], row[1]), row[1]))
    return rows


def _built(
    rows: list[tuple[Any, ...]],
    stock: dict[int, list[_Stock]],
    used: dict[int, dict[str, int]],
    traits: dict[int, list[str]],
    members: dict[int, list[str]],
    same: dict[Any, Any],
) -> list[Provider]:
    """The providers of ``rows``, in that order, from their parts as
    read (equal parts one object each, through ``same``)."""
    one: Callable[[Any, Any], Any] = same.setdefault
    # Columns, not a tuple per provider: a hundred thousand small tuples
    # freed after the load would leave as many holes among the world's
    # objects, which a forked worker's own allocations then fill, copying
    # a shared page for each.
    stocks, useds, rooms = [], [], []
    trait_sets, agg_sets, trait_lists = [], [], []
    for pid, _uuid, _root, _parent in rows:
        inventories: dict[str, Inventory] = {}
        for rc, total, reserved, lo, hi, step, ratio in stock.get(pid, ()):
            rc = one(rc, rc)
            inventory = Inventory(total, reserved, lo, hi, step, float(ratio))
            inventories[rc] = one(inventory, inventory)
        # Usage of a class without inventory cannot be offered anyway.
        mine = {one(rc, rc): n for rc, n in used.get(pid, {}).items() if rc in inventories}
        have = tuple(traits.get(pid, ()))
        names = frozenset(have)
        aggregates = frozenset(members.get(pid, ()))
        stocks.append(inventories)
        useds.append(mine)
        rooms.append(room_of(inventories, mine))
        trait_sets.append(one(names, names))
        agg_sets.append(one(aggregates, aggregates))
        trait_lists.append(one(have, have))
    # The provider objects last, in one run: the objects every search and
    # every refresh reads sit together, not among their parts. So do their
    # ids, one int object per provider (``+ 0`` makes a new int, where the
    # rows' own are scattered among everything read with them), shared by
    # the root and parent fields and every index the world builds.
    own = {row[0]: row[0] + 0 for row in rows}
    return [
        Provider(
            own[pid],
            uuid,
            own.get(root, root),
            None if parent is None else own.get(parent, parent),
            stocks[i],
            useds[i],
            trait_sets[i],
            agg_sets[i],
            trait_lists[i],
            rooms=rooms[i],
        )
        for i, (pid, uuid, root, parent) in enumerate(rows)
    ]


def refresh_usage(
    conn: Connection, world: World, provider_ids: Iterable[int], *, in_place: bool = False
) -> World:
    """``world`` with the usage of ``provider_ids`` read again
    (``in_place``: see ``world_patch``)."""
    fresh = usage(conn, provider_ids)
    for pid, amounts in fresh.items():
        p = world.providers.get(pid)
        if p is not None:
            fresh[pid] = {rc: n for rc, n in amounts.items() if rc in p.inventories}
    return world_patch.with_usage(world, fresh, in_place=in_place)
