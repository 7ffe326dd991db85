"""What one group can use under one anchor: its offers, as pieces.

A *piece* is one way to satisfy one group: what it takes from which
providers. A suffixed group's pieces each use one provider of the
anchor's tree or a sharing provider serving it (``granular_pieces``);
the unsuffixed group may take each class from a different one, as long
as together they carry the required traits (``spread_pieces``). The
merge (``merge``) then combines one piece per group into candidates.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from berth.domain.allocation_candidate.provider import Provider, aggs_ok, traits_ok
from berth.domain.allocation_candidate.request import RequestGroup
from berth.domain.allocation_candidate.world import World

Alloc = tuple[int, str, int]

# Pieces (and the merge's candidates) are named tuples: the search makes
# one of each per answer, and a tuple is several times cheaper to build
# than a dataclass.


class Piece(NamedTuple):
    """One way to satisfy one group: what it takes from whom."""

    suffix: str
    allocs: tuple[Alloc, ...]
    providers: tuple[int, ...]


@dataclass(frozen=True)
class GroupSpec:
    """A request group with its tree restriction resolved to a root id."""

    group: RequestGroup
    tree_root: int | None = None


class Offers:
    """One group's offers under each anchor (each anchor is visited once)."""

    def __init__(self, world: World, spec: GroupSpec) -> None:
        self.world = world
        self.spec = spec
        self.classes = sorted(spec.group.resources)
        self.amounts = [(rc, spec.group.resources[rc]) for rc in self.classes]
        self.same_provider = spec.group.same_provider

    def at(self, anchor: int) -> list[Piece]:
        if self.same_provider:
            return granular_pieces(self.world, self.spec, anchor, self.amounts)
        return spread_pieces(self.world, self.spec, anchor, self.classes)


def granular_pieces(
    world: World, spec: GroupSpec, anchor: int, amounts: list[tuple[str, int]]
) -> list[Piece]:
    """Single-provider offers of a suffixed group (asking for ``amounts``,
    by class name) under ``anchor``: a provider of the anchor's tree, or
    a sharing provider serving it (``Provider.can_take``, ``traits_ok`` and
    ``aggs_ok``, unrolled)."""
    g = spec.group
    if amounts:
        # Only providers with inventory of the first class can serve.
        local: Iterable[int] = world.tree_class.get((anchor, amounts[0][0]), ())
    else:
        local = world.trees.get(anchor, ())
    shared = world.shared_into.get(anchor)
    if shared:
        local = itertools.chain(local, shared)
    labels = bool(g.required or g.forbidden or g.member_of or g.forbidden_aggs)
    tree_root = spec.tree_root
    providers = world.providers
    out = []
    for pid in local:
        p = providers[pid]
        if tree_root is not None and p.root_id != tree_root:
            continue
        room = p.room
        for rc, n in amounts:
            r = room.get(rc)
            if r is None or n < r[1] or n > r[2] or n % r[3] or n > r[0]:
                break
        else:
            if labels and not (
                traits_ok(p.traits, g.required, g.forbidden)
                and aggs_ok(p.aggregates, g.member_of, g.forbidden_aggs)
            ):
                continue
            out.append(Piece(g.suffix, tuple([(pid, rc, n) for rc, n in amounts]), (pid,)))
    return out


def _options(world: World, spec: GroupSpec, anchor: int, rc: str, n: int) -> list[int]:
    """Providers with room for ``n`` of ``rc`` that may serve this anchor."""
    g = spec.group
    providers = world.providers
    local = world.tree_class.get((anchor, rc), ())
    shared = world.shared_into.get(anchor, ())
    if not g.member_of and not g.forbidden_aggs and spec.tree_root is None:
        found = []
        for pid in local:
            # can_take, inlined: every provider here has inventory of rc.
            r = providers[pid].room[rc]
            if r[1] <= n <= r[2] and n % r[3] == 0 and n <= r[0]:
                found.append(pid)
        if shared:
            found += [s for s in shared if providers[s].can_take(rc, n)]
        return found
    root_aggs = providers[anchor].aggregates
    if g.forbidden_aggs and not g.forbidden_aggs.isdisjoint(root_aggs):
        return []
    # An aggregate on the root spans its whole tree.
    anchor_in = aggs_ok(root_aggs, g.member_of, frozenset())
    found = []
    if spec.tree_root is None or spec.tree_root == anchor:
        for pid in local:
            p = providers[pid]
            if (
                p.can_take(rc, n)
                and (anchor_in or aggs_ok(p.aggregates, g.member_of, frozenset()))
                and (not g.forbidden_aggs or g.forbidden_aggs.isdisjoint(p.aggregates))
            ):
                found.append(pid)
    if spec.tree_root is not None:
        return found
    for sid in shared:
        s = providers[sid]
        if s.can_take(rc, n) and aggs_ok(s.aggregates, g.member_of, g.forbidden_aggs):
            found.append(sid)
    return found


def spread_pieces(world: World, spec: GroupSpec, anchor: int, classes: list[str]) -> list[Piece]:
    """Offers of the unsuffixed group under ``anchor`` (its ``classes`` in
    sorted order): each class from one provider of the anchor's tree or
    from a sharing provider serving it; together they must carry the
    required traits and none may carry a forbidden one."""
    g = spec.group
    tree = world.trees.get(anchor)
    if (
        tree is not None
        and len(tree) == 1
        and anchor not in world.shared_into
        and (spec.tree_root is None or spec.tree_root == anchor)
    ):
        # A lone provider (the usual compute host): it alone can serve.
        return _lone_piece(world.providers[anchor], g, classes)
    per_class = []
    for rc in classes:
        opts = _options(world, spec, anchor, rc, g.resources[rc])
        if not opts:
            return []
        per_class.append(opts)
    return _combine(world, g, classes, per_class)


def _lone_piece(p: Provider, g: RequestGroup, classes: list[str]) -> list[Piece]:
    """``spread_pieces`` for a tree of one provider and no sharing."""
    if (g.member_of or g.forbidden_aggs) and not aggs_ok(
        p.aggregates, g.member_of, g.forbidden_aggs
    ):
        return []
    room = p.room
    for rc in classes:
        r = room.get(rc)
        n = g.resources[rc]
        if r is None or n < r[1] or n > r[2] or n % r[3] or n > r[0]:
            return []
    if (g.required or g.forbidden) and not traits_ok(p.traits, g.required, g.forbidden):
        return []
    pid = p.id
    return [Piece(g.suffix, tuple([(pid, rc, g.resources[rc]) for rc in classes]), (pid,))]


def _combine(
    world: World, g: RequestGroup, classes: list[str], per_class: list[list[int]]
) -> list[Piece]:
    amounts = [g.resources[rc] for rc in classes]
    check_traits = bool(g.required or g.forbidden)
    pieces = []
    for combo in itertools.product(*per_class):
        distinct_ = set(combo)
        chosen = tuple(distinct_) if len(distinct_) == 1 else tuple(sorted(distinct_))
        if check_traits:
            if any(not traits_ok(world.providers[p].traits, (), g.forbidden) for p in chosen):
                continue
            have = frozenset().union(*(world.providers[p].traits for p in chosen))
            if not traits_ok(have, g.required, frozenset()):
                continue
        # (provider, class, amount) per class, built at C speed.
        allocs = tuple(zip(combo, classes, amounts, strict=True))
        pieces.append(Piece(g.suffix, allocs, chosen))
    return pieces
