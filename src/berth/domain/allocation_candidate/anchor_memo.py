"""Each anchor's candidates per request shape, kept for the next request.

The search (``search``) asks the memo for an anchor's candidates before
working them out, and hands it those it worked out to the end.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Hashable

from berth.domain.allocation_candidate.merge import Candidate
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.request import RequestWide
from berth.domain.allocation_candidate.world import World

#: An anchor's candidates for one request shape, and the providers (the
#: very objects) they were worked out from.
Entry = tuple[tuple[Provider, ...], list[Candidate]]


class AnchorMemo:
    """Each anchor's candidates per request shape, for the next request.

    An anchor's candidates depend only on the request's shape (its groups
    and group-wide rules, not ``limit``) and on the providers of its tree
    and the sharing providers serving it. Providers are immutable: a usage
    or inventory refresh replaces exactly the ones it changed
    (``world_patch.with_usage``, ``with_providers``), so an entry stays valid
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
        self._shapes: OrderedDict[Hashable, dict[int, Entry]] = OrderedDict()

    def shape(self, key: Hashable) -> dict[int, Entry]:
        """The entries of shape ``key`` (made empty if new)."""
        entries = self._shapes.get(key)
        if entries is None:
            entries = self._shapes[key] = {}
            while len(self._shapes) > self.max_shapes:
                self._drop_oldest()
        else:
            self._shapes.move_to_end(key)
        return entries

    def keep(self, entries: dict[int, Entry], anchor: int,
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
        # Built directly: ``_replace`` costs several times as much.
        entries[anchor] = (basis, [Candidate(c.anchor, c.allocs, c.mappings,
                                             c.shared_only, {})
                                   for c in found])
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


def basis_of(world: World, anchor: int) -> tuple[Provider, ...]:
    """The providers ``anchor``'s candidates are worked out from (its
    tree's, then the sharing providers serving it)."""
    providers = world.providers
    found = tuple([providers[p] for p in world.trees.get(anchor, (anchor,))])
    shared = world.shared_into.get(anchor)
    if shared:
        found += tuple([providers[p] for p in shared])
    return found


def same_basis(a: tuple[Provider, ...], b: tuple[Provider, ...]) -> bool:
    """True when ``a`` and ``b`` are the very same provider objects: an
    entry worked out from ``a`` is still valid for ``b``."""
    return len(a) == len(b) and all(map(operator.is_, a, b))
