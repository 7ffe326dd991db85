"""The search: what each group can use per anchor, then a lazy merge.

An *anchor* is the root of the tree a candidate is built around; a sharing
provider serves every tree it shares an aggregate with, so its offers are
listed under each of those anchors. Per anchor, the merge walks the groups
depth first, keeping running totals per (provider, class), so a branch
that over-uses a provider, breaks isolation or cannot meet same_subtree is
cut as soon as it does. Candidates come out one at a time, which lets
``limit`` stop the search early.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from berth.domain.allocation_candidate.model import Provider, World, aggs_ok, traits_ok
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide

Alloc = tuple[int, str, int]

# Pieces and candidates are named tuples: the search makes one of each per
# answer, and a tuple is several times cheaper to build than a dataclass.


class Piece(NamedTuple):
    """One way to satisfy one group: what it takes from whom."""

    suffix: str
    allocs: tuple[Alloc, ...]
    providers: tuple[int, ...]


class Candidate(NamedTuple):
    """One allocation request: amounts per provider and class, and which
    providers served each group."""

    anchor: int
    allocs: dict[int, dict[str, int]]
    mappings: dict[str, tuple[int, ...]]
    #: True when every provider used is a sharing one, so the same
    #: candidate may come again under another anchor.
    shared_only: bool = False
    #: derived values callers may keep on a candidate the memo holds for
    #: later requests (its encoded body); None: nothing is kept
    memo: dict[Any, Any] | None = None

    def key(self) -> tuple[object, ...]:
        return (tuple(sorted((p, rc, n) for p, res in self.allocs.items()
                             for rc, n in res.items())),
                tuple(sorted(self.mappings.items())))


@dataclass(frozen=True)
class GroupSpec:
    """A request group with its tree restriction resolved to a root id."""

    group: RequestGroup
    tree_root: int | None = None


AnchorFilter = Callable[[int], bool]

#: A merge with at most this many combinations of pieces is walked without
#: working out its bounds first (``Merger._bounds``).
SMALL_WALK = 64


class Offers:
    """One group's offers under each anchor (each anchor is visited once)."""

    def __init__(self, world: World, spec: GroupSpec) -> None:
        self.world = world
        self.spec = spec
        self.classes = sorted(spec.group.resources)
        self.amounts = [(rc, spec.group.resources[rc]) for rc in self.classes]
        self.same_provider = spec.group.same_provider

    def at(self, anchor: int) -> list[Piece]:
        if self.same_provider:
            return granular_pieces(self.world, self.spec, anchor,
                                   self.amounts)
        return spread_pieces(self.world, self.spec, anchor, self.classes)


def granular_pieces(world: World, spec: GroupSpec, anchor: int,
                    amounts: list[tuple[str, int]]) -> list[Piece]:
    """Single-provider offers of a suffixed group (asking for ``amounts``,
    by class name) under ``anchor``: a provider of the anchor's tree, or
    a sharing provider serving it (``provider_matches``, unrolled)."""
    g = spec.group
    if amounts:
        # Only providers with inventory of the first class can serve.
        local: Iterable[int] = world.tree_class.get((anchor, amounts[0][0]),
                                                    ())
    else:
        local = world.trees.get(anchor, ())
    shared = world.shared_into.get(anchor)
    if shared:
        local = itertools.chain(local, shared)
    labels = bool(g.required or g.forbidden or g.member_of
                  or g.forbidden_aggs)
    tree_root = spec.tree_root
    providers = world.providers
    out = []
    for pid in local:
        p = providers[pid]
        if tree_root is not None and p.root_id != tree_root:
            continue
        room = p.room
        for rc, n in amounts:
            r = room.get(rc)
            if (r is None or n < r[1] or n > r[2] or n % r[3]
                    or n > r[0]):
                break
        else:
            if labels and not (
                    traits_ok(p.traits, g.required, g.forbidden)
                    and aggs_ok(p.aggregates, g.member_of,
                                g.forbidden_aggs)):
                continue
            out.append(Piece(g.suffix,
                             tuple([(pid, rc, n) for rc, n in amounts]),
                             (pid,)))
    return out


