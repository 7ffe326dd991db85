"""How many more copies of one allocation-candidates request fit.

Two numbers, in total, per tree and per aggregate:

- ``placed``, what a *greedy placement* achieves: take the first
  candidate the engine returns (default order: trees by root uuid), claim
  it, and repeat until the request gets no candidate. This is exactly
  what a scheduler that always claims the first candidate would do, so
  every rule a real claim meets applies (capacity with reserved and
  allocation ratio, min_unit/max_unit/step_size, traits, aggregates,
  sharing, in_tree, same_subtree, isolation, root_required). Usage only
  grows, so a tree that gives no candidate never gives one again: the
  placement finishes tree by tree, and a candidate, once first, is
  claimed again as long as it stays valid (``_claim`` counts those
  claims at once).
- ``bound``, an upper bound from capacity: a tree that gives no
  candidate now gets 0; any other gets, over the classes the request
  asks for, the least of (free room of every provider that could take
  the class for some group: the tree's own and the sharing providers
  serving it, that pass the rules claims cannot change: units, the
  group's traits and aggregates) divided by what one copy needs of the
  class. The total is the least of the trees' sum and the same division
  over every provider eligible in some tree, each counted once (a
  sharing pool serves many trees but holds its room once); an
  aggregate's is the sum over the trees that have a provider in it or
  are served by a sharing provider in it.

No placement can do better than ``bound``, and the greedy one achieves
``placed``, so the most that fit lies between the two; where they are
equal (``exact``) that is the answer. (The true maximum may need a
search over claim orders, which the greedy placement does not make.)

A copy counts towards an aggregate when its tree's root or one of the
providers it uses is in the aggregate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from berth.domain.allocation_candidate import faults, world_patch
from berth.domain.allocation_candidate.engine import anchor_filter, has_candidate
from berth.domain.allocation_candidate.merge import Candidate
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.request import RequestWide
from berth.domain.allocation_candidate.search import world_candidates
from berth.domain.allocation_candidate.world import World

#: The greedy placement stops after this many searches (each claims one
#: candidate as many times in a row as it can); ``complete`` is then False
#: and ``placed`` only a lower bound.
MAX_STEPS = 100_000


@dataclass(frozen=True)
class Count:
    """Copies the greedy placement made, and at most how many can fit."""

    placed: int
    bound: int

    @property
    def exact(self) -> bool:
        return self.placed == self.bound


@dataclass
class Fit:
    total: Count
    #: root id -> count, for every tree whose bound is above 0
    trees: dict[int, Count] = field(default_factory=dict)
    #: aggregate uuid -> count, for every aggregate whose bound is above 0
    aggregates: dict[str, Count] = field(default_factory=dict)
    #: False when the greedy placement hit ``max_steps``
    complete: bool = True


def fit(
    world: World, specs: list[GroupSpec] | None, wide: RequestWide, max_steps: int = MAX_STEPS
) -> Fit:
    """How many more copies of the request fit in ``world`` (which is
    not changed). ``specs`` None (an unknown ``in_tree``): none."""
    if specs is None:
        return Fit(Count(0, 0))
    bounds, total_bound = _bounds(world, specs, wide)
    placed, by_agg, complete = _greedy(
        world, specs, wide, [r for r, b in bounds.items() if b], max_steps
    )
    trees = {r: Count(placed.get(r, 0), b) for r, b in bounds.items() if b}
    aggregates = {}
    for agg in sorted(world.by_agg):
        bound = min(
            total_bound, sum(bounds[r] for r in world.roots_of(world.by_agg[agg]) if r in bounds)
        )
        if bound:
            aggregates[agg] = Count(by_agg.get(agg, 0), bound)
    return Fit(Count(sum(placed.values()), total_bound), trees, aggregates, complete)


def _demand(specs: list[GroupSpec]) -> dict[str, int]:
    """What one copy takes of each class, over all groups."""
    demand: dict[str, int] = {}
    for spec in specs:
        for rc, n in spec.group.resources.items():
            demand[rc] = demand.get(rc, 0) + n
    return demand


def _eligible(
    world: World, pids: Iterable[int], specs: list[GroupSpec], rc: str, anchor: int
) -> set[int]:
    """Those of ``pids`` that could give ``rc`` to some group under
    ``anchor`` now, by the rules claims cannot undo: free room only
    shrinks, and units, traits and aggregates do not change (``faults``:
    a suffixed group's classes, traits and aggregates; the unsuffixed
    group's class, aggregates and forbidden traits)."""
    wanting = [s for s in specs if rc in s.group.resources]
    return {
        pid
        for pid in pids
        if rc in world.providers[pid].inventories
        and any(
            not (
                faults.granular_faults(world, s, pid)
                if s.group.same_provider
                else faults.spread_faults(world, s, anchor, pid, rc)
            )
            for s in wanting
        )
    }


def _free(world: World, pids: Iterable[int], rc: str) -> int:
    return sum(world.providers[pid].room[rc][0] for pid in pids)


def _bounds(world: World, specs: list[GroupSpec], wide: RequestWide) -> tuple[dict[int, int], int]:
    """Each tree's bound, and the total's: the least of their sum and,
    per class, the free room of every provider eligible in some tree
    (each counted once) over what one copy needs."""
    demand = _demand(specs)
    bounds: dict[int, int] = {}
    anywhere: dict[str, set[int]] = {rc: set() for rc in demand}
    for root in world.roots:
        if not has_candidate(world, specs, wide, root):
            bounds[root] = 0
            continue
        serving = world.trees[root] + world.shared_into.get(root, [])
        bound = None
        for rc, n in demand.items():
            pids = _eligible(world, serving, specs, rc, root)
            anywhere[rc] |= pids
            share = _free(world, pids, rc) // n
            bound = share if bound is None else min(bound, share)
        bounds[root] = bound or 0
    total = min(
        [sum(bounds.values())] + [_free(world, anywhere[rc], rc) // n for rc, n in demand.items()]
    )
    return bounds, total


def _greedy(
    world: World, specs: list[GroupSpec], wide: RequestWide, roots: list[int], max_steps: int
) -> tuple[dict[int, int], dict[str, int], bool]:
    """Claim the first candidate until there is none (see the module
    docstring): copies per tree and per aggregate, and whether it
    finished within ``max_steps`` searches. ``roots`` are the trees that
    give a candidate now, in uuid order (no other tree can give one
    later)."""
    # A private copy of the provider table, changed in place claim by
    # claim (the world's indexes stay valid: only usage changes).
    mine = world_patch.with_usage(world, {})
    accept = anchor_filter(world, wide)
    placed: dict[int, int] = {}
    by_agg: dict[str, int] = {}
    steps = 0
    for root in roots:
        while steps < max_steps:
            cand = next(world_candidates(mine, specs, wide, [root], accept), None)
            if cand is None:
                break
            steps += 1
            copies = _claim(mine, cand)
            placed[root] = placed.get(root, 0) + copies
            for agg in _aggregates(mine, root, cand):
                by_agg[agg] = by_agg.get(agg, 0) + copies
    return placed, by_agg, steps < max_steps or _exhausted(mine, specs, wide, roots)


def _exhausted(world: World, specs: list[GroupSpec], wide: RequestWide, roots: list[int]) -> bool:
    return not any(has_candidate(world, specs, wide, r) for r in roots)


def _claim(world: World, cand: Candidate) -> int:
    """Claim ``cand`` as many times in a row as the greedy placement would,
    in ``world``; return how many.

    Claiming never makes an earlier candidate valid again, so ``cand``
    stays the first one while it stays valid: while each provider still
    has free room for its whole share (its max_unit and the groups' units
    do not change). That is ``free // share`` times, the least over the
    providers and classes it uses.
    """
    providers = world.providers
    copies = min(
        providers[pid].room[rc][0] // n for pid, res in cand.allocs.items() for rc, n in res.items()
    )
    for pid, res in cand.allocs.items():
        p = providers[pid]
        used = dict(p.used)
        for rc, n in res.items():
            used[rc] = used.get(rc, 0) + n * copies
        providers[pid] = dataclasses.replace(p, used=used)
    return copies


def _aggregates(world: World, root: int, cand: Candidate) -> set[str]:
    found = set(world.providers[root].aggregates)
    for pid in cand.allocs:
        found |= world.providers[pid].aggregates
    return found
