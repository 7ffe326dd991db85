"""The search: every anchor's candidates, one at a time.

An *anchor* is the root of the tree a candidate is built around; a sharing
provider serves every tree it shares an aggregate with, so its offers are
listed under each of those anchors. For each anchor the planner lets
through, the search takes each group's offers (``offers``) and merges
them (``merge``), or takes the anchor's candidates from the memo
(``anchor_memo``) when none of its providers changed since. Candidates
come out one at a time, which lets ``limit`` stop the search early. In
the ``random`` order (``shuffle``) each anchor's candidates come in a
random order: read ``MIXED`` at a time and shuffled.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Hashable, Iterable, Iterator

from berth.domain.allocation_candidate.anchor_memo import (
    AnchorMemo,
    ShapeEntries,
    basis_of,
    same_basis,
    shape_key,
)
from berth.domain.allocation_candidate.merge import Candidate, Merger, one_group
from berth.domain.allocation_candidate.offers import GroupSpec, Offers
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.request import HOSTS_FIRST, RequestWide
from berth.domain.allocation_candidate.world import World

#: Which anchors a request lets through (``engine.anchor_filter``).
AnchorFilter = Callable[[int], bool]


def ANY(anchor: int) -> bool:  # noqa: N802 (a constant, named as one)
    """The filter of a request without root traits: every anchor (the
    search skips the call per tree when it is this one)."""
    return True


#: In the ``random`` order, an anchor's candidates are shuffled this many
#: at a time: all of them in any tree but one that explodes into
#: combinations, which is then not read to its end for a small ``limit``.
MIXED = 1024


def world_candidates(
    world: World,
    specs: list[GroupSpec],
    wide: RequestWide,
    anchors: Iterable[int],
    anchor_ok: AnchorFilter,
    strategy: str = "depth-first",
    memo: AnchorMemo | None = None,
    shuffle: random.Random | None = None,
) -> Iterator[Candidate]:
    """Every merge under ``anchors`` (those ``anchor_ok`` accepts), anchor
    by anchor; breadth-first, one from each anchor in turn; hosts-first
    with a limit (``HOSTS_FIRST``), the first of each anchor, then the
    rest anchor by anchor. A candidate
    made of sharing providers only may repeat under several anchors. With
    ``memo``, anchors whose providers are unchanged since an earlier search
    of the same shape give that search's candidates again. With
    ``shuffle``, each anchor's candidates come in an order it draws."""
    offers = [Offers(world, spec) for spec in specs]
    if (
        memo is None
        and len(offers) == 1
        and shuffle is None
        and (strategy == "depth-first" or strategy == HOSTS_FIRST and not wide.limit)
    ):
        return _one_group_stream(world, offers[0], anchors, anchor_ok)
    if len(offers) == 1:
        only = offers[0]

        def per_anchor(anchor: int) -> Iterable[Candidate]:
            pieces = only.at(anchor)
            if len(pieces) < 2:
                # One piece is one candidate: a tuple, which
                # ``_hosts_first`` hands on without keeping a generator.
                return tuple(one_group(world, anchor, pieces))
            return one_group(world, anchor, pieces)
    else:
        merger = Merger(world, [s.group for s in specs], wide)

        def per_anchor(anchor: int) -> Iterable[Candidate]:
            return merger.run(anchor, offers)

    if memo is None:
        gens: Iterable[Iterable[Candidate]] = (
            per_anchor(a) for a in anchors if a in world.providers and anchor_ok(a)
        )
        if shuffle is not None:
            gens = (_mixed(gen, shuffle) for gen in gens)
    else:
        gens = _memo_stream(
            world, memo, shape_key(specs, wide), anchors, anchor_ok, per_anchor, shuffle
        )
    if strategy == "breadth-first":
        return _roundrobin(list(gens))
    if strategy == HOSTS_FIRST and wide.limit:
        return _hosts_first(gens)
    return itertools.chain.from_iterable(gens)


def _one_group_stream(
    world: World, offers: Offers, anchors: Iterable[int], anchor_ok: AnchorFilter
) -> Iterator[Candidate]:
    """``world_candidates`` for one group, depth first, in one generator
    (no merge state per anchor)."""
    providers = world.providers
    check = anchor_ok is not ANY
    for anchor in anchors:
        if anchor in providers and (not check or anchor_ok(anchor)):
            pieces = offers.at(anchor)
            if pieces:
                yield from one_group(world, anchor, pieces)


