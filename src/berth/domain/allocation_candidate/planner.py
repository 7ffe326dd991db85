"""The trees worth visiting for a request, found as the search asks.

A tree can only serve a request when, for every positive ``member_of``
set and every required-trait set of any group, one of its providers, or
a sharing provider serving it, is in one of the set's aggregates or has
one of the set's traits (``World.tree_labels``). The planner hands the
search those trees in uuid order, and only as many as it asks for: with
``limit`` a request costs what it visits, not what the world holds.

There are two ways to find them. Walking the roots in order and checking
each one's labels costs the roots walked, which is little when many
trees qualify. Collecting the trees the least common set reaches through
the name indexes (``World.by_trait``, ``World.by_agg``) and sorting them
costs that set's members whatever the limit, which is little when few
qualify. The planner does not know the limit, so it walks first and,
once it has walked ``SWITCH`` times as many roots as the index would
cost, finishes from the index: never much more than the cheaper way.

In a scored order (``order``: ``spread``, ``pack``) the planner hands
the trees over best first instead: it walks the world's ranking, or,
when the least common set has few members, collects their trees through
the name indexes and sorts just those by score. In the ``random`` order
(``shuffle``) it hands them over in a random order drawn per request the
same two ways: down the roots as ``draws.started`` walks them (the first
few drawn at random, the rest in uuid order from a random root, round),
or collected through the name indexes and shuffled.
"""

from __future__ import annotations

import itertools
import operator
import random
from collections.abc import Iterator

from berth.domain.allocation_candidate.draws import started
from berth.domain.allocation_candidate.order import key
from berth.domain.allocation_candidate.rankings import Ranking
from berth.domain.allocation_candidate.world import World

#: How many roots the walk checks for each member the index would read
#: before the planner switches to the index (reading a member, checking
#: and sorting its tree, costs about as much as checking four roots,
#: counted with callgrind at 1,000 hosts).
SWITCH = 4

Sets = tuple[frozenset[str], ...]


class Plan(list[int]):
    """The anchors worth visiting, found lazily: iterating yields them in
    uuid order (or, ``ranked``, best first by that ranking, ties in the
    order its random source draws; or, ``shuffle``, in the order that
    random source draws), and the list holds those found so
    far, so that once the search is done ``len`` is the number of trees
    it visited.

    (A list, because ``engine.search`` takes its anchors as one.)
    """

    def __init__(
        self,
        world: World,
        traits: Sets,
        aggs: Sets,
        switch: int = SWITCH,
        ranked: tuple[Ranking, random.Random] | None = None,
        shuffle: random.Random | None = None,
    ) -> None:
        super().__init__()
        self._source = (
            _viable_ranked(world, traits, aggs, switch, *ranked)
            if ranked is not None
            else _viable_shuffled(world, traits, aggs, switch, shuffle)
            if shuffle is not None
            else _viable(world, traits, aggs, switch)
        )

    def __iter__(self) -> Iterator[int]:
        """Those found so far, then the rest as found (one iteration at
        a time: two interleaved would split the rest between them)."""
        # ``list.append`` returns None: ``filterfalse`` hands on every
        # root just after keeping it, a loop in C (no generator frame
        # resumed per tree).
        return itertools.chain(self[:], itertools.filterfalse(self.append, self._source))


def _viable(world: World, traits: Sets, aggs: Sets, switch: int) -> Iterator[int]:
    """The roots whose trees carry a label of every set, in uuid order."""
    # (Each ``_viable*`` hands over the plain walk itself where there is
    # nothing to check: no generator of its own between it and the search.)
    if not traits and not aggs:
        return iter(world.roots)
    return _viable_checked(world, traits, aggs, switch)


def _viable_checked(world: World, traits: Sets, aggs: Sets, switch: int) -> Iterator[int]:
    """``_viable`` with sets to check."""
    cost = min(_members(world, kind, s) for kind, s in _sets(traits, aggs))
    if not cost:
        # A set nobody carries: no tree can serve.
        return
    count = len(world.roots)
    budget = min(switch * cost, count)
    yield from _walk(world, traits, aggs, 0, budget)
    if budget < count:
        rest = _from_index(world, traits, aggs, budget, switch)
        yield from (_walk(world, traits, aggs, budget, count) if rest is None else rest)


def _viable_ranked(
    world: World, traits: Sets, aggs: Sets, switch: int, ranking: Ranking, rng: random.Random
) -> Iterator[int]:
    """The roots whose trees carry a label of every set, best first by
    ``ranking`` (ties in the order ``rng`` draws): walked down the
    ranking, or, when the least common set has few enough members that
    reading them costs less than ``switch`` root checks per member
    would, collected through the name indexes and sorted."""
    if not traits and not aggs:
        return ranking.best_first(rng)
    return _viable_ranked_checked(world, traits, aggs, switch, ranking, rng)


