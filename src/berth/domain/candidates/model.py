"""The in-memory world the search runs over, and per-provider matching.

A ``World`` holds only the providers that can matter to one request: the
trees with inventory of a requested class, the trees that share an
aggregate with a sharing provider, and just the traits and aggregates the
request names. Matching a provider against a group is defined once, here,
and used by both GET /allocation_candidates and GET /resource_providers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from berth.domain.candidates.request import TraitExpr
from berth.domain.capacity import Inventory, fits

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

    def can_take(self, rc: str, amount: int) -> bool:
        """True when ``amount`` of ``rc`` fits beside current usage."""
        inv = self.inventories.get(rc)
        return inv is not None and fits(inv, self.used.get(rc, 0), amount)


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


class World:
    """Providers by id, plus the tree and sharing relations between them."""

    def __init__(self, providers: Iterable[Provider],
                 anchors: dict[int, set[int]] | None = None) -> None:
        self.providers: dict[int, Provider] = {p.id: p for p in providers}
        self.sharing: list[int] = sorted(
            p.id for p in self.providers.values() if SHARING_TRAIT in p.traits)
        #: sharing provider id -> roots of the trees it serves (its own too)
        self.anchors = anchors if anchors is not None else self._anchors()
        #: every provider id, in uuid order (the order answers come in)
        self.ordered = [p.id for p in sorted(self.providers.values(),
                                             key=lambda p: p.uuid)]
        self.trees: dict[int, list[int]] = {}
        self._by_class: dict[str, list[int]] = {}
        for pid in self.ordered:
            p = self.providers[pid]
            self.trees.setdefault(p.root_id, []).append(pid)
            for rc in p.inventories:
                self._by_class.setdefault(rc, []).append(pid)
        #: roots of loaded trees, in uuid order
        self.roots = [pid for pid in self.ordered if pid in self.trees]
        #: anchor -> sharing providers of other trees that serve it
        self.shared_into: dict[int, list[int]] = {}
        loaded = [sid for sid in self.anchors if sid in self.providers]
        for sid in sorted(loaded, key=self.uuid):
            for anchor in self.anchors[sid]:
                if anchor != self.providers[sid].root_id:
                    self.shared_into.setdefault(anchor, []).append(sid)

    def _anchors(self) -> dict[int, set[int]]:
        """Anchors from the loaded aggregates (enough for hand-made worlds;
        the loader computes them in SQL instead)."""
        result: dict[int, set[int]] = {}
        for sid in self.sharing:
            aggs = self.providers[sid].aggregates
            result[sid] = {p.root_id for p in self.providers.values()
                           if aggs and not aggs.isdisjoint(p.aggregates)}
        return result

    def by_class(self, rc: str) -> list[int]:
        """Providers with inventory of ``rc``, in uuid order."""
        return self._by_class.get(rc, [])

    def uuid(self, pid: int) -> str:
        return self.providers[pid].uuid

    def ancestors(self, pid: int) -> set[int]:
        """``pid`` and every provider above it."""
        found = {pid}
        parent = self.providers[pid].parent_id
        while parent is not None and parent not in found:
            found.add(parent)
            parent = self.providers[parent].parent_id if \
                parent in self.providers else None
        return found

    def is_root(self, pid: int) -> bool:
        return self.providers[pid].parent_id is None
