"""What the dashboard shows, read from the candidate cache's world and the
database: capacity per class (cloud-wide, per aggregate) and provider
trees; allocations grouped by consumer, project, user and consumer type
are ``berth.domain.dashboard_consumers``'s.

Everything here answers plain data (dicts and dataclasses); the HTML is
the API layer's business (``berth.api.handlers.dashboard``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import os_traits
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import tables as t
from berth.domain import common, resource_class, trait
from berth.domain.allocation_candidate.merge import Candidate
from berth.domain.allocation_candidate.order import tree_score
from berth.domain.allocation_candidate.request import Order
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import capacity

#: The trait Nova sets on a compute host an operator disabled.
DISABLED_TRAIT = "COMPUTE_STATUS_DISABLED"

#: Rows per page of every list.
PAGE = 50
#: Provider trees per page.
TREES_PAGE = 20
#: How many of the fullest providers the overview lists.
FULLEST = 10
#: Search kinds of the provider-trees page.
SEARCH_BY = ("name", "uuid", "trait", "aggregate")


@dataclass(slots=True)
class Amounts:
    """Capacity (after reserved and ratio), used and free of one class."""

    resource_class: str
    capacity: int = 0
    used: int = 0

    @property
    def free(self) -> int:
        return self.capacity - self.used

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.capacity if self.capacity else 0.0


@dataclass(slots=True)
class Page:
    """One page of a longer list."""

    number: int
    size: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size


def page_of(number: int, size: int, total: int) -> Page:
    """Page ``number`` (1-based, clamped into range) of ``total`` rows."""
    page = Page(1, size, total)
    page.number = min(max(1, number), page.pages)
    return page


def _amounts(world: World, pids: Iterable[int]) -> list[Amounts]:
    found: dict[str, Amounts] = {}
    for pid in pids:
        p = world.providers[pid]
        for rc, inv in p.inventories.items():
            row = found.get(rc)
            if row is None:
                row = found[rc] = Amounts(rc)
            row.capacity += capacity(inv.total, inv.reserved, inv.allocation_ratio)
            row.used += p.used.get(rc, 0)
    return [found[rc] for rc in sorted(found)]


def _fullness(world: World, pid: int) -> tuple[float, str]:
    """The highest used share of any class of ``pid``, and that class."""
    p = world.providers[pid]
    best = (0.0, "")
    for rc, inv in p.inventories.items():
        cap = capacity(inv.total, inv.reserved, inv.allocation_ratio)
        share = p.used.get(rc, 0) / cap if cap > 0 else 1.0
        best = max(best, (share, rc))
    return best


def names(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    """Provider id -> name, for just ``ids``."""
    wanted = sorted(set(ids))
    found: dict[int, str] = {}
    rp = t.resource_providers
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for row in conn.execute(sa.select(rp.c.id, rp.c.name).where(rp.c.id.in_(chunk))):
            found[row.id] = row.name
    return found


def names_by_uuid(conn: Connection, world: World, uuids: Iterable[str]) -> dict[str, str]:
    """Provider uuid -> name, for those of ``uuids`` ``world`` holds."""
    pids = {world.by_uuid[u]: u for u in uuids if u in world.by_uuid}
    return {pids[pid]: name for pid, name in names(conn, pids).items()}


def class_and_trait_names(conn: Connection) -> list[str]:
    """Every resource class and trait name: what an unknown one in a
    query is likely a typo of."""
    return [c.name for c in resource_class.list_classes(conn)] + [
        tr.name for tr in trait.list_traits(conn)
    ]


@dataclass
class Labels:
    """What people know the providers and aggregates of a report by."""

    #: provider uuid -> name
    names: dict[str, str]
    #: aggregate uuid -> the names of its first trees (:func:`members`)
    members: dict[str, list[str]]
    #: aggregate uuid -> what the pages call it (:func:`aggregate_name`)
    aggregates: dict[str, str] = field(default_factory=dict)


def labels(
    conn: Connection, world: World, uuids: Iterable[str], aggregates: Iterable[str]
) -> Labels:
    """The names of the providers ``uuids`` and the member trees of
    ``aggregates`` (those ``world`` holds)."""
    aggs = list(aggregates)
    roots = root_names(conn, world) if aggs else {}
    return Labels(
        names=names_by_uuid(conn, world, uuids),
        members={agg: members(world, agg, roots) for agg in aggs},
        aggregates={agg: aggregate_name(world, agg, roots) for agg in aggs},
    )


def disabled(world: World, pid: int) -> bool:
    """Whether the compute host of ``pid`` is disabled (the trait is on
    the host's root provider, or on ``pid`` itself)."""
    p = world.providers[pid]
    return DISABLED_TRAIT in p.traits or DISABLED_TRAIT in world.providers[p.root_id].traits


def root_names(conn: Connection, world: World) -> dict[int, str]:
    """Root provider id -> name, for every root of ``world``."""
    rp = t.resource_providers
    rows = conn.execute(sa.select(rp.c.id, rp.c.name).where(rp.c.parent_provider_id.is_(None)))
    return {row.id: row.name for row in rows if row.id in world.trees}


def by_name(world: World, pids: Iterable[int], named: dict[int, str]) -> list[int]:
    """``pids`` sorted by name (uuid for equal or unknown names)."""
    return sorted(pids, key=lambda pid: (named.get(pid, ""), world.uuid(pid)))


def member_roots(world: World, agg: str) -> set[int]:
    """The roots of the trees with a provider in aggregate ``agg``."""
    return {world.providers[pid].root_id for pid in world.by_agg.get(agg, ())}


def members(world: World, agg: str, named: dict[int, str], shown: int = 3) -> list[str]:
    """The names of the first ``shown`` root providers (by name) with a
    provider in aggregate ``agg``: what an operator knows it by."""
    return [
        named.get(r, world.uuid(r)) for r in by_name(world, member_roots(world, agg), named)[:shown]
    ]


def aggregate_name(world: World, agg: str, named: dict[int, str]) -> str:
    """What every page calls aggregate ``agg`` (an aggregate has no
    name): its first trees and how many more, "compute-01, compute-02,
    compute-03 and 6 more" (its uuid for one with no tree)."""
    first = members(world, agg, named)
    more = len(member_roots(world, agg)) - len(first)
    return (", ".join(first) or agg) + (" and %d more" % more if more else "")


@dataclass
class FirstHost:
    """A tree an allocation-candidates answer reaches, in answer order."""

    uuid: str
    name: str
    #: candidates of the answer in this tree
    candidates: int
    #: its score under the order (None in an order with no score)
    score: float | None
    #: each class the order weighs, over the tree's own providers
    weighed: list[Amounts]
    disabled: bool


def first_hosts(
    conn: Connection, world: World, candidates: Iterable[Candidate], want: Order
) -> list[FirstHost]:
    """The trees ``candidates`` (an answer, in its order) come from, in
    the order each first appears: each with its score under ``want``
    (``order.tree_score``, what the ranking sorts by and explain shows)
    and the capacity and use of the classes ``want`` weighs, over the
    tree's own providers, as the score counts them (a sharing pool
    serves many trees alike and is left out)."""
    counts: dict[int, int] = {}
    for cand in candidates:
        root = world.providers[cand.anchor].root_id
        counts[root] = counts.get(root, 0) + 1
    named = names(conn, counts)
    out = []
    for root, n in counts.items():
        have = {a.resource_class: a for a in _amounts(world, world.trees[root])}
        out.append(
            FirstHost(
                world.uuid(root),
                named.get(root, ""),
                n,
                tree_score(world, root, want) if want.scored else None,
                [have.get(rc, Amounts(rc)) for rc, _ in want.weights],
                disabled(world, root),
            )
        )
    return out


@dataclass
class Overview:
    providers: int
    roots: int
    classes: list[Amounts]
    fullest: list[dict[str, Any]]
    aggregates: list[dict[str, Any]]
    aggregate_page: Page


def overview(conn: Connection, world: World, page: int = 1) -> Overview:
    """Capacity, used and free per class, cloud-wide and for one page of
    aggregates (sorted by uuid; each over the whole trees with a provider
    in it, the trees its name lists), and the fullest providers (of those
    with any usage)."""
    ranked = sorted(
        (
            item
            for item in (
                (_fullness(world, pid), pid) for pid, p in world.providers.items() if p.used
            )
            if item[0][0] > 0
        ),
        reverse=True,
    )[:FULLEST]
    named = names(conn, [pid for _, pid in ranked])
    fullest = [
        {
            "uuid": world.uuid(pid),
            "name": named.get(pid, ""),
            "percent": 100.0 * share,
            "resource_class": rc,
            "disabled": disabled(world, pid),
            "classes": _amounts(world, [pid]),
        }
        for (share, rc), pid in ranked
    ]
    aggs = sorted(world.by_agg)
    paged = page_of(page, PAGE, len(aggs))
    roots = root_names(conn, world)
    rows = []
    for agg in aggs[paged.offset : paged.offset + paged.size]:
        trees_ = member_roots(world, agg)
        pids = sorted(pid for root in trees_ for pid in world.trees[root])
        rows.append(
            {
                "uuid": agg,
                "name": aggregate_name(world, agg, roots),
                "trees": len(trees_),
                "providers": len(pids),
                "classes": _amounts(world, pids),
            }
        )
    return Overview(
        providers=len(world.providers),
        roots=len(world.roots),
        classes=_amounts(world, world.providers),
        fullest=fullest,
        aggregates=rows,
        aggregate_page=paged,
    )


@dataclass
class TreeNode:
    """One provider of a tree, with its depth below the root."""

    uuid: str
    name: str
    depth: int
    classes: list[Amounts]
    traits: list[str]
    aggregates: list[str]
    #: roots (uuid, name) of the trees this sharing provider serves
    serves: list[tuple[str, str]] = field(default_factory=list)
    matched: bool = False
    #: the provider has the trait COMPUTE_STATUS_DISABLED
    disabled: bool = False


@dataclass
class Tree:
    root_uuid: str
    root_name: str
    nodes: list[TreeNode]
    #: sharing providers of other trees that serve this one: (uuid, name)
    shared_from: list[tuple[str, str]]


def search(conn: Connection, world: World, by: str, text: str) -> list[int] | None:
    """Providers matching ``text`` as a name part, uuid, trait or
    aggregate uuid; None for no search (every provider)."""
    text = text.strip()
    if not text:
        return None
    if by == "name":
        rp = t.resource_providers
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = conn.execute(sa.select(rp.c.id).where(rp.c.name.like(pattern, escape="\\")))
        return [row.id for row in rows if row.id in world.providers]
    if by == "uuid":
        if not common.is_uuid_like(text):
            return []
        pid = world.by_uuid.get(str(common.normalize_uuid(text)))
        return [] if pid is None else [pid]
    if by == "trait":
        return sorted(world.by_trait.get(text, ()))
    if by == "aggregate":
        if not common.is_uuid_like(text):
            return []
        return sorted(world.by_agg.get(str(common.normalize_uuid(text)), ()))
    raise ValueError(by)


def _order(world: World, root: int, named: dict[int, str]) -> list[tuple[int, int]]:
    """The tree of ``root`` depth first, children by name: (pid,
    depth)."""
    children: dict[int | None, list[int]] = {}
    for pid in by_name(world, world.trees.get(root, []), named):
        if pid != root:
            children.setdefault(world.providers[pid].parent_id, []).append(pid)
    out: list[tuple[int, int]] = []
    stack = [(root, 0)]
    while stack:
        pid, depth = stack.pop()
        out.append((pid, depth))
        stack.extend((c, depth + 1) for c in reversed(children.get(pid, [])))
    return out


@dataclass
class Trees:
    trees: list[Tree]
    page: Page
    matched: int
    #: aggregate uuid -> its name (:func:`aggregate_name`), for those the
    #: page's providers are in
    aggregate_names: dict[str, str] = field(default_factory=dict)


def trees(conn: Connection, world: World, by: str = "name", text: str = "", page: int = 1) -> Trees:
    """One page of trees (roots in name order) holding a provider that
    matches the search, every provider of each with its amounts."""
    hits = search(conn, world, by, text)
    roots = root_names(conn, world)
    if hits is None:
        wanted: Iterable[int] = world.roots
        matched = len(world.providers)
        hit_set: set[int] = set()
    else:
        wanted = {world.providers[pid].root_id for pid in hits}
        matched = len(hits)
        hit_set = set(hits)
    ordered = by_name(world, wanted, roots)
    paged = page_of(page, TREES_PAGE, len(ordered))
    shown = ordered[paged.offset : paged.offset + paged.size]
    ids: set[int] = set()
    for root in shown:
        ids.update(world.trees.get(root, ()))
        ids.update(world.shared_into.get(root, ()))
        for pid in world.trees.get(root, ()):
            ids.update(world.anchors.get(pid, ()))
    named = names(conn, ids)
    out = [
        Tree(
            root_uuid=world.uuid(root),
            root_name=named.get(root, ""),
            nodes=_nodes(world, root, named, hit_set),
            shared_from=[
                (world.uuid(s), named.get(s, ""))
                for s in by_name(world, world.shared_into.get(root, ()), named)
            ],
        )
        for root in shown
    ]
    aggs = {agg for tree in out for node in tree.nodes for agg in node.aggregates}
    return Trees(
        trees=out,
        page=paged,
        matched=matched,
        aggregate_names={agg: aggregate_name(world, agg, roots) for agg in aggs},
    )


def _nodes(world: World, root: int, named: dict[int, str], hits: set[int]) -> list[TreeNode]:
    """The providers of the tree of ``root``, depth first."""
    nodes = []
    for pid, depth in _order(world, root, named):
        p = world.providers[pid]
        sharing = os_traits.MISC_SHARES_VIA_AGGREGATE in p.traits
        serves = (
            [
                (world.uuid(r), named.get(r, ""))
                for r in by_name(world, world.anchors.get(pid, ()), named)
                if r != root
            ]
            if sharing
            else []
        )
        nodes.append(
            TreeNode(
                uuid=p.uuid,
                name=named.get(pid, ""),
                depth=depth,
                classes=_amounts(world, [pid]),
                traits=p.ordered_traits(),
                aggregates=sorted(p.aggregates),
                serves=serves,
                matched=pid in hits,
                disabled=DISABLED_TRAIT in p.traits,
            )
        )
    return nodes