def _mixed(found: Iterable[Candidate], rng: random.Random) -> Iterator[Candidate]:
    """``found`` shuffled ``MIXED`` at a time."""
    cands = iter(found)
    while True:
        chunk = list(itertools.islice(cands, MIXED))
        if len(chunk) > 1:
            rng.shuffle(chunk)
        yield from chunk
        if len(chunk) < MIXED:
            return


def _remembered(
    memo: AnchorMemo,
    entries: ShapeEntries,
    anchor: int,
    basis: tuple[Provider, ...],
    fresh: Iterable[Candidate],
) -> Iterator[Candidate]:
    """``fresh``, kept in ``memo`` once it has been taken to the end."""
    found: list[Candidate] | None = []
    for cand in fresh:
        if found is not None:
            found.append(cand)
            if len(found) > AnchorMemo.PER_ANCHOR:
                found = None
        yield cand
    if found is not None:
        memo.keep(entries, anchor, basis, found)


def _memo_stream(
    world: World,
    memo: AnchorMemo,
    key: Hashable,
    anchors: Iterable[int],
    anchor_ok: AnchorFilter,
    per_anchor: Callable[[int], Iterable[Candidate]],
    shuffle: random.Random | None = None,
) -> Iterator[Iterable[Candidate]]:
    """Each accepted anchor's candidates: from ``memo`` while still valid,
    else from ``per_anchor`` (and kept); with ``shuffle``, in an order it
    draws."""
    entries = memo.shape(key)
    providers = world.providers
    check = anchor_ok is not ANY
    for anchor in anchors:
        p = providers.get(anchor)
        if p is None or check and not anchor_ok(anchor):
            continue
        # A lone tree's entry, on its provider: valid while the provider
        # is this very object (``AnchorMemo.lone``). Handed on as the
        # tuple it is (the caller iterates it).
        kept = p.kept
        if kept is not None and kept[0] is entries:
            yield kept[1:]
            continue
        basis = basis_of(world, anchor)
        entry = entries.get(anchor)
        if entry is not None and same_basis(entry[0], basis):
            found = entry[1]
            # (The memo's list is shared: shuffled as a copy.)
            yield iter(
                found if shuffle is None or len(found) < 2 else shuffle.sample(found, len(found))
            )
            continue
        if len(basis) == 1:
            # A lone tree gives at most one candidate (each group fits
            # its provider or not): taken at once, no generator kept.
            found = list(per_anchor(anchor))
            memo.keep(entries, anchor, basis, found)
            yield iter(found)
            continue
        fresh = _remembered(memo, entries, anchor, basis, per_anchor(anchor))
        yield fresh if shuffle is None else _mixed(fresh, shuffle)


def _hosts_first(gens: Iterable[Iterable[Candidate]]) -> Iterator[Candidate]:
    """The first candidate of each anchor in turn, then the rest of each
    anchor's, anchor by anchor: with ``limit``, as many trees as it
    allows before a second candidate of any (``distinct`` still drops
    the repeats of the rest). Each anchor's search is left suspended
    after its first candidate, not run to its end (a wide tree can have
    thousands of permutations of equivalent devices)."""
    later = []
    # A candidate of sharing providers only comes under every tree they
    # serve: a tree's first is its first not already given under another.
    shared: set[tuple[object, ...]] = set()
    for gen in gens:
        if type(gen) is tuple and len(gen) < 2:
            # A lone tree's entry in the memo (``_memo_stream``): its one
            # candidate or none, with nothing left for later.
            for cand in gen:
                if not cand.shared_only or _unseen(cand, shared):
                    yield cand
            continue
        cands = iter(gen)
        for first in cands:
            if not first.shared_only or _unseen(first, shared):
                yield first
                later.append(cands)
                break
    for cands in later:
        yield from cands


def _unseen(cand: Candidate, keys: set[tuple[object, ...]]) -> bool:
    """True, and ``cand`` remembered in ``keys``, when its key is not
    there yet."""
    key = cand.key()
    if key in keys:
        return False
    keys.add(key)
    return True


def _roundrobin(gens: list[Iterable[Candidate]]) -> Iterator[Candidate]:
    active = [iter(gen) for gen in gens]
    while active:
        still = []
        for gen in active:
            item = next(gen, None)
            if item is not None:
                yield item
                still.append(gen)
        active = still


def distinct(stream: Iterable[Candidate], keys: set[tuple[object, ...]]) -> Iterator[Candidate]:
    """``stream`` without repeats (``keys`` remembers across calls)."""
    for cand in stream:
        if cand.shared_only:
            key = cand.key()
            if key in keys:
                continue
            keys.add(key)
        yield cand
