"""The order an answer comes in, and the score that ranks trees in it.

``uuid`` (the default) lists candidates tree by tree in root uuid order;
``random`` (upstream's ``randomize_allocation_candidates``) lists them
tree by tree too, the trees in a random order drawn per request and each
tree's candidates shuffled (``planner``, ``search``), so that ``limit``
still stops the search early. ``spread`` and
``pack`` rank trees by a *score* (``tree_score``) and hand the search the
trees best first, so that with ``limit`` the search still stops early and
the candidates it returns are the best of the whole answer.

A tree's score sums, for each weighted resource class, the weight times
the share of the tree's capacity of that class that is free (``spread``)
or used (``pack``), as Nova's RAM and CPU weighers weigh a host by its
free amount; plus the weight of each preferred (positive) or discouraged
(negative) trait that a provider of the tree has. Sharing providers of
other trees do not count: they serve many trees alike, and Nova weighs
the compute node. Trees of equal score come in a random order, drawn
afresh per request, so that concurrent schedulers take different trees.

A ``Ranking`` (``rankings``) keeps every root sorted by this score for
one order: it lives in the world it ranks (``World.rankings``) and the
cache's refreshes re-rank the trees they touch (``world_patch``), so a
request walks a sorted list instead of sorting.
"""

from __future__ import annotations

import itertools
import os
import random

from berth.domain.allocation_candidate.request import (
    DEFAULT_WEIGHTS,
    NAMES,
    Order,
)
from berth.domain.allocation_candidate.world import World

#: Scores are rounded to this many decimals, so that trees whose shares
#: are equal but were summed in another order tie.
DIGITS = 9


#: The random source of requests that bring none: one per process (a
#: ``random.Random()`` per request would seed from the OS each time),
#: seeded afresh in each forked worker so that workers
#: draw different ties. Its draws are single C calls, safe across
#: threads.
SOURCE = random.Random()
os.register_at_fork(after_in_child=SOURCE.seed)


def make_order(
    name: str, weights: dict[str, float] | None = None, preferences: dict[str, float] | None = None
) -> Order:
    """An ``Order`` from options (None weights: ``DEFAULT_WEIGHTS``).
    Raises ValueError for an unknown name."""
    if name not in NAMES:
        raise ValueError("unknown order %r" % name)
    return Order(
        name,
        DEFAULT_WEIGHTS if weights is None else tuple(sorted(weights.items())),
        tuple(sorted((preferences or {}).items())),
    )


def tree_score(world: World, root: int, order: Order, kept: int = 0) -> float:
    """The score of the tree rooted at ``root`` under ``order`` (higher
    comes first). A class the tree has no capacity of adds nothing.
    ``kept``: ``order``'s ``token``, under which a tree of one provider
    keeps its score on that provider (``Provider.score``) and finds it
    there again (0: worked out, not kept)."""
    tree = world.trees[root]
    if len(tree) != 1:
        return _summed_score(world, root, order)
    # A tree of one provider (most compute nodes), read off it alone,
    # the same sums as ``_summed_score`` (this is every claim's upkeep,
    # twice, so it counts: bench/journal/2026-12-04.md). A ranking keeps
    # it there: a claim's refresh reads the old score off the provider
    # it replaces, put there when the ranking was built or last patched
    # (a fraction of scoring it again).
    p = world.providers[root]
    if kept:
        was = p.score
        if was is not None and was.real == kept:
            return was.imag
    pack = order.name == "pack"
    room, used = p.room, p.used
    total = 0.0
    for rc, weight in order.weights:
        r = room.get(rc)
        if r is not None:
            have = r[0]
            cap = have + used.get(rc, 0)
            if cap > 0:
                total += weight * ((cap - have) if pack else have) / cap
    if order.preferences:
        total += sum(w for name, w in order.preferences if name in p.traits)
    score = round(total, DIGITS)
    if kept:
        p.score = complex(kept, score)
    return score


#: Each order ranked so far, by value, and its token (``token``).
_TOKENS: dict[Order, int] = {}

#: Where tokens come from (``next`` is one C call: no two orders get
#: the same token, whichever threads ask).
_NEXT = itertools.count(1)


def token(order: Order) -> int:
    """A number of ``order``'s own, the same for every equal order, under
    which lone providers keep their score (``tree_score``)."""
    return _TOKENS.setdefault(order, next(_NEXT))


def _summed_score(world: World, root: int, order: Order) -> float:
    """``tree_score`` summed over every provider of the tree, class by
    class (``World.tree_class``): any tree, one provider or many."""
    providers = world.providers
    pack = order.name == "pack"
    total = 0.0
    for rc, weight in order.weights:
        cap = free = 0
        for pid in world.tree_class.get((root, rc), ()):
            p = providers[pid]
            # ``room`` holds capacity minus usage already (``room_of``).
            have = p.room[rc][0]
            free += have
            cap += have + p.used.get(rc, 0)
        if cap > 0:
            total += weight * ((cap - free) if pack else free) / cap
    if order.preferences:
        traits: set[str] = set()
        for pid in world.trees[root]:
            traits |= providers[pid].traits
        total += sum(w for name, w in order.preferences if name in traits)
    return round(total, DIGITS)


Key = tuple[float, int]


def key(world: World, root: int, order: Order, kept: int = 0) -> Key:
    """Where the tree rooted at ``root`` sorts in ``order``'s ranking
    (``kept`` as for ``tree_score``)."""
    return (-tree_score(world, root, order, kept), root)
