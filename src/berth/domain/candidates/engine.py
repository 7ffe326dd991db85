"""GET /allocation_candidates, start to finish, minus HTTP.

``find_candidates`` resolves names, loads the world, builds each group's
offers, merges them lazily and applies max_allocation_candidates, the
nested-provider rule of old microversions, ``limit`` and randomisation.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import tables as t
from berth.domain import common
from berth.domain.candidates import load
from berth.domain.candidates.model import Provider, World, traits_ok
from berth.domain.candidates.request import RequestGroup, RequestWide, Settings
from berth.domain.candidates.search import (
    AnchorFilter,
    Candidate,
    GroupSpec,
    distinct,
    world_candidates,
)
from berth.domain.capacity import capacity


@dataclass
class Summary:
    """What the answer says about one provider."""

    uuid: str
    parent_uuid: str | None
    root_uuid: str
    resources: dict[str, tuple[int, int]] = field(default_factory=dict)
    traits: list[str] = field(default_factory=list)


@dataclass
class Result:
    candidates: list[Candidate]
    summaries: dict[int, Summary]
    world: World | None = None


EMPTY = Result([], {})


#: Anchors loaded in the first batch when ``limit`` allows stopping early.
FIRST_BATCH = 64


def find_candidates(conn: Connection, groups: list[RequestGroup],
                    wide: RequestWide, settings: Settings,
                    nested_aware: bool = True) -> Result:
    """The allocation candidates for ``groups``, with provider summaries.

    Raises BadRequest for an unknown resource class or trait, checked in
    the order upstream checks them.
    """
    root_traits = load.trait_ids(conn, wide.root_required | wide.root_forbidden)
    rc_ids = common.resource_class_ids(conn, [rc for g in groups
                                              for rc in g.resources])
    known = common.trait_ids(conn, set().union(*(g.trait_names
                                                 for g in groups)))
    known.update(root_traits)
    aggs = {a for g in groups for a in g.forbidden_aggs.union(*g.member_of)}
    specs = []
    for group in groups:
        # Checked group by group, in upstream's order, without asking the
        # database again.
        load.class_ids(conn, group.resources, known=rc_ids)
        load.trait_ids(conn, group.trait_names, known=known)
        spec = _spec(conn, group)
        if spec is None:
            return EMPTY
        specs.append(spec)
    found = load.plan(conn, rc_ids, known, aggs,
                      [m for g in groups for m in g.member_of],
                      [r for g in groups for r in g.required])
    seen: dict[int, Provider] = {}
    worlds: list[World] = []
    stream = _stream(conn, rc_ids, found, specs, wide, settings, seen, worlds)
    chosen = _select(stream, seen, wide, settings, nested_aware)
    # One batch (the usual case) already built the world; several batches
    # are merged into one for the summaries.
    world = (worlds[0] if len(worlds) == 1
             else World(seen.values(), found.anchors))
    return Result(chosen, summaries(conn, world, chosen, nested_aware), world)


def _batches(roots: list[int], wide: RequestWide,
             settings: Settings) -> Iterator[list[int]]:
    """Anchors in growing batches when a limit can stop the search early;
    all at once when every candidate is needed anyway."""
    if (settings.randomize or not wide.limit
            or settings.strategy == "breadth-first"):
        yield roots
        return
    start, size = 0, max(FIRST_BATCH, 2 * wide.limit)
    while start < len(roots):
        yield roots[start:start + size]
        start += size
        size *= 2


def _spec(conn: Connection, group: RequestGroup) -> GroupSpec | None:
    """The group with ``in_tree`` resolved (None: no such provider)."""
    if group.in_tree is None:
        return GroupSpec(group)
    rp = t.resource_providers
    row = conn.execute(sa.select(rp.c.root_provider_id)
                       .where(rp.c.uuid == group.in_tree)).first()
    return None if row is None else GroupSpec(group, row[0])


def _anchor_filter(world: World, wide: RequestWide) -> AnchorFilter:
    """Which anchors root_required lets through (a root must have every
    required trait and none of the forbidden ones)."""
    if not (wide.root_required or wide.root_forbidden):
        return lambda anchor: True
    required = tuple(frozenset([n]) for n in sorted(wide.root_required))

    def ok(anchor: int) -> bool:
        p = world.providers[anchor]
        return p.parent_id is None and traits_ok(p.traits, required,
                                                 wide.root_forbidden)
    return ok


def _stream(conn: Connection, rc_ids: dict[str, int], found: load.Plan,
            specs: list[GroupSpec], wide: RequestWide, settings: Settings,
            seen: dict[int, Provider], worlds: list[World]
            ) -> Iterator[Candidate]:
    """Distinct candidates, batch by batch of anchors; ``seen`` collects
    the providers loaded on the way, ``worlds`` each batch's world."""
    keys: set[tuple[object, ...]] = set()
    for batch in _batches(found.roots, wide, settings):
        world = load.load_world(conn, rc_ids, found, batch)
        seen.update(world.providers)
        worlds.append(world)
        yield from distinct(world_candidates(
            world, specs, wide, batch, _anchor_filter(world, wide),
            settings.strategy), keys)


