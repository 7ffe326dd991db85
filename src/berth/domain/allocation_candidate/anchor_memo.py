"""Each anchor's candidates per request shape, kept for the next request.

The search (``search``) asks the memo for an anchor's candidates before
working them out, and hands it those it worked out to the end.

A tree of one provider that no sharing provider serves (the usual
compute host) gives at most one candidate whatever the shape (each group
fits that provider or not), and is kept on the provider object itself
(``Provider.kept``) rather than in the shape's map: reading it touches
no memory beyond the provider the search reads anyway, which is what
lets an order that visits trees scattered over the world (``spread``'s
ties, ``random``) find them kept as cheaply as ``uuid`` finds its first
trees. Those entries are outside the budget: there is at most one per
provider, for one shape at a time (the first to claim it; while that
shape lives, another shape's entry for the tree goes to its map).
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


class ShapeEntries(dict[int, Entry]):
    """One shape's entries by anchor, in ``memo``; also what a lone
    provider's own entry names (``Provider.kept``). ``live`` until the
    memo drops the shape: an entry naming a dropped shape, or another
    memo's (a provider object outlives the world whose memo kept it,
    ``world_patch.with_changes``), is stale, and free to take."""

    __slots__ = ("live", "memo", "amounts")

    def __init__(self, memo: AnchorMemo) -> None:
        super().__init__()
        self.live = True
        self.memo = memo
        #: one ``{class: amount}`` dict per distinct amounts, shared by
        #: the candidates kept (``_copies``)
        self.amounts: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}


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
    in the shapes' maps over ``shapes`` shapes; the shape least recently
    asked for goes first. A lone tree's entry goes on its provider
    (``lone``), outside the budget.
    """

    #: An anchor with more candidates than this is not kept (a tree that
    #: explodes into combinations is searched lazily every time).
    PER_ANCHOR = 256

    def __init__(self, budget: int = 20_000, shapes: int = 16) -> None:
        self.budget = budget
        self.max_shapes = shapes
        #: candidates held now, over every shape
        self.held = 0
        self._shapes: OrderedDict[Hashable, ShapeEntries] = OrderedDict()

    def shape(self, key: Hashable) -> ShapeEntries:
        """The entries of shape ``key`` (made empty if new)."""
        entries = self._shapes.get(key)
        if entries is None:
            entries = self._shapes[key] = ShapeEntries(self)
            while len(self._shapes) > self.max_shapes:
                self._drop_oldest()
        else:
            self._shapes.move_to_end(key)
        return entries

    def keep(
        self,
        entries: ShapeEntries,
        anchor: int,
        basis: tuple[Provider, ...],
        found: list[Candidate],
    ) -> None:
        """Hold ``found`` as ``anchor``'s candidates in ``entries``, unless
        that would go over the budget (a lone tree's on its provider,
        ``lone``, if no other live shape holds it)."""
        if not entries.live:
            # Dropped while a search of it ran: nothing counts it now.
            return
        if len(basis) == 1 and self.lone(entries, anchor, basis[0], found):
            return
        old = entries.get(anchor)
        grow = len(found) - (len(old[1]) if old else 0)
        while (
            self.held + grow > self.budget
            and len(self._shapes) > 1
            and next(iter(self._shapes.values())) is not entries
        ):
            self._drop_oldest()
        if self.held + grow > self.budget:
            return
        entries[anchor] = (basis, _copies(entries, found))
        self.held += grow

    def lone(
        self, entries: ShapeEntries, anchor: int, provider: Provider, found: list[Candidate]
    ) -> bool:
        """Hold ``found`` on ``provider``, whose tree it is alone (no
        child, no sharing provider), unless another live shape holds it;
        False when not held."""
        owner = provider.kept
        if owner is not None:
            held_by = owner[0]
            if (
                held_by is not entries
                and isinstance(held_by, ShapeEntries)
                and held_by.memo is self
                and held_by.live
            ):
                return False
        # One tuple, the shape first: one object to read, not two.
        provider.kept = (entries, *_copies(entries, found))
        old = entries.pop(anchor, None)  # held in the map before
        if old is not None:
            self.held -= len(old[1])
        return True

    def _drop_oldest(self) -> None:
        try:
            _, entries = self._shapes.popitem(last=False)
        except KeyError:  # another thread emptied it first
            return
        entries.live = False
        self.held -= sum(len(found) for _, found in entries.values())
        # Providers still name the shape (stale entries, free to take):
        # what it holds in its map goes now, not when they are replaced.
        entries.clear()
        entries.amounts.clear()


def _copies(entries: ShapeEntries, found: list[Candidate]) -> list[Candidate]:
    """``found`` as the memo holds them: each marked ``kept`` (callers
    may keep what they derive from it, as its encoded body), and each
    provider's ``{class: amount}`` the shape's one dict of those
    amounts (most candidates of a shape take the same amounts from a
    host: one dict instead of one a host, a quarter of what a kept host
    costs). Nothing edits a candidate's amounts once made."""
    amounts = entries.amounts
    # Built directly: ``_replace`` costs several times as much.
    return [
        Candidate(
            c.anchor,
            {pid: amounts.setdefault(tuple(res.items()), res) for pid, res in c.allocs.items()},
            c.mappings,
            c.shared_only,
            True,
        )
        for c in found
    ]


def shape_key(specs: list[GroupSpec], wide: RequestWide) -> Hashable:
    """What an anchor's candidates depend on in a request (not ``limit``,
    nor root_required, which only chooses the anchors)."""
    return (
        tuple(
            (
                s.group.suffix,
                tuple(sorted(s.group.resources.items())),
                s.group.required,
                s.group.forbidden,
                s.group.member_of,
                s.group.forbidden_aggs,
                s.tree_root,
            )
            for s in specs
        ),
        wide.group_policy,
        wide.same_subtrees,
    )


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
