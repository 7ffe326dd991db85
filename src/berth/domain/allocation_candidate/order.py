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
import itertools
import operator
import os
import random
from collections.abc import Iterable, Iterator

from berth.domain.allocation_candidate.draws import (
    SLICE,
    mixed,
    shuffled,
    started,
)
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


def tree_score(world: World, root: int, order: Order, kept: int = 0
               ) -> float:
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
    # twice: callgrind, 11,600 instructions a score against 15,700). A
    # ranking keeps it there: a claim's refresh reads the old score off
    # the provider it replaces, put there when the ranking was built or
    # last patched (3,000 instructions instead of 11,600).
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
        total += sum(w for name, w in order.preferences
                     if name in p.traits)
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


class Ranking:
    """Every root of a world in ``order``, best first, sorted by its key
    (-score, root; worked out again from the world when needed, not kept
    per root): ``roots`` the roots, ``scores`` their negated scores, in
    the same order (``array`` of doubles: no object per root, so that a
    claim that moves a tree shifts memory, not references), and
    ``ties[i]`` 1 where ``roots[i]`` and ``roots[i + 1]`` score alike, so
    that the walk finds runs of ties at C speed and hands the roots
    between them over as slices. Refreshes edit all three alike.
    (``roots`` stays a list: an ``array`` of them would shift cheaper,
    but the walk would make an int object of each root it reads, which
    cost more at ``limit=50`` than it saved below 50,000 hosts.)"""

    def __init__(self, order: Order, keys: list[Key]) -> None:
        self.order = order
        #: under which lone providers keep their score (``tree_score``)
        self.token = token(order)
        self.scores = array.array("d", [score for score, _ in keys])
        self.roots = [root for _, root in keys]
        scores = self.scores
        self.ties = bytearray(map(operator.eq, scores, scores[1:]))
        self.ties.extend(b"\0"[:len(keys) - len(self.ties)])

    @classmethod
    def build(cls, world: World, order: Order) -> Ranking:
        kept = token(order)
        return cls(order, sorted(key(world, root, order, kept)
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
            out.order, out.scores = self.order, self.scores[:]
            out.token = self.token
            out.roots, out.ties = list(self.roots), bytearray(self.ties)
        scores, roots, ties = out.scores, out.roots, out.ties
        for root, was in old.items():
            # (``key``, inline: every claim's upkeep.)
            now = ((-tree_score(world, root, self.order, self.token), root)
                   if world.is_root(root) else None)
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
            elif now != was:
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
        drawn (or, long, ``started``); a short run comes in one piece
        with the few roots before it (one piece, not two, for each of
        the many short runs where hosts share a size)."""
        roots, ties = self.roots, self.ties
        find = ties.find
        count = len(roots)
        i, size = 0, SLICE
        while i < count:
            tie = find(1, i)
            stop = count if tie < 0 else tie
            while stop - i > SLICE:
                yield roots[i:min(stop, i + size)]
                i += size
                size *= 2
            if tie < 0:
                if i < count:
                    yield roots[i:]
                return
            end = find(0, tie) + 1
            if end - tie <= WHOLE:
                piece = roots[i:tie]
                piece += mixed(roots[tie:end], rng)
                yield piece
            else:
                if i < tie:
                    yield roots[i:tie]
                if end - tie > LONG:
                    yield started(roots, rng, tie, end)
                else:
                    # (A run at the top, as ``spread``'s emptiest trees,
                    # drawn from ``roots`` itself: no copy.)
                    yield (shuffled(roots, rng, end) if tie == 0
                           else shuffled(roots[tie:end], rng))
            i = end


#: Runs of ties up to this long are shuffled whole as they are reached.
WHOLE = 16

#: Runs of ties longer than this are walked from a random place
#: (``started``); those between ``WHOLE`` and this drawn as read.
LONG = 64

def _where(scores: array.array[float], roots: list[int],
           ties: bytearray,
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


def _move(scores: array.array[float], roots: list[int],
          ties: bytearray,
          i: int, now: Key) -> None:
    """Move the root at ``i`` to where its new key ``now`` sorts: only
    the entries between the old and new places shift (a claim moves a
    tree a little way, where a ``del`` and an ``insert`` would each
    shift every entry after it). ``scores`` and ``ties`` shift, at least
    ``FAR`` entries, in place through a ``memoryview`` (one ``memmove``;
    a slice assigned from a slice copies it first: twice the bytes, and
    callgrind counts a large copy about an instruction a byte)."""
    j = _where(scores, roots, ties, now)
    if j > i:
        j -= 1
        lo, hi, by = i, j, 1
        near = (i - 1, j - 1, j)
    else:
        lo, hi, by = j + 1, i + 1, -1
        near = (j - 1, j, i)
    roots[lo:hi] = roots[lo + by:hi + by]
    if hi - lo < FAR:
        scores[lo:hi] = scores[lo + by:hi + by]
        ties[lo:hi] = ties[lo + by:hi + by]
    else:
        for kept in (scores, ties):
            # (A view held past this would stop the array growing.)
            with memoryview(kept) as view:
                view[lo:hi] = view[lo + by:hi + by]
    scores[j], roots[j] = now
    # The ties of the places whose next entry changed (inline: this is
    # every claim's upkeep).
    end = len(scores) - 1
    for at in near:
        if 0 <= at:
            ties[at] = at < end and scores[at] == scores[at + 1]


#: How far a move shifts ``scores`` and ``ties`` through a view (a
#: view costs more than the copy it saves below a few hundred entries).
FAR = 512


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
    # (``key``, inline: every claim's upkeep.)
    return {order: {root: (-tree_score(world, root, order, kept.token), root)
                    if world.is_root(root) else None for root in roots}
            for order, kept in list(world.rankings.items())}


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
