"""The in-memory world the search runs over: providers and their indexes.

A ``World`` holds every provider (``provider.Provider``) with its tree
position, inventories, usage, traits and aggregates, plus the indexes
the search and the planner use: by uuid, trait, aggregate and class,
tree by tree, the sharing relations, and each tree's labels. Each
worker's candidate cache (``cache``) keeps one; ``world_patch`` makes the
next one from it when a few providers change, sharing what did not.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import os_traits

from berth.domain.allocation_candidate.provider import Provider


class World:
    """Providers by id, plus the tree and sharing relations between them.

    Every attribute below is built by ``__init__`` from the providers
    alone, and equal, index by index, in a world ``world_patch`` made.
    """

    providers: dict[int, Provider]
    #: derived values kept as long as these indexes: the usage and
    #: amount refreshes of this world share it (the search's memo)
    memo: dict[Any, Any]
    #: provider id -> ``ancestors(id)``, worked out as asked (the tree
    #: shape is shared by every usage refresh of this world)
    ancestry: dict[int, frozenset[int]]
    #: ``order.Order`` -> ``rankings.Ranking`` of the roots, for the scored
    #: orders asked for so far (kept up to date by ``world_patch``)
    rankings: dict[Any, Any]
    by_uuid: dict[str, int]
    #: trait name -> providers with it; aggregate uuid -> members
    by_trait: dict[str, set[int]]
    by_agg: dict[str, set[int]]
    #: the sharing providers (those with ``MISC_SHARES_VIA_AGGREGATE``), by id
    sharing: list[int]
    #: sharing provider id -> roots of the trees it serves (its own too)
    anchors: dict[int, set[int]]
    #: every provider id, in uuid order (the order answers come in)
    ordered: list[int]
    #: class -> providers with inventory of it, in uuid order
    by_class: dict[str, list[int]]
    #: root -> the providers of its tree, in uuid order
    trees: dict[int, list[int]]
    #: (root, class) -> providers of that tree with inventory of it
    tree_class: dict[tuple[int, str], list[int]]
    #: roots of loaded trees, in uuid order
    roots: list[int]
    #: anchor -> sharing providers of other trees that serve it
    shared_into: dict[int, list[int]]
    #: root -> every trait, and every aggregate, of the providers that
    #: may serve its tree (its own and the sharing ones serving it):
    #: what the planner checks a tree against. Kept only where that
    #: is more than the root's own labels (``tree_labels``).
    tree_traits: dict[int, frozenset[str]]
    tree_aggs: dict[int, frozenset[str]]
    #: the same for each of ``roots``, in its order (lists of shared
    #: frozensets: the planner walks them at C speed)
    root_traits: list[frozenset[str]]
    root_aggs: list[frozenset[str]]

    def __init__(self, providers: Iterable[Provider]) -> None:
        self.providers = {p.id: p for p in providers}
        self.memo = {}
        self.ancestry = {}
        self.rankings = {}
        self.by_uuid = {p.uuid: p.id for p in self.providers.values()}
        self._index_labels()
        self._index_trees()
        self._index_shared_into()
        self._index_tree_labels()

    def _index_labels(self) -> None:
        """``by_trait``, ``by_agg``, ``sharing`` and ``anchors``."""
        self.by_trait = {}
        self.by_agg = {}
        for p in self.providers.values():
            for name in p.traits:
                self.by_trait.setdefault(name, set()).add(p.id)
            for agg in p.aggregates:
                self.by_agg.setdefault(agg, set()).add(p.id)
        self.sharing = sorted(self.by_trait.get(os_traits.MISC_SHARES_VIA_AGGREGATE, ()))
        self.anchors = {sid: self.served(sid) for sid in self.sharing}

    def _index_trees(self) -> None:
        """``ordered``, ``by_class``, ``trees``, ``tree_class`` and
        ``roots``."""
        self.ordered = [p.id for p in sorted(self.providers.values(), key=lambda p: p.uuid)]
        self.trees = {}
        self.by_class = {}
        self.tree_class = {}
        for pid in self.ordered:
            for rc in self.providers[pid].inventories:
                self.by_class.setdefault(rc, []).append(pid)
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
        self.roots = [pid for pid in self.ordered if pid in self.trees]

    def _index_shared_into(self) -> None:
        """``shared_into``, from ``anchors``."""
        self.shared_into = {}
        loaded = [sid for sid in self.anchors if sid in self.providers]
        for sid in sorted(loaded, key=self.uuid):
            for anchor in self.anchors[sid]:
                if anchor != self.providers[sid].root_id:
                    self.shared_into.setdefault(anchor, []).append(sid)

    def _index_tree_labels(self) -> None:
        """``tree_traits``, ``tree_aggs``, ``root_traits`` and
        ``root_aggs``."""
        self.tree_traits = {}
        self.tree_aggs = {}
        self.root_traits = []
        self.root_aggs = []
        # Most trees have one of a few label sets: one frozenset serves
        # them all, so the indexes cost a dict entry per nested or served
        # tree (and the world may be shared copy-on-write by workers).
        # One pass over the roots: at 50,000 hosts, touching each root
        # once more is what building these costs.
        common: dict[frozenset[str], frozenset[str]] = {}
        providers = self.providers
        for root in self.roots:
            own = providers[root]
            traits, aggs = self.served_labels(common, root)
            if traits is None:
                traits = own.traits
            else:
                self.tree_traits[root] = traits
            if aggs is None:
                aggs = own.aggregates
            else:
                self.tree_aggs[root] = aggs
            self.root_traits.append(traits)
            self.root_aggs.append(aggs)

    def served_labels(
        self, common: dict[frozenset[str], frozenset[str]], root: int
    ) -> tuple[frozenset[str] | None, frozenset[str] | None]:
        """The traits and the aggregates of every provider that may serve
        ``root``'s tree, each only where it is more than the root's own
        (None where not): what the tree indexes hold for ``root``.
        ``common`` holds one frozenset per equal set, to share."""
        members = self.trees[root]
        shared = self.shared_into.get(root, ())
        if len(members) == 1 and not shared:
            return None, None
        own = self.providers[root]
        traits, aggs = set(own.traits), set(own.aggregates)
        for pid in itertools.chain(members, shared):
            p = self.providers[pid]
            traits.update(p.traits)
            aggs.update(p.aggregates)
        return (_more(common, traits, own.traits), _more(common, aggs, own.aggregates))

    def tree_labels(self, root: int) -> tuple[frozenset[str], frozenset[str]]:
        """The traits and the aggregates of every provider that may serve
        ``root``'s tree: its own providers and the sharing providers
        serving it (a root of this world)."""
        p = self.providers[root]
        return (self.tree_traits.get(root, p.traits), self.tree_aggs.get(root, p.aggregates))

    def served(self, sid: int) -> set[int]:
        """The roots of every tree with a provider in one of sharing
        provider ``sid``'s aggregates (its own root too, when it is in
        any): ``anchors[sid]``."""
        providers = self.providers
        return {
            providers[pid].root_id for agg in providers[sid].aggregates for pid in self.by_agg[agg]
        }

    def is_root(self, pid: int) -> bool:
        """True when ``pid`` is one of ``roots``."""
        return pid in self.trees and pid in self.providers

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

    def uuid(self, pid: int) -> str:
        return self.providers[pid].uuid

    def ancestors(self, pid: int) -> frozenset[int]:
        """``pid`` and every provider above it (kept in ``ancestry``)."""
        known = self.ancestry.get(pid)
        if known is not None:
            return known
        found = {pid}
        parent = self.providers[pid].parent_id
        while parent is not None and parent not in found:
            found.add(parent)
            parent = self.providers[parent].parent_id if parent in self.providers else None
        result = self.ancestry[pid] = frozenset(found)
        return result


def _more(
    common: dict[frozenset[str], frozenset[str]], union: set[str], mine: frozenset[str]
) -> frozenset[str] | None:
    """``union`` as a frozenset (one per equal set) when it holds more
    than ``mine``, else None."""
    if len(union) == len(mine):
        return None
    labels = frozenset(union)
    return common.setdefault(labels, labels)
