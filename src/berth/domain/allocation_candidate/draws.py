"""Random orders drawn per request: of a run of tied trees, of the roots.

``rankings.Ranking.best_first`` hands runs of equal scores over in an
order drawn here for each request (a few roots at once: ``mixed``; more
as they are read: ``shuffled``; a long run drawn at first, then walked
from a random place: ``started``), and the planner walks the ``random``
order's roots with ``started`` too. Each draw takes its numbers from
the ``random.Random`` it is handed, so that a seeded one draws alike.
"""

from __future__ import annotations

import array
import bisect
import functools
import itertools
import math
import operator
import random
from collections.abc import Iterable, Iterator, Sequence

#: The first slice of ``rankings.Ranking.best_first``'s roots between ties,
#: and of ``started``'s walk (then each twice the last).
SLICE = 32

#: How many roots ``started`` draws at random before it walks on.
FIRST = 16


def started(
    roots: list[int], rng: random.Random, start: int = 0, stop: int | None = None
) -> Iterator[int]:
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
    return itertools.chain.from_iterable(started_pieces(roots, rng, start, stop))


def started_pieces(
    roots: list[int], rng: random.Random, start: int, stop: int
) -> Iterator[Iterable[int]]:
    """``started``'s roots, a piece at a time (for a walk that chains
    pieces of its own)."""
    count = stop - start
    if count <= FIRST:
        yield shuffled(roots[start:stop], rng)
        return
    # Read off ``roots`` itself (no copy), in one C call.
    picks, at = _drawn(count, FIRST, rng, start)
    yield list(operator.itemgetter(*picks)(roots))
    # Those drawn already are cut out of each slice by their places (few
    # fall in any slice): a lookup per slice, not a test per root.
    marks = sorted(picks)
    size = SLICE
    for lo, hi in ((at, stop), (start, at)):
        while lo < hi:
            end = min(hi, lo + size)
            piece = roots[lo:end]
            first = bisect.bisect_left(marks, lo)
            last = bisect.bisect_left(marks, end, first)
            for mark in reversed(marks[first:last]):
                del piece[mark - lo]
            yield piece
            lo = end
            size *= 2


def _drawn(count: int, k: int, rng: random.Random, start: int = 0) -> tuple[list[int], int]:
    """``k`` distinct numbers of ``range(start, start + count)`` (``k``
    of at most ``count``), each ordered choice of them equally likely,
    and one more number of that range, drawn independently of them (where
    ``started``'s walk begins).

    Drawn as ``shuffled`` draws its first (random bits, drawn again past
    the count), each kept at its first draw, in a plain loop (no
    generator switch, no mark per number: cheaper than ``shuffled``'s
    first draws, counted with callgrind). The first number accepted is the extra
    one (numbers drawn independently and kept at their first draw come in
    a uniformly random order, whichever came before them): one more draw
    where ``rng.randrange`` would cost as much as three."""
    get, bits = rng.getrandbits, (count - 1).bit_length()
    first = get(bits)
    while first >= count:
        first = get(bits)
    picked: dict[int, None] = {}
    while len(picked) < k:
        j = get(bits)
        if j < count:
            picked[start + j] = None
    return list(picked), start + first


def mixed(run: list[int], rng: random.Random) -> Sequence[int]:
    """``run`` (a few roots) in a random order. Up to ``TABLED`` roots,
    one of every order of them (``_ORDERS``), chosen by one draw of
    random bits (drawn again past the count of orders): exactly uniform,
    and cheaper than sorting a run of 3 (callgrind; a run of 2 by one
    random bit). Longer,
    sorted by random keys (32 bits or more), drawn at once and read in C
    (``rng.shuffle`` draws each swap in Python); equal keys, which would
    keep two roots in their order, come about once in 10^8 runs."""
    size = len(run)
    if size == 2:
        if rng.getrandbits(1):
            run.reverse()
        return run
    if size <= TABLED:
        bits, orders = _ORDERS[size]
        get = rng.getrandbits
        j = get(bits)
        while j >= len(orders):
            j = get(bits)
        found: Sequence[int] = orders[j](run)
        return found
    draws = array.array("I")
    size *= draws.itemsize
    draws.frombytes(rng.getrandbits(8 * size).to_bytes(size, "little"))
    run.sort(key=functools.partial(next, iter(draws)))
    return run


#: Runs of ties up to this long are put in order by a table of every
#: order of them (``mixed``).
TABLED = 6

#: Per run length from 3 to ``TABLED``: the bits that number its
#: orders, and a getter of each order (870 in all).
_ORDERS = {
    size: (
        (math.factorial(size) - 1).bit_length(),
        [operator.itemgetter(*at) for at in itertools.permutations(range(size))],
    )
    for size in range(3, TABLED + 1)
}


def shuffled(items: Sequence[int], rng: random.Random, count: int | None = None) -> Iterator[int]:
    """The first ``count`` of ``items`` (default: all) in an order ``rng``
    draws, drawn as they are read (no copy made first), so that reading
    the first few of many costs those few. While fewer than half have come, by rejection:
    ``j`` drawn as so many random bits as the count needs, drawn again
    when it is past the count or taken already (one C call and a lookup
    a number, where a lazy Fisher-Yates draws a float, scales it and
    keeps its swaps in a dict: fewer instructions, callgrind);
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
