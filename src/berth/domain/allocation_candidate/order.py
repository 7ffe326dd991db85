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

import array
import bisect
import functools
import itertools
import operator
import os
import random
from collections.abc import Iterable, Iterator, Sequence

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
    tree = world.trees[root]
    if len(tree) == 1:
        # A tree of one provider (most compute nodes), read off it alone,
        # the same sums (this is every claim's upkeep, twice: callgrind,
        # 16,000 instructions a score against 9,000).
        p = providers[root]
        room, used = p.room, p.used
        for rc, weight in order.weights:
            r = room.get(rc)
            if r is not None:
                have = r[0]
                cap = have + used.get(rc, 0)
                if cap > 0:
                    total += weight * ((cap - have) if pack else have) / cap
        if order.preferences:
            total += sum(w for name, w in order.preferences
                         if name in p.traits)
        return round(total, DIGITS)
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
        for pid in tree:
            traits |= providers[pid].traits
        total += sum(w for name, w in order.preferences if name in traits)
    return round(total, DIGITS)


Key = tuple[float, int]


def key(world: World, root: int, order: Order) -> Key:
    """Where the tree rooted at ``root`` sorts in ``order``'s ranking."""
    return (-tree_score(world, root, order), root)


class Ranking:
    """Every root of a world in ``order``, best first, sorted by its key
    (-score, root; worked out again from the world when needed, not kept
    per root): ``roots`` the roots, ``scores`` their negated scores, in
    the same order (``array`` of doubles: no object per root, so that a
    claim that moves a tree shifts memory, not references), and
    ``ties[i]`` 1 where ``roots[i]`` and ``roots[i + 1]`` score alike, so
    that the walk finds runs of ties at C speed and hands the roots
    between them over as slices. Refreshes edit all three alike."""

    def __init__(self, order: Order, keys: list[Key]) -> None:
        self.order = order
        self.scores = array.array("d", [score for score, _ in keys])
        self.roots = [root for _, root in keys]
        scores = self.scores
        self.ties = bytearray(map(operator.eq, scores, scores[1:]))
        self.ties.extend(b"\0"[:len(keys) - len(self.ties)])

    @classmethod
    def build(cls, world: World, order: Order) -> Ranking:
        return cls(order, sorted(key(world, root, order)
                                 for root in world.roots))

    @property
    def keys(self) -> list[Key]:
        """The (-score, root) of every root, in order."""
        return list(zip(self.scores, self.roots, strict=True))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Ranking) and self.order == other.order
                and self.scores == other.scores and self.roots == other.roots
                and self.ties == other.ties)

    __hash__ = None  # type: ignore[assignment]

    def patched(self, world: World, old: dict[int, Key | None],
                in_place: bool) -> Ranking:
        """This ranking with the roots of ``old`` (each root's key in the
        world this ranking ranks, None where it was no root there)
        re-scored in ``world``: a copy, or (``in_place``) this ranking
        itself, edited."""
        if in_place:
            out = self
        else:
            out = Ranking.__new__(Ranking)
            out.order, out.scores = self.order, array.array("d", self.scores)
            out.roots, out.ties = list(self.roots), bytearray(self.ties)
        scores, roots, ties = out.scores, out.roots, out.ties
        for root, was in old.items():
            now = key(world, root, self.order) if world.is_root(root) \
                else None
            if was is None:
                if now is not None:
                    at = _where(scores, roots, ties, now)
                    scores.insert(at, now[0])
                    roots.insert(at, root)
                    ties.insert(at, 0)
                    _tie(scores, ties, at - 1, at)
            elif now is None:
                at = _where(scores, roots, ties, was)
                del scores[at], roots[at], ties[at]
                _tie(scores, ties, at - 1, at - 1)
            else:
                _move(scores, roots, ties, _where(scores, roots, ties, was), now)
        return out

    def best_first(self, rng: random.Random) -> Iterator[int]:
        """The roots, best first; each run of equal scores in an order
        ``rng`` draws (reading the first few of a long run costs those
        few). The roots between runs come as slices of ``roots``, read
        in C; a run of up to ``WHOLE`` is shuffled whole, one of up to
        ``LONG`` drawn as it is read (``shuffled``), a longer one drawn
        at first, then walked from a random place (``started``)."""
        return itertools.chain.from_iterable(self._pieces(rng))

    def _pieces(self, rng: random.Random) -> Iterator[Iterable[int]]:
        """``best_first``'s roots, a piece at a time: slices of the roots
        between runs of ties (doubling in length from ``SLICE``, so
        that a walk read a little way copies little), runs of ties
        drawn (or, long, ``started``)."""
        roots, ties = self.roots, self.ties
        find = ties.find
        count = len(roots)
        i, size = 0, SLICE
        while i < count:
            tie = find(1, i)
            stop = count if tie < 0 else tie
            while i < stop:
                yield roots[i:min(stop, i + size)]
                i += size
                size *= 2
            if tie < 0:
                return
            end = find(0, tie) + 1
            if end - tie <= WHOLE:
                yield _mixed(roots[tie:end], rng)
            elif end - tie > LONG:
                yield started(roots, rng, tie, end)
            else:
                # (A run at the top, as ``spread``'s emptiest trees,
                # drawn from ``roots`` itself: no copy.)
                yield (shuffled(roots, rng, end) if tie == 0
                       else shuffled(roots[tie:end], rng))
            i = end


