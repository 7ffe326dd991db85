"""The in-memory world the search runs over, and per-provider matching.

A ``World`` holds every provider with its tree position, inventories,
usage, traits and aggregates, plus the indexes the search and the planner
use. Each worker keeps one (``world_cache``), refreshed from the change
sequence; a usage change swaps only the providers it touched
(:meth:`World.with_usage`). Matching a provider against a group is defined
once, here, and used by both GET /allocation_candidates and
GET /resource_providers.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import InitVar, dataclass, field
from typing import Any

from berth.domain.candidates.request import TraitExpr
from berth.domain.capacity import Inventory, capacity

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


@dataclass(slots=True)
class Provider:
    """One provider: tree position, inventories with usage, and labels."""

    id: int
    uuid: str
    root_id: int
    parent_id: int | None = None
    inventories: dict[str, Inventory] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()
    #: the trait names in trait id order (the order answers list them);
    #: empty means "sorted ``traits``"
    trait_list: tuple[str, ...] = ()
    #: derived values callers may cache on this (immutable) provider; a
    #: usage change makes a new Provider, so nothing here goes stale
    memo: dict[Any, Any] = field(default_factory=dict, compare=False)
    #: class -> (free, min_unit, max_unit, step_size): what ``can_take``
    #: checks, worked out once
    room: dict[str, tuple[int, int, int, int]] = field(
        init=False, repr=False, compare=False)
    #: ``room`` worked out already (``room_of`` these inventories and
    #: usage): how the world's loader makes every provider object in one
    #: run, side by side in memory, after all their parts
    rooms: InitVar[dict[str, tuple[int, int, int, int]] | None] = None

    def __post_init__(self, rooms: dict[str, tuple[int, int, int, int]]
                      | None) -> None:
        self.room = (room_of(self.inventories, self.used) if rooms is None
                     else rooms)

    def ordered_traits(self) -> list[str]:
        return list(self.trait_list or sorted(self.traits))

    def can_take(self, rc: str, amount: int) -> bool:
        """True when ``amount`` of ``rc`` fits beside current usage and
        obeys min_unit, max_unit and step_size (``capacity.fits``)."""
        r = self.room.get(rc)
        return (r is not None and r[1] <= amount <= r[2]
                and amount % r[3] == 0 and amount <= r[0])

    def most(self, rc: str) -> int:
        """The most one allocation may take of ``rc`` here now."""
        r = self.room[rc]
        return min(r[0], r[2])


def room_of(inventories: dict[str, Inventory], used: dict[str, int]
            ) -> dict[str, tuple[int, int, int, int]]:
    """class -> (free, min_unit, max_unit, step_size): ``Provider.room``."""
    return {rc: (capacity(inv.total, inv.reserved, inv.allocation_ratio)
                 - used.get(rc, 0), inv.min_unit, inv.max_unit,
                 inv.step_size or 1)
            for rc, inv in inventories.items()}


def traits_ok(traits: Iterable[str] | frozenset[str], required: TraitExpr,
              forbidden: frozenset[str]) -> bool:
    """Every any-of set meets ``traits`` and no forbidden trait is there."""
    have = traits if isinstance(traits, frozenset) else frozenset(traits)
    if forbidden and not forbidden.isdisjoint(have):
        return False
    return all(not any_of.isdisjoint(have) for any_of in required)


def aggs_ok(aggs: frozenset[str], member_of: tuple[frozenset[str], ...],
            forbidden: frozenset[str]) -> bool:
    """In one of each member_of set, and in none of the forbidden ones."""
    if forbidden and not forbidden.isdisjoint(aggs):
        return False
    return all(not any_of.isdisjoint(aggs) for any_of in member_of)


def provider_matches(p: Provider, resources: dict[str, int],
                     required: TraitExpr, forbidden: frozenset[str],
                     member_of: tuple[frozenset[str], ...],
                     forbidden_aggs: frozenset[str]) -> bool:
    """True when ``p`` alone satisfies every given filter."""
    return (all(p.can_take(rc, n) for rc, n in resources.items())
            and traits_ok(p.traits, required, forbidden)
            and aggs_ok(p.aggregates, member_of, forbidden_aggs))


def _indexed(p: Provider) -> tuple[object, ...]:
    """What of ``p`` the world's indexes depend on."""
    return (p.uuid, p.root_id, p.parent_id, p.inventories.keys(), p.traits,
            p.aggregates, p.trait_list)


