"""The order an answer comes in: trees ranked by a score, kept sorted.

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

A ``Ranking`` keeps every root sorted by score for one order. It lives in
the world it ranks (``World.rankings``, built when a request first asks
for that order) and the cache's refreshes re-rank the trees they touch
(``world_patch``), so a request walks a sorted list instead of sorting.
"""

from __future__ import annotations

import bisect
import os
import random
from collections.abc import Iterator

from berth.domain.allocation_candidate.request import (
    DEFAULT_WEIGHTS,
    NAMES,
    Order,
)
from berth.domain.allocation_candidate.world import World

#: Scores are rounded to this many decimals, so that trees whose shares
#: are equal but were summed in another order tie.
DIGITS = 9

#: Rankings a world keeps (one per distinct order asked for); an order
#: asked beyond them is ranked for its request alone.
KEPT = 8

#: The random source of requests that bring none: one per process (a
#: ``random.Random()`` per request costs about 9 microseconds, seeding
#: from the OS), seeded afresh in each forked worker so that workers
#: draw different ties. Its draws are single C calls, safe across
#: threads.
SOURCE = random.Random()
os.register_at_fork(after_in_child=SOURCE.seed)


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


def key(world: World, root: int, order: Order) -> Key:
    """Where the tree rooted at ``root`` sorts in ``order``'s ranking."""
    return (-tree_score(world, root, order), root)


class Ranking:
    """Every root of a world in ``order``, best first: ``keys`` holds
    (-score, root), sorted (a root's key is ``key``: worked out again
    from the world when needed, not kept per root, so that a copy costs
    one list)."""

    def __init__(self, order: Order, keys: list[Key]) -> None:
        self.order = order
        self.keys = keys

    @classmethod
    def build(cls, world: World, order: Order) -> Ranking:
        return cls(order, sorted(key(world, root, order)
                                 for root in world.roots))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Ranking) and self.order == other.order
                and self.keys == other.keys)

    __hash__ = None  # type: ignore[assignment]

    def patched(self, world: World, old: dict[int, Key | None],
                in_place: bool) -> Ranking:
        """This ranking with the roots of ``old`` (each root's key in the
        world this ranking ranks, None where it was no root there)
        re-scored in ``world``: a copy, or (``in_place``) this ranking
        itself, edited."""
        keys = self.keys if in_place else list(self.keys)
        for root, was in old.items():
            now = key(world, root, self.order) if world.is_root(root) \
                else None
            if was is None:
                if now is not None:
                    bisect.insort(keys, now)
            elif now is None:
                del keys[bisect.bisect_left(keys, was)]
            else:
                _move(keys, bisect.bisect_left(keys, was), now)
        return self if in_place else Ranking(self.order, keys)

    def best_first(self, rng: random.Random) -> Iterator[int]:
        """The roots, best first; each run of equal scores in an order
        ``rng`` draws as the run is read (reading the first few of a
        long run costs those few)."""
        keys = self.keys
        get = rng.getrandbits
        i, count = 0, len(keys)
        while i < count:
            score, root = keys[i]
            if i + 1 == count or keys[i + 1][0] != score:
                yield root
                i += 1
                continue
            end = bisect.bisect_right(keys, (score, float("inf")), i)
            # ``shuffled``'s first half, inlined (its rest is shared):
            # this is the walk of every request, and a long run is seldom
            # read past half. Measured against one draw owned by
            # ``shuffled`` (the runs chained in C, each a ``map`` over
            # ``shuffled``, 2026-12-03, callgrind, 50,000 hosts, steady,
            # ``limit=50``): 0.54 M instructions a step here, 0.81 M so.
            run = end - i
            bits, half = run.bit_length(), run // 2
            taken: set[int] = set()
            while len(taken) < half:
                j = get(bits)
                if j < run and j not in taken:
                    taken.add(j)
                    yield keys[i + j][1]
            for at in shuffled(i, end, rng, taken):
                yield keys[at][1]
            i = end


def _move(keys: list[Key], i: int, now: Key) -> None:
    """Replace ``keys[i]`` by ``now``, keeping ``keys`` sorted: only the
    keys between the old and new places shift (a claim moves a tree a
    little way, where a ``del`` and an ``insort`` would each move every
    key after it: 400 KB at 50,000 hosts)."""
    j = bisect.bisect_left(keys, now)
    if j > i:
        keys[i:j - 1] = keys[i + 1:j]
        keys[j - 1] = now
    else:
        keys[j + 1:i + 1] = keys[j:i]
        keys[j] = now


def shuffled(start: int, stop: int, rng: random.Random,
             taken: set[int] | None = None) -> Iterator[int]:
    """The numbers ``start`` to ``stop - 1`` (but ``start + j`` for each
    ``j`` in ``taken``: those read already) in an order ``rng`` draws,
    drawn as they are read, so that reading the first few of many costs
    those few. While fewer than half have come, by rejection: ``j``
    drawn as so many random bits as the count needs, drawn again when it
    is past the count or taken already (one C call and a set lookup a
    number, where a lazy Fisher-Yates draws a float, scales it and keeps
    its swaps in a dict: a quarter fewer instructions, callgrind); then
    the rest by Fisher-Yates. Numbers drawn independently and kept at
    their first draw come in a uniformly random order."""
    count = stop - start
    taken = set() if taken is None else taken
    add = taken.add
    get = rng.getrandbits
    bits, half = count.bit_length(), count // 2
    while len(taken) < half:
        j = get(bits)
        if j < count and j not in taken:
            add(j)
            yield start + j
    rest = [start + j for j in range(count) if j not in taken]
    draw = rng.random
    size = len(rest)
    for i in range(size):
        j = i + int(draw() * (size - i))
        rest[i], rest[j] = rest[j], rest[i]
        yield rest[i]


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


#: Per kept order, the keys some roots had before a refresh (None: not
#: a root): what ``reranked`` moves.
Before = dict[Order, dict[int, Key | None]]


def before(world: World, roots: set[int]) -> Before:
    """The keys ``roots`` have in each of ``world``'s rankings, read
    before a refresh edits anything (in place, it edits this world)."""
    # A copy of the keys: another request may rank this world meanwhile.
    return {order: {root: key(world, root, order)
                    if world.is_root(root) else None for root in roots}
            for order in list(world.rankings)}


def reranked(old: World, new: World, was: Before, in_place: bool
             ) -> dict[Order, Ranking]:
    """The rankings of ``new``: those of ``old`` that ``was`` (read
    ``before`` the refresh) covers, with its roots re-scored in ``new``.
    A ranking made of ``old`` since is left out (``new`` ranks anew
    when asked)."""
    out: dict[Order, Ranking] = {}
    for order, moved in was.items():
        kept: Ranking = old.rankings[order]
        out[order] = kept.patched(new, moved, in_place) if moved else kept
    return out