#: The first slice of ``Ranking.best_first``'s roots between ties (then
#: each twice the last).
SLICE = 32

#: Runs of ties up to this long are shuffled whole as they are reached.
WHOLE = 8

#: Runs of ties longer than this are walked from a random place
#: (``started``); those between ``WHOLE`` and this drawn as read.
LONG = 64

#: How many roots ``started`` draws at random before it walks on.
FIRST = 16


def started(roots: list[int], rng: random.Random, start: int = 0,
            stop: int | None = None) -> Iterator[int]:
    """``roots[start:stop]`` (default: to the end), each once: the first
    ``FIRST`` drawn at random (``shuffled``, each root equally likely at
    each of those places), then the rest walked in their order from a
    place ``rng`` draws, round to where it began, in slices (doubling
    from ``SLICE``, those drawn already left out): the cost of a slice,
    not of a draw, per root past the first few.

    So a reader that takes the first root it can use, of several it
    cannot, takes each usable one equally often when one of the first
    ``FIRST`` is usable; past them, one just after a stretch of unusable
    roots is favoured (the walk from a random place reaches it first)."""
    stop = len(roots) if stop is None else stop
    return itertools.chain.from_iterable(_started(roots, rng, start, stop))


def _started(roots: list[int], rng: random.Random, start: int, stop: int
             ) -> Iterator[Iterable[int]]:
    """``started``'s roots, a piece at a time."""
    count = stop - start
    if count <= FIRST:
        yield shuffled(roots[start:stop], rng)
        return
    # (A run at the top, as ``spread``'s emptiest trees, or every root,
    # drawn from ``roots`` itself: no copy.)
    firsts = list(itertools.islice(
        shuffled(roots, rng, stop) if start == 0
        else shuffled(roots[start:stop], rng), FIRST))
    yield firsts
    drawn = set(firsts).__contains__
    at = start + rng.randrange(count)
    size = SLICE
    for lo, hi in ((at, stop), (start, at)):
        while lo < hi:
            yield itertools.filterfalse(drawn,
                                        roots[lo:min(hi, lo + size)])
            lo += size
            size *= 2


def _mixed(run: list[int], rng: random.Random) -> list[int]:
    """``run`` (a few roots) in a random order: sorted by random keys
    (32 bits or more), drawn at once and read in C (``rng.shuffle``
    draws each swap in Python). Equal keys, which would keep two roots
    in their order, come about once in 10^8 runs."""
    if len(run) == 2:
        if rng.getrandbits(1):
            run.reverse()
        return run
    draws = array.array("I")
    size = draws.itemsize * len(run)
    draws.frombytes(rng.getrandbits(8 * size).to_bytes(size, "little"))
    run.sort(key=functools.partial(next, iter(draws)))
    return run


