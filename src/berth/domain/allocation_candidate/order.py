"""The order an answer comes in: trees ranked by a score, kept sorted.

``uuid`` (the default) lists candidates tree by tree in root uuid order;
``random`` shuffles the whole answer before ``limit`` applies, as
upstream's ``randomize_allocation_candidates`` does. ``spread`` and
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

A ``Ranking`` keeps every root sorted by score for one order. It lives in
the world it ranks (``World.rankings``, built when a request first asks
for that order) and the cache's refreshes re-rank the trees they touch
(``world_patch``), so a request walks a sorted list instead of sorting.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator

from berth.domain.allocation_candidate.request import (
    DEFAULT_WEIGHTS,
    NAMES,
    Order,
)
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import capacity

#: Scores are rounded to this many decimals, so that trees whose shares
#: are equal but were summed in another order tie.
DIGITS = 9

#: Rankings a world keeps (one per distinct order asked for); an order
#: asked beyond them is ranked for its request alone.
KEPT = 8


def make_order(name: str, weights: dict[str, float] | None = None,
               preferences: dict[str, float] | None = None) -> Order:
    """An ``Order`` from options (None weights: ``DEFAULT_WEIGHTS``).
    Raises ValueError for an unknown name."""
    if name not in NAMES:
        raise ValueError("unknown order %r" % name)
    return Order(name,
                 DEFAULT_WEIGHTS if weights is None
                 else tuple(sorted(weights.items())),
                 tuple(sorted((preferences or {}).items())))


def tree_score(world: World, root: int, order: Order) -> float:
    """The score of the tree rooted at ``root`` under ``order`` (higher
    comes first). A class the tree has no capacity of adds nothing."""
    providers = world.providers
    pack = order.name == "pack"
    total = 0.0
    for rc, weight in order.weights:
        cap = free = 0
        for pid in world.tree_class.get((root, rc), ()):
            p = providers[pid]
            inv = p.inventories[rc]
            have = capacity(inv.total, inv.reserved, inv.allocation_ratio)
            cap += have
            free += have - p.used.get(rc, 0)
        if cap > 0:
            total += weight * ((cap - free) if pack else free) / cap
    if order.preferences:
        traits: set[str] = set()
        for pid in world.trees[root]:
            traits |= providers[pid].traits
        total += sum(w for name, w in order.preferences if name in traits)
    return round(total, DIGITS)


Key = tuple[float, int]


class Ranking:
    """Every root of a world in ``order``, best first: ``keys`` holds
    (-score, root) sorted, ``at`` each root's key."""

    def __init__(self, order: Order, keys: list[Key],
                 at: dict[int, Key]) -> None:
        self.order = order
        self.keys = keys
        self.at = at

    @classmethod
    def build(cls, world: World, order: Order) -> Ranking:
        at = {root: (-tree_score(world, root, order), root)
              for root in world.roots}
        return cls(order, sorted(at.values()), at)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Ranking) and self.order == other.order
                and self.keys == other.keys)

    __hash__ = None  # type: ignore[assignment]

    def patched(self, world: World, roots: set[int], in_place: bool
                ) -> Ranking:
        """This ranking with ``roots`` re-scored in ``world`` (each
        removed, and put back where it now sorts if it is still a root):
        a copy, or (``in_place``) this ranking itself, edited."""
        keys = self.keys if in_place else list(self.keys)
        at = self.at if in_place else dict(self.at)
        for root in roots:
            old = at.pop(root, None)
            if old is not None:
                del keys[bisect.bisect_left(keys, old)]
            if world.is_root(root):
                new = at[root] = (-tree_score(world, root, self.order), root)
                bisect.insort(keys, new)
        return self if in_place else Ranking(self.order, keys, at)

    def score(self, root: int) -> float:
        """``root``'s score (a root this ranking holds)."""
        return -self.at[root][0]

    def best_first(self, rng: random.Random) -> Iterator[int]:
        """The roots, best first; each run of equal scores in an order
        ``rng`` draws as the run is read (reading the first few of a
        long run costs those few)."""
        keys = self.keys
        i, count = 0, len(keys)
        while i < count:
            end = bisect.bisect_right(keys, (keys[i][0], float("inf")), i)
            if end - i == 1:
                yield keys[i][1]
            else:
                yield from _shuffled(keys, i, end, rng)
            i = end


def _shuffled(keys: list[Key], start: int, stop: int, rng: random.Random
              ) -> Iterator[int]:
    """The roots of ``keys[start:stop]`` in a random order, drawn one at
    a time (Fisher-Yates, the swaps kept in a dict)."""
    swapped: dict[int, int] = {}
    for i in range(start, stop):
        j = rng.randrange(i, stop)
        pick = swapped.get(j, j)
        swapped[j] = swapped.get(i, i)
        yield keys[pick][1]


def ranking(world: World, order: Order) -> Ranking:
    """``world``'s ranking for ``order``: kept in ``world.rankings``
    (built on first use) unless ``KEPT`` other orders are kept already."""
    found: Ranking | None = world.rankings.get(order)
    if found is not None:
        return found
    made = Ranking.build(world, order)
    if len(world.rankings) < KEPT:
        kept: Ranking = world.rankings.setdefault(order, made)
        return kept
    return made


def reranked(old: World, new: World, roots: set[int], in_place: bool
             ) -> dict[Order, Ranking]:
    """``old``'s rankings with ``roots`` re-scored in ``new`` (for a
    refresh that changed those trees)."""
    out = old.rankings if in_place else {}
    for key, kept in list(old.rankings.items()):
        out[key] = kept.patched(new, roots, in_place) if roots else kept
    return out
