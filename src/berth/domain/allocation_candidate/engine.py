"""GET /allocation_candidates, start to finish, minus HTTP.

``find_candidates`` takes the worker's candidate cache (``cache``),
resolves names, picks the anchors worth visiting, builds each group's
offers, merges them lazily and applies max_allocation_candidates, the
nested-provider rule of old microversions, ``limit`` and the order
(``order``: uuid, random, or trees ranked by a score).
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from sqlalchemy.engine import Connection

from berth.domain.allocation_candidate import load
from berth.domain.allocation_candidate.anchor_memo import AnchorMemo
from berth.domain.allocation_candidate.cache import CandidateCache
from berth.domain.allocation_candidate.merge import Candidate
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.order import SOURCE
from berth.domain.allocation_candidate.planner import Plan
from berth.domain.allocation_candidate.provider import traits_ok
from berth.domain.allocation_candidate.rankings import ranking
from berth.domain.allocation_candidate.request import Order, RequestGroup, RequestWide, Settings
from berth.domain.allocation_candidate.search import ANY, AnchorFilter, distinct, world_candidates
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import capacity
from berth.position import Position


@dataclass(frozen=True)
class Summary:
    """What the answer says about one provider."""

    uuid: str
    parent_uuid: str | None
    root_uuid: str
    #: class -> (capacity, used), in the provider's inventory order
    resources: dict[str, tuple[int, int]]
    #: trait names in trait id order
    traits: list[str]


@dataclass
class Result:
    candidates: list[Candidate]
    world: World
    #: the providers the answer summarizes, in the order it lists them
    summarized: list[int] = field(default_factory=list)
    #: the groups as searched (None: an in_tree named no provider)
    specs: list[GroupSpec] | None = None
    #: trees the search visited (those the plan kept)
    trees: int = 0
    #: True when ``limit`` left candidates out of the answer
    cut: bool = False


def find_candidates(
    conn: Connection,
    cache: CandidateCache,
    groups: list[RequestGroup],
    wide: RequestWide,
    settings: Settings,
    *,
    nested_aware: bool = True,
    position: Position | None = None,
) -> Result:
    """The allocation candidates for ``groups``, over ``cache``'s world
    (as new as ``position`` when given: see ``CandidateCache.current``).

    Raises BadRequest for an unknown resource class or trait, checked in
    the order upstream checks them.
    """
    world, specs = resolve(conn, cache, groups, wide, position)
    if specs is None:
        return Result([], world)
    anchors = plan(world, groups, settings.order)
    # One beyond the limit, so that the answer tells whether it was cut.
    # (A limit of sys.maxsize, the most a query may ask, cuts nothing.)
    limit = wide.limit if wide.limit and wide.limit < sys.maxsize else 0
    chosen = search(
        world,
        specs,
        replace(wide, limit=limit + 1) if limit else wide,
        settings,
        nested_aware=nested_aware,
        anchors=anchors,
    )
    cut = bool(limit) and len(chosen) > limit
    if cut:
        del chosen[limit:]
    return Result(
        chosen, world, summarized(world, chosen, whole_trees=nested_aware), specs, len(anchors), cut
    )


def resolve(
    conn: Connection,
    cache: CandidateCache,
    groups: list[RequestGroup],
    wide: RequestWide,
    position: Position | None = None,
) -> tuple[World, list[GroupSpec] | None]:
    """``cache``'s world (as new as ``position`` when given) and the
    groups' specs (None when an ``in_tree`` names no provider, so nothing
    can match).

    Raises BadRequest for an unknown resource class or trait, checked in
    the order upstream checks them.
    """
    cached = cache.current(conn, position)
    world = cached.world
    root_traits = load.trait_ids(
        wide.root_required | wide.root_forbidden,
        cached.trait_ids(conn, wide.root_required | wide.root_forbidden),
    )
    rc_ids = cached.class_ids(conn, [rc for g in groups for rc in g.resources])
    known = cached.trait_ids(conn, set().union(*(g.trait_names for g in groups)))
    known.update(root_traits)
    for group in groups:
        # Checked group by group, in upstream's order.
        load.class_ids(group.resources, rc_ids)
        load.trait_ids(group.trait_names, known)
    return world, group_specs(world, groups)


def plan(
    world: World,
    groups: list[RequestGroup],
    order: Order = Order(),
    rng: random.Random | None = None,
) -> list[int]:
    """The anchors worth visiting, in uuid order (or, for a scored
    ``order``, best first, ties in the order ``rng`` draws; for
    ``random``, in the order ``rng`` draws: by default the
    process's ``order.SOURCE``), found as
    the search asks for them (``planner.Plan``: its length, once the
    search is done, is the trees visited).

    A tree is only worth visiting when, for every positive ``member_of``
    set and every required-trait set of any group, one of its providers,
    or a sharing provider serving it, is in one of the set's aggregates or
    has one of the set's traits. A superset of the trees that can serve:
    the search still checks each candidate exactly.
    """
    ranked = shuffle = None
    if order.scored:
        ranked = (ranking(world, order), rng or SOURCE)
    elif order.name == "random":
        shuffle = rng or SOURCE
    return Plan(
        world,
        tuple(r for g in groups for r in g.required),
        tuple(m for g in groups for m in g.member_of),
        ranked=ranked,
        shuffle=shuffle,
    )


def group_specs(world: World, groups: list[RequestGroup]) -> list[GroupSpec] | None:
    """The groups with ``in_tree`` resolved to a root (None when one
    names no provider: nothing can match)."""
    specs = []
    for group in groups:
        if group.in_tree is None:
            specs.append(GroupSpec(group))
            continue
        pid = world.by_uuid.get(group.in_tree)
        if pid is None:
            return None
        specs.append(GroupSpec(group, world.providers[pid].root_id))
    return specs


def anchor_filter(world: World, wide: RequestWide) -> AnchorFilter:
    """Which anchors root_required lets through (a root must have every
    required trait and none of the forbidden ones)."""
    if not (wide.root_required or wide.root_forbidden):
        return ANY
    required = tuple(frozenset([n]) for n in sorted(wide.root_required))

    def ok(anchor: int) -> bool:
        p = world.providers[anchor]
        return p.parent_id is None and traits_ok(p.traits, required, wide.root_forbidden)

    return ok


def has_candidate(world: World, specs: list[GroupSpec], wide: RequestWide, anchor: int) -> bool:
    """True when the tree rooted at ``anchor`` gives at least one
    candidate (the merge stops at the first)."""
    found = world_candidates(world, specs, wide, [anchor], anchor_filter(world, wide))
    return next(found, None) is not None


def search(
    world: World,
    specs: list[GroupSpec],
    wide: RequestWide,
    settings: Settings = Settings(),
    *,
    nested_aware: bool = True,
    anchors: list[int] | None = None,
    rng: random.Random | None = None,
) -> list[Candidate]:
    """The candidates over ``world`` (no database), visiting ``anchors``
    (default: every root, in ``settings.order``) in order; in the
    ``random`` order each tree's candidates in the order ``rng`` draws
    (by default the process's ``order.SOURCE``)."""
    memo = world.memo.get(AnchorMemo)
    if memo is None and settings.memo:
        memo = world.memo.setdefault(AnchorMemo, AnchorMemo(settings.memo))
    name = settings.order.name
    shuffle = (rng or SOURCE) if name == "random" else None
    if anchors is None:
        anchors = (
            list(ranking(world, settings.order).best_first(rng or SOURCE))
            if settings.order.scored
            else list(Plan(world, (), (), shuffle=shuffle))
            if shuffle
            else world.roots
        )
    stream = distinct(
        world_candidates(
            world,
            specs,
            wide,
            anchors,
            anchor_filter(world, wide),
            settings.strategy,
            memo,
            shuffle,
        ),
        set(),
    )
    return _select(stream, world, wide, settings, nested_aware)


def _select(
    stream: Iterator[Candidate],
    world: World,
    wide: RequestWide,
    settings: Settings,
    nested_aware: bool,
) -> list[Candidate]:
    if settings.max_candidates >= 0:
        stream = itertools.islice(stream, settings.max_candidates)
    if not nested_aware:
        stream = (c for c in stream if _one_per_tree(world, c))
    limit = wide.limit
    return list(itertools.islice(stream, limit) if limit else stream)


def _one_per_tree(world: World, cand: Candidate) -> bool:
    """Before 1.29 a candidate may not use two providers of one tree."""
    roots = [world.providers[p].root_id for p in cand.allocs]
    return len(roots) == len(set(roots))


def summarized(world: World, cands: Iterable[Candidate], *, whole_trees: bool) -> list[int]:
    """Every provider in the trees the candidates use (or, with
    ``whole_trees`` False, just the providers they use), tree by tree in
    uuid order."""
    used = {p for c in cands for p in c.allocs}
    if not whole_trees:
        return sorted(used, key=world.uuid)
    roots = {world.providers[p].root_id for p in used}
    # world.roots is in uuid order already (every loaded root is there):
    # picking from it beats sorting when the answer spans many trees.
    ordered: list[int] = []
    if len(roots) * 8 >= len(world.roots):
        ordered = [r for r in world.roots if r in roots]
    if len(ordered) != len(roots):
        ordered = sorted(roots, key=world.uuid)
    return [p for r in ordered for p in world.trees[r]]


def summary(world: World, pid: int) -> Summary:
    """Provider ``pid`` as the answer's provider_summaries describe it."""
    p = world.providers[pid]
    parent = world.providers[p.parent_id].uuid if p.parent_id else None
    res = {
        rc: (capacity(inv.total, inv.reserved, inv.allocation_ratio), p.used.get(rc, 0))
        for rc, inv in p.inventories.items()
    }
    return Summary(p.uuid, parent, world.uuid(p.root_id), res, p.ordered_traits())
