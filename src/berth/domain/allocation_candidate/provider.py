"""One provider as the engine sees it, and matching it against a group.

A ``Provider`` is never modified once built: a refresh of usage or
amounts makes a new one (``world_patch``), which is what lets the search
keep what it worked out per provider object. The rules a provider must
meet to serve a group (room, traits, aggregates) are defined once, here;
the hot loops of the search and of GET /resource_providers inline
``can_take``, and ``faults`` spells the same rules out one failure at a
time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import InitVar, dataclass, field
from typing import Any

from berth.domain.allocation_candidate.request import TraitExpr
from berth.domain.capacity import Inventory, capacity


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
    #: class -> (free, min_unit, max_unit, step_size): what ``can_take``
    #: checks, worked out once
    room: dict[str, tuple[int, int, int, int]] = field(init=False, repr=False, compare=False)
    #: the anchor memo's entry for the tree of this provider alone (no
    #: children, no sharing provider serving it): the memo's shape, then
    #: the tree's candidates (at most one), or None. Not part of the
    #: provider's value: a refresh makes a new object without it, which
    #: is what invalidates it (``anchor_memo``)
    kept: tuple[Any, ...] | None = field(default=None, init=False, repr=False, compare=False)
    #: ``order.tree_score`` of the tree of this provider alone, as a
    #: ranking's token (``order.token``: one per order) plus the score
    #: times 1j, or None: kept for the next claim's refresh, which
    #: re-ranks the tree from the score of the provider it replaces. One
    #: ``complex`` (two doubles in one object, replaced whole, so that
    #: threads scoring for other orders never mix halves; untracked by
    #: the garbage collector, where a tuple made a collection fall in
    #: the measured steps of ``bench/order.py``). Not part of the value,
    #: like ``kept``
    score: complex | None = field(default=None, init=False, repr=False, compare=False)
    #: ``room`` worked out already (``room_of`` these inventories and
    #: usage): how the world's loader makes every provider object in one
    #: run, side by side in memory, after all their parts
    rooms: InitVar[dict[str, tuple[int, int, int, int]] | None] = None

    def __post_init__(self, rooms: dict[str, tuple[int, int, int, int]] | None) -> None:
        self.room = room_of(self.inventories, self.used) if rooms is None else rooms

    def ordered_traits(self) -> list[str]:
        return list(self.trait_list or sorted(self.traits))

    def can_take(self, rc: str, amount: int) -> bool:
        """True when ``amount`` of ``rc`` fits beside current usage and
        obeys min_unit, max_unit and step_size (``capacity.fits``)."""
        r = self.room.get(rc)
        return r is not None and r[1] <= amount <= r[2] and amount % r[3] == 0 and amount <= r[0]

    def most(self, rc: str) -> int:
        """The most one allocation may take of ``rc`` here now."""
        r = self.room[rc]
        return min(r[0], r[2])


def room_of(
    inventories: dict[str, Inventory], used: dict[str, int]
) -> dict[str, tuple[int, int, int, int]]:
    """class -> (free, min_unit, max_unit, step_size): ``Provider.room``."""
    return {
        rc: (
            capacity(inv.total, inv.reserved, inv.allocation_ratio) - used.get(rc, 0),
            inv.min_unit,
            inv.max_unit,
            inv.step_size or 1,
        )
        for rc, inv in inventories.items()
    }


def traits_ok(
    traits: Iterable[str] | frozenset[str], required: TraitExpr, forbidden: frozenset[str]
) -> bool:
    """Every any-of set meets ``traits`` and no forbidden trait is there."""
    have = traits if isinstance(traits, frozenset) else frozenset(traits)
    if forbidden and not forbidden.isdisjoint(have):
        return False
    return all(not any_of.isdisjoint(have) for any_of in required)


def aggs_ok(
    aggs: frozenset[str], member_of: tuple[frozenset[str], ...], forbidden: frozenset[str]
) -> bool:
    """In one of each member_of set, and in none of the forbidden ones."""
    if forbidden and not forbidden.isdisjoint(aggs):
        return False
    return all(not any_of.isdisjoint(aggs) for any_of in member_of)