class World:
    """Providers by id, plus the tree and sharing relations between them."""

    def __init__(self, providers: Iterable[Provider]) -> None:
        self.providers: dict[int, Provider] = {p.id: p for p in providers}
        #: derived values kept as long as these indexes: the usage and
        #: amount refreshes of this world share it (the search's memo)
        self.memo: dict[Any, Any] = {}
        self.by_uuid = {p.uuid: p.id for p in self.providers.values()}
        #: trait name -> providers with it; aggregate uuid -> members
        self.by_trait: dict[str, set[int]] = {}
        self.by_agg: dict[str, set[int]] = {}
        for p in self.providers.values():
            for name in p.traits:
                self.by_trait.setdefault(name, set()).add(p.id)
            for agg in p.aggregates:
                self.by_agg.setdefault(agg, set()).add(p.id)
        self.sharing: list[int] = sorted(self.by_trait.get(SHARING_TRAIT, ()))
        #: sharing provider id -> roots of the trees it serves (its own too)
        self.anchors = self._anchors()
        self._ancestors: dict[int, frozenset[int]] = {}
        #: every provider id, in uuid order (the order answers come in)
        self.ordered = [p.id for p in sorted(self.providers.values(),
                                             key=lambda p: p.uuid)]
        self.trees: dict[int, list[int]] = {}
        self._by_class: dict[str, list[int]] = {}
        #: (root, class) -> providers of that tree with inventory of it
        self.tree_class: dict[tuple[int, str], list[int]] = {}
        for pid in self.ordered:
            for rc in self.providers[pid].inventories:
                self._by_class.setdefault(rc, []).append(pid)
        # Tree by tree, in the order the search visits them (roots in uuid
        # order): the lists of neighbouring trees sit on the same memory
        # pages, which a forked worker then copies few of. A whole load
        # hands the providers over in that order already.
        known = self.providers

        def tree_order(p: Provider) -> tuple[str, str]:
            root = known.get(p.root_id)
            return (p.uuid if root is None else root.uuid, p.uuid)

        for p in sorted(known.values(), key=tree_order):
            pid = p.id
            self.trees.setdefault(p.root_id, []).append(pid)
            for rc in p.inventories:
                self.tree_class.setdefault((p.root_id, rc), []).append(pid)
        #: roots of loaded trees, in uuid order
        self.roots = [pid for pid in self.ordered if pid in self.trees]
        #: anchor -> sharing providers of other trees that serve it
        self.shared_into: dict[int, list[int]] = {}
        loaded = [sid for sid in self.anchors if sid in self.providers]
        for sid in sorted(loaded, key=self.uuid):
            for anchor in self.anchors[sid]:
                if anchor != self.providers[sid].root_id:
                    self.shared_into.setdefault(anchor, []).append(sid)
        #: root -> every trait, and every aggregate, of the providers that
        #: may serve its tree (its own and the sharing ones serving it):
        #: what the planner checks a tree against. Kept only where that
        #: is more than the root's own labels (``tree_labels``).
        self.tree_traits: dict[int, frozenset[str]] = {}
        self.tree_aggs: dict[int, frozenset[str]] = {}
        #: the same for each of ``roots``, in its order (lists of shared
        #: frozensets: the planner walks them at C speed)
        self.root_traits: list[frozenset[str]] = []
        self.root_aggs: list[frozenset[str]] = []
        self._tree_labels()

    def _tree_labels(self) -> None:
        # Most trees have one of a few label sets: one frozenset serves
        # them all, so the indexes cost a dict entry per nested or served
        # tree (and the world may be shared copy-on-write by workers).
        # One pass over the roots: at 50,000 hosts, touching each root
        # once more is what building these costs.
        common: dict[frozenset[str], frozenset[str]] = {}
        providers, trees = self.providers, self.trees
        for root in self.roots:
            own = providers[root]
            traits, aggs = own.traits, own.aggregates
            members = trees[root]
            shared = self.shared_into.get(root, ())
            if len(members) > 1 or shared:
                traits, aggs = self._union(
                    common, root, itertools.chain(members, shared))
            self.root_traits.append(traits)
            self.root_aggs.append(aggs)

    def _union(self, common: dict[frozenset[str], frozenset[str]],
               root: int, serving: Iterable[int]
               ) -> tuple[frozenset[str], frozenset[str]]:
        """The labels of ``serving`` providers of ``root``'s tree, kept in
        the tree indexes where they are more than the root's own."""
        own = self.providers[root]
        traits, aggs = set(own.traits), set(own.aggregates)
        for pid in serving:
            p = self.providers[pid]
            traits.update(p.traits)
            aggs.update(p.aggregates)
        found = []
        for index, union, mine in ((self.tree_traits, traits, own.traits),
                                   (self.tree_aggs, aggs, own.aggregates)):
            if len(union) > len(mine):
                labels = frozenset(union)
                mine = index[root] = common.setdefault(labels, labels)
            found.append(mine)
        return found[0], found[1]

    def tree_labels(self, root: int) -> tuple[frozenset[str], frozenset[str]]:
        """The traits and the aggregates of every provider that may serve
        ``root``'s tree: its own providers and the sharing providers
        serving it (a root of this world)."""
        p = self.providers[root]
        return (self.tree_traits.get(root, p.traits),
                self.tree_aggs.get(root, p.aggregates))

    def _anchors(self) -> dict[int, set[int]]:
        """sharing provider -> roots of every tree with a provider in one
        of its aggregates (its own root too, when it is in any)."""
        providers = self.providers
        return {sid: {providers[pid].root_id
                      for agg in providers[sid].aggregates
                      for pid in self.by_agg[agg]}
                for sid in self.sharing}

    def with_usage(self, used: dict[int, dict[str, int]],
                   in_place: bool = False) -> World:
        """This world with new usage for some providers (their objects are
        replaced; everything else, indexes included, is shared).

        With ``in_place`` this world's provider map itself is updated and
        shared with the one returned, instead of copied: only for a caller
        that knows nobody reads this world any more (``WorldCache`` with
        ``exclusive``). Copying the map writes a reference count into
        every provider object, which in a forked worker copies every page
        of them out of the memory it shares with the master."""
        other = copy.copy(self)
        providers = self.providers if in_place else dict(self.providers)
        for pid, now in used.items():
            old = providers.get(pid)
            if old is not None:
                providers[pid] = dataclasses.replace(old, used=now, memo={})
        other.providers = providers
        return other

    def with_providers(self, fresh: Iterable[Provider],
                       in_place: bool = False) -> World | None:
        """This world with ``fresh`` replacing the providers of the same
        ids, sharing every index, when none of them changed what an index
        holds (only inventory amounts or usage changed: the common
        inventory update); None when the indexes must be rebuilt.
        ``in_place`` as for ``with_usage``."""
        fresh = list(fresh)
        for p in fresh:
            old = self.providers.get(p.id)
            if old is None or _indexed(old) != _indexed(p):
                return None
        other = copy.copy(self)
        providers = self.providers if in_place else dict(self.providers)
        for p in fresh:
            providers[p.id] = p
        other.providers = providers
        return other

    def roots_of(self, pids: Iterable[int]) -> set[int]:
        """The roots of ``pids``' trees and, for sharing providers among
        them, the roots of every tree they serve."""
        found: set[int] = set()
        for pid in pids:
            found.add(self.providers[pid].root_id)
            served = self.anchors.get(pid)
            if served:
                found |= served
        return found

    def by_class(self, rc: str) -> list[int]:
        """Providers with inventory of ``rc``, in uuid order."""
        return self._by_class.get(rc, [])

    def uuid(self, pid: int) -> str:
        return self.providers[pid].uuid

    def ancestors(self, pid: int) -> frozenset[int]:
        """``pid`` and every provider above it (kept: the tree shape is
        shared by every usage refresh of this world)."""
        known = self._ancestors.get(pid)
        if known is not None:
            return known
        found = {pid}
        parent = self.providers[pid].parent_id
        while parent is not None and parent not in found:
            found.add(parent)
            parent = self.providers[parent].parent_id if \
                parent in self.providers else None
        result = self._ancestors[pid] = frozenset(found)
        return result
