"""The rankings a world keeps: every root sorted by its tree's score.

A ``Ranking`` keeps every root sorted by score (``order.tree_score``) for
one order, so that a request walks a sorted list instead of sorting. It
lives in the world it ranks (``World.rankings``, built when a request
first asks for that order: ``ranking``), and the cache's refreshes
re-rank the trees they touch (``world_patch``: ``before`` reads the keys
of the roots a refresh touches, ``reranked`` patches each ranking with
them), moving a tree within a block of ``BLOCK`` roots rather than
sorting again. ``Ranking.best_first`` walks it, each run of ties in an
order drawn per request (``draws``).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import random
from collections.abc import Iterable, Iterator

from berth.domain.allocation_candidate.draws import (
    SLICE,
    mixed,
    shuffled,
    started_pieces,
)
from berth.domain.allocation_candidate.order import Key, key, token, tree_score
from berth.domain.allocation_candidate.request import Order
from berth.domain.allocation_candidate.world import World

#: Rankings a world keeps (one per distinct order asked for); an order
#: asked beyond them is ranked for its request alone.
KEPT = 8


class Block:
    """A stretch of a ranking: ``roots``, their negated ``scores`` (a
    list of floats, so that ``bisect`` reads a score without making one)
    and ``ties`` (``ties[i]`` 1 where ``roots[i]`` and ``roots[i + 1]``
    score alike; the last 0, as no run of ties spans two blocks). A move
    of many entries shifts them by ``del`` and ``insert`` (``_shift``):
    memory moved, no reference counted."""

    __slots__ = ("roots", "scores", "ties")

    def __init__(self, roots: list[int], scores: list[float], ties: bytearray) -> None:
        self.roots, self.scores, self.ties = roots, scores, ties

    def copy(self) -> Block:
        return Block(list(self.roots), self.scores[:], bytearray(self.ties))

    def cut(self, at: int) -> tuple[Block, Block]:
        """This block as two: before ``at`` and from it."""
        return (
            Block(self.roots[:at], self.scores[:at], self.ties[:at]),
            Block(self.roots[at:], self.scores[at:], self.ties[at:]),
        )


def _blocks(whole: Block) -> list[Block]:
    """``whole`` cut into blocks of at most ``BLOCK`` roots (halved until
    they fit), each cut between two scores, never inside a run of ties (a
    run longer than ``BLOCK`` stays one block)."""
    out = [whole]
    i = 0
    while i < len(out):
        at = _cut(out[i])
        if at:
            out[i : i + 1] = out[i].cut(at)
        else:
            i += 1
    return out


def _cut(block: Block) -> int:
    """Where to cut ``block`` in two when it holds more than ``BLOCK``
    roots: the end of a run nearest its middle (0: no cut, it is small
    enough or one run of ties)."""
    count = len(block.roots)
    if count <= BLOCK:
        return 0
    ties, mid = block.ties, count // 2
    after = ties.find(0, mid) + 1
    before = ties.rfind(0, 0, mid) + 1
    if after >= count:
        after = 0
    if before and (not after or mid - before < after - mid):
        return before
    return after


#: Roots a block of a ranking holds at most (but a longer run of ties):
#: a claim that moves a tree from one block to another shifts the two
#: blocks, not everything between the old place and the new (at 50,000
#: hosts a claim moves a tree over a thousand places; one to
#: ``BLOCK`` roots stay one block, walked as one list).
BLOCK = 1024


class Ranking:
    """Every root of a world in ``order``, best first, sorted by its key
    (-score, root; worked out again from the world when needed, not kept
    per root), in ``blocks`` (``Block``: a list of roots, their negated
    scores, their ties) of at most ``BLOCK`` roots, none cut inside a run
    of ties; ``firsts`` holds the first negated score of each block,
    where a key finds its block. So the walk finds runs of ties at C
    speed and hands the roots between them over as slices, and a claim
    that moves a tree far shifts two blocks, not the whole way (up to
    ``BLOCK`` roots are one block, walked and edited as one list)."""

    def __init__(self, order: Order, keys: list[Key]) -> None:
        self.order = order
        #: under which lone providers keep their score (``tree_score``)
        self.token = token(order)
        scores = [score for score, _ in keys]
        ties = bytearray(map(operator.eq, scores, scores[1:]))
        ties.extend(b"\0"[: len(keys) - len(ties)])
        self.blocks = _blocks(Block([root for _, root in keys], scores, ties))
        # (A list: ``bisect`` reads it without making a float a probe.)
        self.firsts = [b.scores[0] if b.roots else 0.0 for b in self.blocks]

    @classmethod
    def build(cls, world: World, order: Order) -> Ranking:
        kept = token(order)
        return cls(order, sorted(key(world, root, order, kept) for root in world.roots))

    @property
    def roots(self) -> list[int]:
        """Every root, in order."""
        return list(itertools.chain.from_iterable(b.roots for b in self.blocks))

    @property
    def keys(self) -> list[Key]:
        """The (-score, root) of every root, in order."""
        return list(
            zip(
                itertools.chain.from_iterable(b.scores for b in self.blocks),
                self.roots,
                strict=True,
            )
        )

    def __eq__(self, other: object) -> bool:
        """The same roots and scores in the same order (however they are
        cut into blocks)."""
        return (
            isinstance(other, Ranking)
            and self.order == other.order
            and self.keys == other.keys
            and _all_ties(self) == _all_ties(other)
        )

    __hash__ = None  # type: ignore[assignment]

    def patched(self, world: World, old: dict[int, Key | None], *, in_place: bool) -> Ranking:
        """This ranking with the roots of ``old`` (each root's key in the
        world this ranking ranks, None where it was no root there)
        re-scored in ``world``: a copy (sharing the blocks it leaves
        alone), or (``in_place``) this ranking itself, edited."""
        owned: set[Block] | None = None
        if in_place:
            out = self
        else:
            out = Ranking.__new__(Ranking)
            out.order, out.token = self.order, self.token
            out.blocks, out.firsts = list(self.blocks), list(self.firsts)
            owned = set()
        trees, providers = world.trees, world.providers
        for root, was in old.items():
            # (``key`` and ``World.is_root``, inline: every claim's
            # upkeep.)
            now = (
                (-tree_score(world, root, self.order, self.token), root)
                if root in trees and root in providers
                else None
            )
            if was is None:
                if now is not None:
                    out._insert(now, owned)
            elif now is None:
                out._delete(was, owned, out._locate(was[0]))
            elif now != was:
                # (``_locate``, inline, twice: every claim's upkeep.)
                b = bisect.bisect_right(out.firsts, was[0]) - 1
                if b < 0:
                    b = 0
                at = bisect.bisect_right(out.firsts, now[0]) - 1
                if b == (at if at > 0 else 0):
                    block = out.blocks[b]
                    if owned is not None:
                        block = out._edit(b, owned)
                    _shift(
                        block.scores,
                        block.roots,
                        block.ties,
                        _where(block.scores, block.roots, block.ties, was),
                        now,
                    )
                    out.firsts[b] = block.scores[0]
                    if len(block.roots) > BLOCK:
                        # (A run longer than ``BLOCK`` that a tree left.)
                        out._split(b, owned)
                else:
                    out._delete(was, owned, b)
                    out._insert(now, owned)
        return out

    def _locate(self, score: float) -> int:
        """The block where a root of (negated) ``score`` is or goes."""
        b = bisect.bisect_right(self.firsts, score) - 1
        return b if b > 0 else 0

    def _edit(self, b: int, owned: set[Block] | None) -> Block:
        """Block ``b``, to edit: copied first when this ranking is a copy
        (``owned``: the blocks it made itself) still sharing it."""
        block = self.blocks[b]
        if owned is not None and block not in owned:
            block = self.blocks[b] = block.copy()
            owned.add(block)
        return block

    def _insert(self, now: Key, owned: set[Block] | None) -> None:
        """Put ``now`` in the block where it sorts."""
        b = self._locate(now[0])
        block = self._edit(b, owned)
        scores, roots, ties = block.scores, block.roots, block.ties
        at = _where(scores, roots, ties, now)
        scores.insert(at, now[0])
        roots.insert(at, now[1])
        ties.insert(at, 0)
        # The ties of ``at`` and the place before it (inline, as
        # ``_shift``'s).
        if at:
            ties[at - 1] = scores[at - 1] == scores[at]
        ties[at] = at < len(scores) - 1 and scores[at] == scores[at + 1]
        self.firsts[b] = scores[0]
        self._split(b, owned)

    def _delete(self, was: Key, owned: set[Block] | None, b: int) -> None:
        """Take ``was`` out of block ``b``, where it is."""
        block = self._edit(b, owned)
        scores, roots, ties = block.scores, block.roots, block.ties
        at = _where(scores, roots, ties, was)
        del scores[at], roots[at], ties[at]
        if at:
            # The place before now ties the one after (if any).
            ties[at - 1] = at < len(scores) and scores[at - 1] == scores[at]
        blocks = self.blocks
        if not roots:
            if len(blocks) > 1:
                del blocks[b], self.firsts[b]
            return
        self.firsts[b] = scores[0]
        if len(roots) < BLOCK // 8 and len(blocks) > 1:
            # Merged with the next block (the last: the one before), then
            # cut again if that makes too many.
            b = min(b, len(blocks) - 2)
            left, right = blocks[b], blocks[b + 1]
            merged = Block(
                left.roots + right.roots, left.scores + right.scores, left.ties + right.ties
            )
            blocks[b : b + 2] = [merged]
            del self.firsts[b + 1]
            if owned is not None:
                owned.add(merged)
            self._split(b, owned)

    def _split(self, b: int, owned: set[Block] | None) -> None:
        """Block ``b`` cut up if it holds more than ``BLOCK`` roots (and
        is no single run of ties)."""
        block = self.blocks[b]
        if len(block.roots) <= BLOCK:
            return
        pieces = _blocks(block)
        if len(pieces) > 1:
            self.blocks[b : b + 1] = pieces
            self.firsts[b + 1 : b + 1] = [piece.scores[0] for piece in pieces[1:]]
            if owned is not None:
                owned.update(pieces)

    def best_first(self, rng: random.Random) -> Iterator[int]:
        """The roots, best first; each run of equal scores in an order
        ``rng`` draws (reading the first few of a long run costs those
        few). The roots between runs come as slices of a block's roots,
        read in C; a run of up to ``WHOLE`` is shuffled whole, one of up
        to ``LONG`` drawn as it is read (``shuffled``), a longer one
        drawn at first, then walked from a random place (``started``)."""
        blocks = self.blocks
        return itertools.chain.from_iterable(
            _pieces(blocks[0].roots, blocks[0].ties, rng)
            if len(blocks) == 1
            else _blocks_pieces(blocks, rng)
        )


def _all_ties(ranking: Ranking) -> bytes:
    """The ties of every block, end to end."""
    return b"".join(b.ties for b in ranking.blocks)


def _blocks_pieces(blocks: list[Block], rng: random.Random) -> Iterator[Iterable[int]]:
    """``_pieces`` of each block in turn (one generator between them and
    the walk, not a chain per block: each root read passes through one
    ``chain`` only)."""
    for block in blocks:
        yield from _pieces(block.roots, block.ties, rng)


def _pieces(roots: list[int], ties: bytearray, rng: random.Random) -> Iterator[Iterable[int]]:
    """``best_first``'s roots of one block, a piece at a time: slices of
    the roots between runs of ties (doubling in length from ``SLICE``,
    so that a walk read a little way copies little), runs of ties drawn
    (or, long, ``started``); a short run comes in one piece with the few
    roots before it (one piece, not two, for each of the many short runs
    where hosts share a size)."""
    find = ties.find
    count = len(roots)
    i, size = 0, SLICE
    while i < count:
        tie = find(1, i)
        stop = count if tie < 0 else tie
        while stop - i > SLICE:
            yield roots[i : min(stop, i + size)]
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
                # (Its pieces handed on as they are: no ``chain`` of its
                # own for every root to pass through.)
                yield from started_pieces(roots, rng, tie, end)
            else:
                # (A run at the top, as ``spread``'s emptiest trees,
                # drawn from ``roots`` itself: no copy.)
                yield (shuffled(roots, rng, end) if tie == 0 else shuffled(roots[tie:end], rng))
        i = end


#: Runs of ties up to this long are shuffled whole as they are reached.
WHOLE = 16

#: Runs of ties longer than this are walked from a random place
#: (``started``); those between ``WHOLE`` and this drawn as read.
LONG = 64


def _where(scores: list[float], roots: list[int], ties: bytearray, at: Key) -> int:
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


def _shift(scores: list[float], roots: list[int], ties: bytearray, i: int, now: Key) -> None:
    """Move the root at ``i`` of one block to where its new key ``now``
    sorts. The entries between the old and new places shift by one: as
    slices when they are few, by a ``del`` and an ``insert`` (each one
    ``memmove`` of the entries after it) when they are many against
    those after them (a slice of roots counts every reference in and
    out, where a ``memmove`` only moves them: several times cheaper an
    entry under callgrind)."""
    j = _where(scores, roots, ties, now)
    if j > i:
        j -= 1
        lo, hi, by = i, j, 1
        near = (i - 1, j - 1, j)
    else:
        lo, hi, by = j + 1, i + 1, -1
        near = (j - 1, j, i)
    if (hi - lo) * SLICED > len(roots) - lo:
        del scores[i], roots[i], ties[i]
        scores.insert(j, now[0])
        roots.insert(j, now[1])
        ties.insert(j, 0)
    else:
        roots[lo:hi] = roots[lo + by : hi + by]
        scores[lo:hi] = scores[lo + by : hi + by]
        ties[lo:hi] = ties[lo + by : hi + by]
        scores[j], roots[j] = now
    # The ties of the places whose next entry changed (inline: this is
    # every claim's upkeep).
    end = len(scores) - 1
    for at in near:
        if 0 <= at:
            ties[at] = at < end and scores[at] == scores[at + 1]


#: A move within a block shifts the entries between its two places as
#: slices while they are fewer than 1/SLICED of those from the first
#: place to the block's end, else by ``del`` and ``insert``.
SLICED = 4


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
    # (``key`` and ``World.is_root``, inline, in plain loops: every
    # claim's upkeep; comprehensions and calls cost a frame each.)
    out: Before = {}
    trees, providers = world.trees, world.providers
    for order, kept in list(world.rankings.items()):
        token = kept.token
        keys: dict[int, Key | None] = {}
        for root in roots:
            keys[root] = (
                (-tree_score(world, root, order, token), root)
                if root in trees and root in providers
                else None
            )
        out[order] = keys
    return out


def reranked(old: World, new: World, was: Before, *, in_place: bool) -> dict[Order, Ranking]:
    """The rankings of ``new``: those of ``old`` that ``was`` (read
    ``before`` the refresh) covers, with its roots re-scored in ``new``.
    A ranking made of ``old`` since is left out (``new`` ranks anew
    when asked)."""
    out: dict[Order, Ranking] = {}
    for order, moved in was.items():
        kept: Ranking = old.rankings[order]
        out[order] = kept.patched(new, moved, in_place=in_place) if moved else kept
    return out