def search(world: World, specs: list[GroupSpec], wide: RequestWide,
           settings: Settings = Settings(), nested_aware: bool = True
           ) -> list[Candidate]:
    """The candidates over an already built world (no database)."""
    stream = distinct(world_candidates(
        world, specs, wide, world.roots, _anchor_filter(world, wide),
        settings.strategy), set())
    return _select(stream, world.providers, wide, settings, nested_aware)


def _select(stream: Iterator[Candidate], seen: dict[int, Provider],
            wide: RequestWide, settings: Settings, nested_aware: bool
            ) -> list[Candidate]:
    if settings.max_candidates >= 0:
        stream = itertools.islice(stream, settings.max_candidates)
    if not nested_aware:
        stream = (c for c in stream if _one_per_tree(seen, c))
    limit = wide.limit
    if not settings.randomize:
        return list(itertools.islice(stream, limit) if limit else stream)
    found = list(stream)
    if limit and limit < len(found):
        return random.sample(found, limit)
    random.shuffle(found)
    return found


def _one_per_tree(seen: dict[int, Provider], cand: Candidate) -> bool:
    """Before 1.29 a candidate may not use two providers of one tree."""
    roots = [seen[p].root_id for p in cand.allocs]
    return len(roots) == len(set(roots))


def summaries(conn: Connection, world: World, cands: Iterable[Candidate],
              whole_trees: bool) -> dict[int, Summary]:
    """Summaries of every provider in the trees the candidates use (or,
    with ``whole_trees`` False, of just the providers they use)."""
    used = {p for c in cands for p in c.allocs}
    roots = {world.providers[p].root_id for p in used}
    if whole_trees:
        ids = [p for r in sorted(roots, key=world.uuid) for p in world.trees[r]]
    else:
        ids = sorted(used, key=world.uuid)
    if not ids:
        return {}
    names = trait_names(conn, None if load.most_of_table(conn, len(ids))
                        else roots)
    out: dict[int, Summary] = {}
    for pid in ids:
        p = world.providers[pid]
        parent = world.providers[p.parent_id].uuid if p.parent_id else None
        res = {rc: (capacity(inv.total, inv.reserved, inv.allocation_ratio),
                    p.used.get(rc, 0)) for rc, inv in p.inventories.items()}
        out[pid] = Summary(p.uuid, parent, world.uuid(p.root_id), res,
                           names.get(pid, []))
    return out


def trait_names(conn: Connection, roots: set[int] | None
                ) -> dict[int, list[str]]:
    """provider id -> all its trait names, for the trees of ``roots``
    (None: every provider), in trait id order (standard traits first,
    then custom ones by age), which is the order upstream's answers
    show."""
    rp, rpt, tr = t.resource_providers, t.resource_provider_traits, t.traits
    query = (sa.select(rpt.c.resource_provider_id, tr.c.name)
             .join(tr, tr.c.id == rpt.c.trait_id)
             .order_by(rpt.c.resource_provider_id, tr.c.id))
    if roots is not None:
        query = query.join(rp, rp.c.id == rpt.c.resource_provider_id).where(
            rp.c.root_provider_id.in_(sorted(roots)))
    rows = conn.execute(query)
    out: dict[int, list[str]] = {}
    for pid, name in rows:
        out.setdefault(pid, []).append(name)
    return out
