"""The merge: one piece per group under one anchor, combined lazily.

Per anchor, the merge walks the groups depth first, keeping running
totals per (provider, class), so a branch that over-uses a provider,
breaks isolation or cannot meet same_subtree is cut as soon as it does.
Candidates come out one at a time, which lets ``limit`` stop the search
early. One group and two groups, the common shapes, have loops of their
own (``one_group``, ``Merger._pairs``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import NamedTuple

from berth.domain.allocation_candidate.offers import Offers, Piece
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide
from berth.domain.allocation_candidate.world import World


# A named tuple, as ``offers.Piece`` is: the search makes one per answer.
class Candidate(NamedTuple):
    """One allocation request: amounts per provider and class, and which
    providers served each group."""

    anchor: int
    allocs: dict[int, dict[str, int]]
    mappings: dict[str, tuple[int, ...]]
    #: True when every provider used is a sharing one, so the same
    #: candidate may come again under another anchor.
    shared_only: bool = False
    #: True when the anchor memo holds this very object for later
    #: requests, so what a caller derives from it (the API layer: its
    #: encoded body) may be kept as long as the object lives.
    kept: bool = False

    def key(self) -> tuple[object, ...]:
        return (
            tuple(sorted((p, rc, n) for p, res in self.allocs.items() for rc, n in res.items())),
            tuple(sorted(self.mappings.items())),
        )


#: A merge with at most this many combinations of pieces is walked without
#: working out its bounds first (``Merger._bounds``).
SMALL_WALK = 64


class _Walk:
    """The state of one anchor's depth-first merge."""

    def __init__(
        self,
        anchor: int,
        lists: list[list[Piece]],
        bounds: tuple[list[dict[str, int]], dict[str, int]],
    ) -> None:
        self.anchor = anchor
        self.lists = lists
        self.need, self.supply = bounds
        self.totals: dict[tuple[int, str], int] = {}
        self.spent: dict[str, int] = {}
        self.chosen: list[Piece] = []
        self.granular: set[int] = set()