def _options(world: World, spec: GroupSpec, anchor: int, rc: str,
             n: int) -> list[int]:
    """Providers with room for ``n`` of ``rc`` that may serve this anchor."""
    g = spec.group
    providers = world.providers
    local = world.tree_class.get((anchor, rc), ())
    shared = world.shared_into.get(anchor, ())
    if (not g.member_of and not g.forbidden_aggs
            and spec.tree_root is None):
        found = []
        for pid in local:
            # can_take, inlined: every provider here has inventory of rc.
            r = providers[pid].room[rc]
            if r[1] <= n <= r[2] and n % r[3] == 0 and n <= r[0]:
                found.append(pid)
        if shared:
            found += [s for s in shared if providers[s].can_take(rc, n)]
        return found
    root_aggs = providers[anchor].aggregates
    if g.forbidden_aggs and not g.forbidden_aggs.isdisjoint(root_aggs):
        return []
    # An aggregate on the root spans its whole tree.
    anchor_in = aggs_ok(root_aggs, g.member_of, frozenset())
    found = []
    if spec.tree_root is None or spec.tree_root == anchor:
        for pid in local:
            p = providers[pid]
            if p.can_take(rc, n) and (
                    anchor_in or aggs_ok(p.aggregates, g.member_of,
                                         frozenset())) and (
                    not g.forbidden_aggs
                    or g.forbidden_aggs.isdisjoint(p.aggregates)):
                found.append(pid)
    if spec.tree_root is not None:
        return found
    for sid in shared:
        s = providers[sid]
        if s.can_take(rc, n) and aggs_ok(s.aggregates, g.member_of,
                                         g.forbidden_aggs):
            found.append(sid)
    return found


def spread_pieces(world: World, spec: GroupSpec, anchor: int,
                  classes: list[str]) -> list[Piece]:
    """Offers of the unsuffixed group under ``anchor`` (its ``classes`` in
    sorted order): each class from one provider of the anchor's tree or
    from a sharing provider serving it; together they must carry the
    required traits and none may carry a forbidden one."""
    g = spec.group
    tree = world.trees.get(anchor)
    if (tree is not None and len(tree) == 1
            and anchor not in world.shared_into
            and (spec.tree_root is None or spec.tree_root == anchor)):
        # A lone provider (the usual compute host): it alone can serve.
        return _lone_piece(world.providers[anchor], g, classes)
    per_class = []
    for rc in classes:
        opts = _options(world, spec, anchor, rc, g.resources[rc])
        if not opts:
            return []
        per_class.append(opts)
    return _combine(world, g, classes, per_class)


def _lone_piece(p: Provider, g: RequestGroup, classes: list[str]
                ) -> list[Piece]:
    """``spread_pieces`` for a tree of one provider and no sharing."""
    if (g.member_of or g.forbidden_aggs) and not aggs_ok(
            p.aggregates, g.member_of, g.forbidden_aggs):
        return []
    room = p.room
    for rc in classes:
        r = room.get(rc)
        n = g.resources[rc]
        if r is None or n < r[1] or n > r[2] or n % r[3] or n > r[0]:
            return []
    if (g.required or g.forbidden) and not traits_ok(p.traits, g.required,
                                                       g.forbidden):
        return []
    pid = p.id
    return [Piece(g.suffix, tuple([(pid, rc, g.resources[rc])
                                   for rc in classes]), (pid,))]


def _combine(world: World, g: RequestGroup, classes: list[str],
             per_class: list[list[int]]) -> list[Piece]:
    amounts = [g.resources[rc] for rc in classes]
    check_traits = bool(g.required or g.forbidden)
    pieces = []
    for combo in itertools.product(*per_class):
        distinct_ = set(combo)
        chosen = (tuple(distinct_) if len(distinct_) == 1
                  else tuple(sorted(distinct_)))
        if check_traits:
            if any(not traits_ok(world.providers[p].traits, (), g.forbidden)
                   for p in chosen):
                continue
            have = frozenset().union(*(world.providers[p].traits
                                       for p in chosen))
            if not traits_ok(have, g.required, frozenset()):
                continue
        # (provider, class, amount) per class, built at C speed.
        allocs = tuple(zip(combo, classes, amounts, strict=True))
        pieces.append(Piece(g.suffix, allocs, chosen))
    return pieces


class _Walk:
    """The state of one anchor's depth-first merge."""

    def __init__(self, anchor: int, lists: list[list[Piece]],
                 bounds: tuple[list[dict[str, int]], dict[str, int]]) -> None:
        self.anchor = anchor
        self.lists = lists
        self.need, self.supply = bounds
        self.totals: dict[tuple[int, str], int] = {}
        self.spent: dict[str, int] = {}
        self.chosen: list[Piece] = []
        self.granular: set[int] = set()