def _where(scores: array.array[float], roots: list[int], ties: bytearray,
           at: Key) -> int:
    """Where the key ``at`` is, or would go, in a ranking's ``scores``
    and ``roots`` (sorted by score, then root; ``ties`` marks runs of
    equal scores)."""
    score, root = at
    lo = bisect.bisect_left(scores, score)
    if lo == len(scores) or scores[lo] != score:
        return lo
    if not ties[lo]:
        # The one root of this score.
        return lo + (roots[lo] < root)
    return bisect.bisect_left(roots, root, lo, ties.find(0, lo) + 1)


def _tie(scores: array.array[float], ties: bytearray, first: int,
         last: int) -> None:
    """Set ``ties[first:last + 1]`` anew from ``scores`` (positions out
    of range left alone; the last position ties nothing)."""
    end = len(scores) - 1
    for at in range(max(first, 0), min(last, end) + 1):
        ties[at] = at < end and scores[at] == scores[at + 1]


def _move(scores: array.array[float], roots: list[int], ties: bytearray,
          i: int, now: Key) -> None:
    """Move the root at ``i`` to where its new key ``now`` sorts: only
    the entries between the old and new places shift (a claim moves a
    tree a little way, where a ``del`` and an ``insert`` would each
    shift every entry after it)."""
    j = _where(scores, roots, ties, now)
    if j > i:
        j -= 1
        scores[i:j] = scores[i + 1:j + 1]
        roots[i:j] = roots[i + 1:j + 1]
        ties[i:j] = ties[i + 1:j + 1]
        near = (i - 1, j - 1, j)
    else:
        scores[j + 1:i + 1] = scores[j:i]
        roots[j + 1:i + 1] = roots[j:i]
        ties[j + 1:i + 1] = ties[j:i]
        near = (j - 1, j, i)
    scores[j], roots[j] = now
    # The ties of the places whose next entry changed (inline: this is
    # every claim's upkeep).
    end = len(scores) - 1
    for at in near:
        if 0 <= at:
            ties[at] = at < end and scores[at] == scores[at + 1]


def shuffled(items: Sequence[int], rng: random.Random,
             count: int | None = None) -> Iterator[int]:
    """The first ``count`` of ``items`` (default: all) in an order ``rng``
    draws, drawn as they are read (no copy made first), so that reading
    the first few of many costs those few. While fewer than half have come, by rejection:
    ``j`` drawn as so many random bits as the count needs, drawn again
    when it is past the count or taken already (one C call and a lookup
    a number, where a lazy Fisher-Yates draws a float, scales it and
    keeps its swaps in a dict: a quarter fewer instructions, callgrind);
    then the rest by Fisher-Yates. Those taken are kept in a set while
    few (up to 1/``SPARSE`` of them), then marked in a ``bytearray`` (no
    set to grow). Numbers drawn independently and kept at their first
    draw come in a uniformly random order."""
    count = len(items) if count is None else count
    get = rng.getrandbits
    bits, half = count.bit_length(), count // 2
    taken: set[int] = set()
    add = taken.add
    few = min(half, count // SPARSE)
    while len(taken) < few:
        j = get(bits)
        if j < count and j not in taken:
            add(j)
            yield items[j]
    seen = bytearray(count)
    for j in taken:
        seen[j] = 1
    drawn = len(taken)
    while drawn < half:
        j = get(bits)
        if j < count and not seen[j]:
            seen[j] = 1
            drawn += 1
            yield items[j]
    rest = list(itertools.compress(items, seen.translate(_FLIP)))
    draw = rng.random
    size = len(rest)
    for i in range(size):
        j = i + int(draw() * (size - i))
        rest[i], rest[j] = rest[j], rest[i]
        yield rest[i]


#: ``shuffled`` keeps those it has taken in a set up to 1/SPARSE of them.
SPARSE = 512

#: Swaps bytes 0 and 1 (``shuffled``'s taken marks into those left).
_FLIP = bytes.maketrans(b"\0\1", b"\1\0")


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