def _viable_ranked_checked(
    world: World, traits: Sets, aggs: Sets, switch: int, ranking: Ranking, rng: random.Random
) -> Iterator[int]:
    """``_viable_ranked`` with sets to check."""
    checks = sorted(_sets(traits, aggs), key=lambda c: _members(world, c[0], c[1]))
    kind, names = checks[0]
    cost = _members(world, kind, names)
    if not cost:
        return
    if cost * switch < len(world.roots):
        found = [
            (key(world, root, ranking.order, ranking.token), rng.random(), root)
            for root in _indexed(world, checks)
        ]
        found.sort()
        yield from (root for _, _, root in found)
        return
    for root in ranking.best_first(rng):
        if _labelled(world, root, checks):
            yield root


def _viable_shuffled(
    world: World, traits: Sets, aggs: Sets, switch: int, rng: random.Random
) -> Iterator[int]:
    """The roots whose trees carry a label of every set, in a random
    order ``rng`` draws: down every root as ``started`` walks them, or
    (few members, as ``_viable_ranked``) collected through the name
    indexes and shuffled."""
    roots = world.roots
    if not traits and not aggs:
        return started(roots, rng)
    return _viable_shuffled_checked(world, traits, aggs, switch, rng)


def _viable_shuffled_checked(
    world: World, traits: Sets, aggs: Sets, switch: int, rng: random.Random
) -> Iterator[int]:
    """``_viable_shuffled`` with sets to check."""
    roots = world.roots
    checks = sorted(_sets(traits, aggs), key=lambda c: _members(world, c[0], c[1]))
    cost = _members(world, *checks[0])
    if not cost:
        return
    if cost * switch < len(roots):
        # Sorted first, so that a seeded ``rng`` draws one order.
        found = sorted(_indexed(world, checks))
        rng.shuffle(found)
        yield from found
        return
    for root in started(roots, rng):
        if _labelled(world, root, checks):
            yield root


def _indexed(world: World, checks: list[tuple[str, frozenset[str]]]) -> Iterator[int]:
    """The roots whose trees carry a label of every set, from the name
    index of the first set (``checks`` sorted by members, fewest first),
    in no particular order."""
    kind, names = checks[0]
    index = world.by_trait if kind == "traits" else world.by_agg
    members: set[int] = set()
    for name in names:
        members |= index.get(name, set())
    return (
        root
        for root in world.roots_of(members)
        if world.is_root(root) and _labelled(world, root, checks)
    )


def _labelled(world: World, root: int, checks: list[tuple[str, frozenset[str]]]) -> bool:
    """True when ``root``'s tree carries a label of every set."""
    traits, aggs = world.tree_labels(root)
    return all(not names.isdisjoint(traits if kind == "traits" else aggs) for kind, names in checks)


def _sets(traits: Sets, aggs: Sets) -> list[tuple[str, frozenset[str]]]:
    return [("traits", s) for s in traits] + [("aggs", s) for s in aggs]


def _members(world: World, kind: str, names: frozenset[str]) -> int:
    """At most how many providers carry one of ``names``."""
    index = world.by_trait if kind == "traits" else world.by_agg
    return sum(len(index.get(name, ())) for name in names)


def _walk(world: World, traits: Sets, aggs: Sets, start: int, stop: int) -> Iterator[int]:
    """The viable roots among ``world.roots[start:stop]``: the least
    common set is checked at C speed, the others on what it lets by."""
    checks = sorted(_sets(traits, aggs), key=lambda c: _members(world, c[0], c[1]))
    labels = {"traits": world.root_traits, "aggs": world.root_aggs}
    kind, first = checks[0]
    hits = itertools.compress(
        range(start, stop),
        map(operator.not_, map(first.isdisjoint, itertools.islice(labels[kind], start, stop))),
    )
    roots = world.roots
    others = [(s, labels[k]) for k, s in checks[1:]]
    for i in hits:
        for s, have in others:
            if s.isdisjoint(have[i]):
                break
        else:
            yield roots[i]


def _from_index(
    world: World, traits: Sets, aggs: Sets, start: int, switch: int
) -> list[int] | None:
    """The viable roots from ``world.roots[start]`` on, through the index
    of the set with the fewest members; None when reading it (its members
    and the trees its sharing providers serve) would cost more than
    walking the remaining roots."""
    checks = sorted(_sets(traits, aggs), key=lambda c: _members(world, c[0], c[1]))
    kind, names = checks[0]
    index = world.by_trait if kind == "traits" else world.by_agg
    members: set[int] = set()
    for name in names:
        members |= index.get(name, set())
    served = world.anchors
    cost = len(members) + sum(len(served[p]) for p in members if p in served)
    roots = world.roots
    if cost * switch >= len(roots) - start:
        return None
    first = world.uuid(roots[start])
    providers, trees = world.providers, world.trees
    # Every tree reached meets the set read; only the others need checks.
    others = [
        (s, world.tree_traits if k == "traits" else world.tree_aggs, k == "traits")
        for k, s in checks[1:]
    ]
    found = []
    for root in world.roots_of(members):
        p = providers.get(root)
        if p is None or root not in trees or p.uuid < first:
            continue
        for s, tree, of_traits in others:
            have = tree.get(root)
            if have is None:
                have = p.traits if of_traits else p.aggregates
            if s.isdisjoint(have):
                break
        else:
            found.append((p.uuid, root))
    found.sort()
    return [root for _, root in found]