class Merger:
    """Depth-first merge of one piece per group under one anchor."""

    def __init__(self, world: World, groups: list[RequestGroup],
                 wide: RequestWide) -> None:
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
            bounds: tuple[list[dict[str, int]], dict[str, int]] = (
                [{}] * (len(lists) + 1), {})
        else:
            bounds = self._bounds(lists)
        yield from self._walk(_Walk(anchor, lists, bounds), 0)

    def _pairs(self, anchor: int, first: list[Piece], second: list[Piece]
               ) -> Iterator[Candidate]:
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

    def _bounds(self, lists: list[list[Piece]]
                ) -> tuple[list[dict[str, int]], dict[str, int]]:
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
                        supply[rc] = supply.get(rc, 0) + max(
                            0, self._room((pid, rc)))
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
            common = frozenset.intersection(*(self.world.ancestors(p)
                                        for p in pids))
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


def one_group(world: World, anchor: int, pieces: list[Piece]
              ) -> Iterator[Candidate]:
    """The candidates of a one-group request under ``anchor``: each piece
    already fits, and no two of its amounts land on the same provider and
    class."""
    shared = world.anchors
    for piece in pieces:
        pids = piece.providers
        if len(pids) == 1:
            yield Candidate(
                anchor, {pids[0]: {rc: n for _, rc, n in piece.allocs}},
                {piece.suffix: pids}, pids[0] in shared)
            continue
        allocs: dict[int, dict[str, int]] = {}
        for pid, rc, n in piece.allocs:
            res = allocs.get(pid)
            if res is None:
                allocs[pid] = {rc: n}
            else:
                res[rc] = n
        yield Candidate(anchor, allocs, {piece.suffix: pids},
                        pids[0] in shared and all(p in shared for p in pids))


def _one_group_stream(world: World, offers: Offers, anchors: Iterable[int],
                      anchor_ok: AnchorFilter) -> Iterator[Candidate]:
    """``world_candidates`` for one group, depth first, in one generator
    (no merge state per anchor)."""
    providers = world.providers
    for anchor in anchors:
        if anchor in providers and anchor_ok(anchor):
            pieces = offers.at(anchor)
            if pieces:
                yield from one_group(world, anchor, pieces)


#: An anchor's candidates for one request shape, and the providers (the
#: very objects) they were worked out from.
_Entry = tuple[tuple[Provider, ...], list[Candidate]]


class AnchorMemo:
    """Each anchor's candidates per request shape, for the next request.

    An anchor's candidates depend only on the request's shape (its groups
    and group-wide rules, not ``limit``) and on the providers of its tree
    and the sharing providers serving it. Providers are immutable: a usage
    or inventory refresh replaces exactly the ones it changed
    (``World.with_usage``, ``with_providers``), so an entry stays valid
    while every provider it was worked out from is still the same object,
    and a claim makes the next request redo one tree, not the world. A
    world whose indexes are rebuilt starts with an empty memo.

    Only an anchor whose candidates were all taken is kept (a search that
    ``limit`` stopped part way through an anchor keeps nothing of it), and
    at most ``PER_ANCHOR`` of them. At most ``budget`` candidates are held
    over ``shapes`` shapes; the shape least recently asked for goes first.
    """

    #: An anchor with more candidates than this is not kept (a tree that
    #: explodes into combinations is searched lazily every time).
    PER_ANCHOR = 256

    def __init__(self, budget: int = 20_000, shapes: int = 16) -> None:
        self.budget = budget
        self.max_shapes = shapes
        #: candidates held now, over every shape
        self.held = 0
        self._shapes: OrderedDict[Hashable, dict[int, _Entry]] = OrderedDict()

    def shape(self, key: Hashable) -> dict[int, _Entry]:
        """The entries of shape ``key`` (made empty if new)."""
        entries = self._shapes.get(key)
        if entries is None:
            entries = self._shapes[key] = {}
            while len(self._shapes) > self.max_shapes:
                self._drop_oldest()
        else:
            self._shapes.move_to_end(key)
        return entries

    def keep(self, entries: dict[int, _Entry], anchor: int,
             basis: tuple[Provider, ...], found: list[Candidate]) -> None:
        """Hold ``found`` as ``anchor``'s candidates in ``entries``, unless
        that would go over the budget."""
        old = entries.get(anchor)
        grow = len(found) - (len(old[1]) if old else 0)
        while (self.held + grow > self.budget and len(self._shapes) > 1
               and next(iter(self._shapes.values())) is not entries):
            self._drop_oldest()
        if self.held + grow > self.budget:
            return
        entries[anchor] = (basis, [c._replace(memo={}) for c in found])
        self.held += grow

    def _drop_oldest(self) -> None:
        try:
            _, entries = self._shapes.popitem(last=False)
        except KeyError:  # another thread emptied it first
            return
        self.held -= sum(len(found) for _, found in entries.values())