class Merger:
    """Depth-first merge of one piece per group under one anchor."""

    def __init__(self, world: World, groups: list[RequestGroup], wide: RequestWide) -> None:
        self.world = world
        self.groups = groups
        self.isolate = wide.group_policy == "isolate"
        self.same = [g.same_provider for g in groups]
        self._rooms: dict[tuple[int, str], int] = {}
        # Check each same_subtree set once its last group has been chosen.
        index = {g.suffix: i for i, g in enumerate(groups)}
        self.subtree_at: dict[int, list[list[int]]] = {}
        for names in wide.same_subtrees:
            members = sorted(index[s] for s in names)
            self.subtree_at.setdefault(members[-1], []).append(members)

    def run(self, anchor: int, offers: list[Offers]) -> Iterator[Candidate]:
        """Every merge under ``anchor``; offers are only computed once
        this generator is first advanced, and not past an empty group."""
        lists = []
        for group_offers in offers:
            pieces = group_offers.at(anchor)
            if not pieces:
                return
            lists.append(pieces)
        if len(lists) == 1:
            yield from one_group(self.world, anchor, lists[0])
            return
        if len(lists) == 2:
            yield from self._pairs(anchor, lists[0], lists[1])
            return
        if math.prod(len(pieces) for pieces in lists) <= SMALL_WALK:
            # Too few branches for the bounds to pay for themselves: walk
            # them all (the bounds only ever cut branches that give
            # nothing, so the answer is the same).
            bounds: tuple[list[dict[str, int]], dict[str, int]] = ([{}] * (len(lists) + 1), {})
        else:
            bounds = self._bounds(lists)
        yield from self._walk(_Walk(anchor, lists, bounds), 0)

    def _pairs(self, anchor: int, first: list[Piece], second: list[Piece]) -> Iterator[Candidate]:
        """The walk for two groups, unrolled (a common request shape: one
        group for the instance, one for a device). Each piece fits by
        itself, so only a provider both pieces use needs its totals
        checked."""
        isolate = self.isolate and self.same[0] and self.same[1]
        at_first = 0 in self.subtree_at
        at_second = 1 in self.subtree_at
        for a in first:
            if at_first and not self._subtrees_ok(0, [a]):
                continue
            used = set(a.providers)
            for b in second:
                if isolate and a.providers[0] == b.providers[0]:
                    continue
                if not used.isdisjoint(b.providers) and not self._fit(a, b):
                    continue
                pair = [a, b]
                if at_second and not self._subtrees_ok(1, pair):
                    continue
                yield self._candidate(anchor, pair)

    def _fit(self, a: Piece, b: Piece) -> bool:
        """True when ``a`` and ``b`` together stay within every room."""
        totals: dict[tuple[int, str], int] = {}
        for pid, rc, n in itertools.chain(a.allocs, b.allocs):
            key = (pid, rc)
            total = totals[key] = totals.get(key, 0) + n
            if total > self._room(key):
                return False
        return True

    def _bounds(self, lists: list[list[Piece]]) -> tuple[list[dict[str, int]], dict[str, int]]:
        """What groups from each depth on still need per class, and what
        all offered providers together can give: a branch that needs more
        than is left is cut before it is walked (this is what ends a
        hopeless many-group search at once instead of after every
        permutation)."""
        supply: dict[str, int] = {}
        counted: set[tuple[int, str]] = set()
        for pieces in lists:
            for piece in pieces:
                for pid, rc, _ in piece.allocs:
                    if (pid, rc) not in counted:
                        counted.add((pid, rc))
                        supply[rc] = supply.get(rc, 0) + max(0, self._room((pid, rc)))
        need: list[dict[str, int]] = [{}]
        for group in reversed(self.groups):
            step = dict(need[0])
            for rc, n in group.resources.items():
                step[rc] = step.get(rc, 0) + n
            need.insert(0, step)
        return need, supply

    def _walk(self, w: _Walk, depth: int) -> Iterator[Candidate]:
        if depth == len(w.lists):
            yield self._candidate(w.anchor, w.chosen)
            return
        for rc, n in w.need[depth].items():
            if w.spent.get(rc, 0) + n > w.supply.get(rc, 0):
                return
        same = self.same[depth]
        for piece in w.lists[depth]:
            if same and self.isolate and piece.providers[0] in w.granular:
                continue
            if not self._add(piece, w):
                continue
            w.chosen.append(piece)
            if self._subtrees_ok(depth, w.chosen):
                if same:
                    w.granular.add(piece.providers[0])
                yield from self._walk(w, depth + 1)
                if same:
                    w.granular.discard(piece.providers[0])
            w.chosen.pop()
            self._remove(piece, w)

    def _room(self, key: tuple[int, str]) -> int:
        """Most one candidate may take of a class from a provider."""
        room = self._rooms.get(key)
        if room is None:
            room = self._rooms[key] = self.world.providers[key[0]].most(key[1])
        return room

    def _add(self, piece: Piece, w: _Walk) -> bool:
        """Take ``piece``'s amounts unless one goes past a provider's room."""
        totals = w.totals
        for pid, rc, n in piece.allocs:
            # A piece fits by itself: only a provider and class another
            # chosen piece already takes from needs its room checked.
            taken = totals.get((pid, rc))
            if taken and taken + n > self._room((pid, rc)):
                return False
        for pid, rc, n in piece.allocs:
            totals[(pid, rc)] = totals.get((pid, rc), 0) + n
            w.spent[rc] = w.spent.get(rc, 0) + n
        return True

    @staticmethod
    def _remove(piece: Piece, w: _Walk) -> None:
        for pid, rc, n in piece.allocs:
            w.totals[(pid, rc)] -= n
            w.spent[rc] -= n

    def _subtrees_ok(self, depth: int, chosen: list[Piece]) -> bool:
        for members in self.subtree_at.get(depth, ()):
            pids = {p for i in members for p in chosen[i].providers}
            if len(pids) == 1:
                continue
            common = frozenset.intersection(*(self.world.ancestors(p) for p in pids))
            if common.isdisjoint(pids):
                return False
        return True

    def _candidate(self, anchor: int, chosen: list[Piece]) -> Candidate:
        allocs: dict[int, dict[str, int]] = {}
        mappings: dict[str, tuple[int, ...]] = {}
        for piece in chosen:
            for pid, rc, n in piece.allocs:
                res = allocs.setdefault(pid, {})
                res[rc] = res.get(rc, 0) + n
            mappings[piece.suffix] = piece.providers
        shared = self.world.anchors
        only = all(p in shared for piece in chosen for p in piece.providers)
        return Candidate(anchor, allocs, mappings, only)


def one_group(world: World, anchor: int, pieces: list[Piece]) -> Iterator[Candidate]:
    """The candidates of a one-group request under ``anchor``: each piece
    already fits, and no two of its amounts land on the same provider and
    class."""
    shared = world.anchors
    for piece in pieces:
        pids = piece.providers
        if len(pids) == 1:
            yield Candidate(
                anchor,
                {pids[0]: {rc: n for _, rc, n in piece.allocs}},
                {piece.suffix: pids},
                pids[0] in shared,
            )
            continue
        allocs: dict[int, dict[str, int]] = {}
        for pid, rc, n in piece.allocs:
            res = allocs.get(pid)
            if res is None:
                allocs[pid] = {rc: n}
            else:
                res[rc] = n
        yield Candidate(
            anchor,
            allocs,
            {piece.suffix: pids},
            pids[0] in shared and all(p in shared for p in pids),
        )
