"""Set-based SQL that loads the providers a request can touch.

A handful of queries per request, each bounded by the requested classes,
traits and aggregates, never one query per provider.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import tables as t
from berth.domain import common, errors
from berth.domain.candidates.model import SHARING_TRAIT, Provider, World
from berth.domain.capacity import Inventory

#: provider id -> (class -> inventory, class -> used)
InvMap = dict[int, tuple[dict[str, Inventory], dict[str, int]]]


def class_ids(conn: Connection, names: Iterable[str],
              known: dict[str, int] | None = None) -> dict[str, int]:
    """Resolve resource class names (against ``known`` when given, else
    the database); unknown ones are a 400."""
    wanted = list(dict.fromkeys(names))
    found = (common.resource_class_ids(conn, wanted) if known is None
             else {n: known[n] for n in wanted if n in known})
    for name in wanted:
        if name not in found:
            raise errors.BadRequest(
                "Invalid resource class in resources parameter: No such "
                "resource class %s." % name)
    return found


def trait_ids(conn: Connection, names: Iterable[str], prefix: str = "",
              known: dict[str, int] | None = None) -> dict[str, int]:
    """Resolve trait names (against ``known`` when given, else the
    database); unknown ones are a 400 naming all of them."""
    wanted = set(names)
    found = (common.trait_ids(conn, wanted) if known is None
             else {n: known[n] for n in wanted if n in known})
    missing = sorted(wanted - set(found))
    if missing:
        raise errors.BadRequest("%sNo such trait(s): %s."
                                % (prefix, ", ".join(missing)))
    return found


def inventories(conn: Connection, rc_ids: dict[str, int],
                providers: sa.Select[Any] | None = None) -> InvMap:
    """provider id -> class -> (inventory, used): of the classes in
    ``rc_ids`` (every class when empty), of the providers ``providers``
    selects (every provider when None).

    Inventories and usage are read by two queries and joined here: on
    every backend that is markedly cheaper than an outer join against a
    grouped subquery.
    """
    inv, al = t.inventories, t.allocations
    names = {v: k for k, v in rc_ids.items()}
    query = sa.select(inv.c.resource_provider_id, inv.c.resource_class_id,
                      inv.c.total, inv.c.reserved, inv.c.min_unit,
                      inv.c.max_unit, inv.c.step_size,
                      inv.c.allocation_ratio)
    usage = sa.select(al.c.resource_provider_id, al.c.resource_class_id,
                      sa.func.sum(al.c.used))
    if rc_ids:
        usage = usage.where(al.c.resource_class_id.in_(sorted(names)))
        query = query.where(inv.c.resource_class_id.in_(sorted(names)))
    if providers is not None:
        usage = usage.where(al.c.resource_provider_id.in_(providers))
        query = query.where(inv.c.resource_provider_id.in_(providers))
    if not names:
        names = common.resource_class_names(conn)
    result: InvMap = {}
    for pid, rc, total, reserved, lo, hi, step, ratio in conn.execute(query).all():
        entry = result.get(pid)
        if entry is None:
            entry = result[pid] = ({}, {})
        entry[0][names[rc]] = Inventory(total, reserved, lo, hi, step,
                                        float(ratio))
    grouped = usage.group_by(al.c.resource_provider_id,
                             al.c.resource_class_id)
    for pid, rc, used in conn.execute(grouped).all():
        entry = result.get(pid)
        # Usage of a class without inventory cannot be offered anyway.
        if entry is not None and used and names[rc] in entry[0]:
            entry[1][names[rc]] = int(used)
    return result


def traits_of(conn: Connection, ids: dict[str, int]) -> dict[int, set[str]]:
    """provider id -> which of the given traits it has."""
    if not ids:
        return {}
    rpt = t.resource_provider_traits
    names = {v: k for k, v in ids.items()}
    result: dict[int, set[str]] = defaultdict(set)
    rows = conn.execute(sa.select(rpt.c.resource_provider_id, rpt.c.trait_id)
                        .where(rpt.c.trait_id.in_(sorted(names))))
    for pid, tid in rows:
        result[pid].add(names[tid])
    return result


def aggregates_of(conn: Connection, uuids: Iterable[str]
                  ) -> dict[int, set[str]]:
    """provider id -> which of the given aggregates it is in."""
    wanted = sorted(set(uuids))
    if not wanted:
        return {}
    rpa, agg = t.resource_provider_aggregates, t.placement_aggregates
    rows = conn.execute(
        sa.select(rpa.c.resource_provider_id, agg.c.uuid)
        .join(agg, agg.c.id == rpa.c.aggregate_id)
        .where(agg.c.uuid.in_(wanted)))
    result: dict[int, set[str]] = defaultdict(set)
    for pid, uuid in rows:
        result[pid].add(uuid)
    return result


def sharing_anchors(conn: Connection, sharing: Iterable[int]
                    ) -> dict[int, set[int]]:
    """sharing provider id -> roots of every tree sharing an aggregate
    with it (its own root included when it is in any aggregate)."""
    ids = sorted(set(sharing))
    result: dict[int, set[int]] = {i: set() for i in ids}
    if not ids:
        return result
    mine = t.resource_provider_aggregates.alias("mine")
    theirs = t.resource_provider_aggregates.alias("theirs")
    rp = t.resource_providers
    rows = conn.execute(
        sa.select(mine.c.resource_provider_id, rp.c.root_provider_id)
        .distinct()
        .join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id)
        .join(rp, rp.c.id == theirs.c.resource_provider_id)
        .where(mine.c.resource_provider_id.in_(ids)))
    for sid, root in rows:
        result[sid].add(root)
    return result


def provider_rows(conn: Connection, root_ids: set[int] | None
                  ) -> list[tuple[int, str, int, int | None]]:
    """(id, uuid, root id, parent id) of every provider in the trees."""
    rp = t.resource_providers
    query = sa.select(rp.c.id, rp.c.uuid, rp.c.root_provider_id,
                      rp.c.parent_provider_id)
    if root_ids is not None:
        query = query.where(rp.c.root_provider_id.in_(sorted(root_ids)))
    return [(r[0], r[1], r[2], r[3]) for r in conn.execute(query)]


def roots_of(conn: Connection, ids: Iterable[int]) -> set[int]:
    wanted = sorted(set(ids))
    if not wanted:
        return set()
    rp = t.resource_providers
    rows = conn.execute(sa.select(rp.c.root_provider_id)
                        .where(rp.c.id.in_(wanted)))
    return {r[0] for r in rows}


def _holder_roots(rc_ids: dict[str, int]) -> sa.Select[Any]:
    """Roots of the trees holding inventory of ``rc_ids``."""
    inv = t.inventories
    holder = t.resource_providers.alias("holder")
    return (sa.select(holder.c.root_provider_id)
            .join(inv, inv.c.resource_provider_id == holder.c.id)
            .where(inv.c.resource_class_id.in_(sorted(rc_ids.values()))))


def _tree_rows(conn: Connection, ids: sa.Select[Any] | None
               ) -> list[tuple[int, str, int, int | None]]:
    """(id, uuid, root id, parent id) of the providers ``ids`` selects
    (None: all of them)."""
    rp = t.resource_providers
    query = sa.select(rp.c.id, rp.c.uuid, rp.c.root_provider_id,
                      rp.c.parent_provider_id)
    if ids is not None:
        query = query.where(rp.c.id.in_(ids))
    return [(r[0], r[1], r[2], r[3]) for r in conn.execute(query).all()]


@dataclass
class Plan:
    """What is known before any tree is loaded: the sharing providers, the
    trees they serve, and every possible anchor in uuid order."""

    traits: dict[int, set[str]]
    aggregates: dict[int, set[str]]
    anchors: dict[int, set[int]]
    roots: list[int]
    sharing_roots: set[int]
    #: roots reached through sharing providers (not by holding inventory)
    extra: set[int]
    #: True when member_of narrowed ``roots`` below every holder's tree
    narrowed: bool = False


def plan(conn: Connection, rc_ids: dict[str, int],
         trait_map: dict[str, int], agg_uuids: set[str],
         member_sets: Iterable[frozenset[str]] = (),
         trait_sets: Iterable[frozenset[str]] = ()) -> Plan:
    """Read the sharing providers and list the anchors to visit.

    ``member_sets`` are the request's positive ``member_of`` sets and
    ``trait_sets`` its required-trait sets (any of each set, all sets, in
    any group): a tree is only worth visiting when, for every set, one of
    its providers, or a sharing provider serving it, is in one of the
    set's aggregates or has one of the set's traits.
    """
    tmap = dict(trait_map)
    tmap.update(common.trait_ids(conn, [SHARING_TRAIT]))
    traits = traits_of(conn, tmap)
    sharing = [pid for pid, names in traits.items() if SHARING_TRAIT in names]
    anchors = sharing_anchors(conn, sharing)
    sharing_roots = roots_of(conn, sharing)
    rp = t.resource_providers
    extra = sharing_roots.union(*anchors.values())
    aggregates = aggregates_of(conn, agg_uuids)
    viable = _reachable_roots(conn, aggregates, anchors, member_sets, None)
    viable = _reachable_roots(conn, traits, anchors, trait_sets, viable)
    roots: list[int] = []
    if rc_ids and viable is not None:
        # Few trees can qualify: list them straight away (one that holds
        # none of the classes simply yields nothing in the search).
        roots = [r[0] for r in conn.execute(
            sa.select(rp.c.id).where(rp.c.id.in_(sorted(viable)))
            .order_by(rp.c.uuid))] if viable else []
    elif rc_ids:
        cond: sa.ColumnElement[bool] = rp.c.id.in_(_holder_roots(rc_ids))
        if extra:
            cond = sa.or_(cond, rp.c.id.in_(sorted(extra)))
        roots = [r[0] for r in conn.execute(
            sa.select(rp.c.id).where(cond).order_by(rp.c.uuid))]
    return Plan(traits, aggregates, anchors, roots, sharing_roots, extra,
                narrowed=viable is not None)


def _reachable_roots(conn: Connection, labels: dict[int, set[str]],
                     anchors: dict[int, set[int]],
                     wanted_sets: Iterable[frozenset[str]],
                     viable: set[int] | None) -> set[int] | None:
    """Narrow ``viable`` to roots that can meet every set in
    ``wanted_sets``, where ``labels`` gives each provider's aggregates or
    traits (None: no restriction yet). A superset of the trees that can:
    the search still checks each candidate exactly."""
    for wanted in wanted_sets:
        members = [pid for pid, have in labels.items()
                   if not wanted.isdisjoint(have)]
        reach = roots_of(conn, members)
        for pid in members:
            reach |= anchors.get(pid, set())
        viable = reach if viable is None else viable & reach
    return viable


def most_of_table(conn: Connection, count: int, roots: bool = False) -> bool:
    """True when ``count`` providers (with ``roots``, tree roots) are at
    least three quarters of them all: one plain scan then beats filtering
    every row through a list of trees (measured on SQLite)."""
    rp = t.resource_providers
    query = sa.select(sa.func.count()).select_from(rp)
    if roots:
        query = query.where(rp.c.parent_provider_id.is_(None))
    return count * 4 >= 3 * (conn.scalar(query) or 0)


def load_world(conn: Connection, rc_ids: dict[str, int], found: Plan,
               roots: list[int] | None = None) -> World:
    """Every provider in the trees of ``roots`` (default: every anchor of
    ``found``) and of the sharing providers, with all its inventories and
    usage, and only the traits and aggregates the request names."""
    wanted = set(found.roots if roots is None else roots) | found.sharing_roots
    if not wanted or not found.roots:
        return World([], found.anchors)
    rp = t.resource_providers
    if most_of_table(conn, len(wanted), roots=True):
        # Most trees are wanted: scan, and leave the others out here.
        ids = None
        rows = [r for r in _tree_rows(conn, None) if r[2] in wanted]
    else:
        ids = sa.select(rp.c.id).where(
            rp.c.root_provider_id.in_(sorted(wanted)))
        rows = _tree_rows(conn, ids)
    invs = inventories(conn, {}, ids)
    aggs = found.aggregates
    providers = []
    no_inv: tuple[dict[str, Inventory], dict[str, int]] = ({}, {})
    for pid, uuid, root, parent in rows:
        inv, used = invs.get(pid, no_inv)
        providers.append(Provider(
            pid, uuid, root, parent, inv, used,
            frozenset(found.traits.get(pid, ())),
            frozenset(aggs.get(pid, ()))))
    return World(providers, found.anchors)