def shape_key(specs: list[GroupSpec], wide: RequestWide) -> Hashable:
    """What an anchor's candidates depend on in a request (not ``limit``,
    nor root_required, which only chooses the anchors)."""
    return (tuple((s.group.suffix, tuple(sorted(s.group.resources.items())),
                   s.group.required, s.group.forbidden, s.group.member_of,
                   s.group.forbidden_aggs, s.tree_root) for s in specs),
            wide.group_policy, wide.same_subtrees)


def _basis(world: World, anchor: int) -> tuple[Provider, ...]:
    """The providers an anchor's candidates are worked out from."""
    providers = world.providers
    found = tuple([providers[p] for p in world.trees.get(anchor, (anchor,))])
    shared = world.shared_into.get(anchor)
    if shared:
        found += tuple([providers[p] for p in shared])
    return found


def _same(a: tuple[Provider, ...], b: tuple[Provider, ...]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _remembered(memo: AnchorMemo, entries: dict[int, _Entry], anchor: int,
                basis: tuple[Provider, ...], fresh: Iterator[Candidate]
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


def _memo_stream(world: World, memo: AnchorMemo, key: Hashable,
                 anchors: Iterable[int], anchor_ok: AnchorFilter,
                 per_anchor: Callable[[int], Iterator[Candidate]]
                 ) -> Iterator[Iterator[Candidate]]:
    """Each accepted anchor's candidates: from ``memo`` while still valid,
    else from ``per_anchor`` (and kept)."""
    entries = memo.shape(key)
    providers = world.providers
    for anchor in anchors:
        if anchor not in providers or not anchor_ok(anchor):
            continue
        basis = _basis(world, anchor)
        entry = entries.get(anchor)
        if entry is not None and _same(entry[0], basis):
            yield iter(entry[1])
        else:
            yield _remembered(memo, entries, anchor, basis,
                              per_anchor(anchor))


def world_candidates(world: World, specs: list[GroupSpec], wide: RequestWide,
                     anchors: Iterable[int], anchor_ok: AnchorFilter,
                     strategy: str = "depth-first",
                     memo: AnchorMemo | None = None) -> Iterator[Candidate]:
    """Every merge under ``anchors`` (those ``anchor_ok`` accepts), anchor
    by anchor or, breadth-first, one from each anchor in turn. A candidate
    made of sharing providers only may repeat under several anchors. With
    ``memo``, anchors whose providers are unchanged since an earlier search
    of the same shape give that search's candidates again."""
    offers = [Offers(world, spec) for spec in specs]
    if memo is None and len(offers) == 1 and strategy != "breadth-first":
        return _one_group_stream(world, offers[0], anchors, anchor_ok)
    if len(offers) == 1:
        only = offers[0]

        def per_anchor(anchor: int) -> Iterator[Candidate]:
            return one_group(world, anchor, only.at(anchor))
    else:
        merger = Merger(world, [s.group for s in specs], wide)

        def per_anchor(anchor: int) -> Iterator[Candidate]:
            return merger.run(anchor, offers)
    if memo is None:
        gens: Iterable[Iterator[Candidate]] = (
            per_anchor(a) for a in anchors
            if a in world.providers and anchor_ok(a))
    else:
        gens = _memo_stream(world, memo, shape_key(specs, wide), anchors,
                            anchor_ok, per_anchor)
    if strategy == "breadth-first":
        return _roundrobin(list(gens))
    return itertools.chain.from_iterable(gens)


def _roundrobin(gens: list[Iterator[Candidate]]) -> Iterator[Candidate]:
    active = list(gens)
    while active:
        still = []
        for gen in active:
            item = next(gen, None)
            if item is not None:
                yield item
                still.append(gen)
        active = still


def distinct(stream: Iterable[Candidate],
             keys: set[tuple[object, ...]]) -> Iterator[Candidate]:
    """``stream`` without repeats (``keys`` remembers across calls)."""
    for cand in stream:
        if cand.shared_only:
            key = cand.key()
            if key in keys:
                continue
            keys.add(key)
        yield cand
