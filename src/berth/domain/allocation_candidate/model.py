"""The in-memory world the search runs over, and per-provider matching.

A ``World`` holds every provider with its tree position, inventories,
usage, traits and aggregates, plus the indexes the search and the planner
use. Each worker keeps one (``world_cache``), refreshed from the change
sequence; a usage change swaps only the providers it touched
(:meth:`World.with_usage`), and so does a change of inventory amounts
(:meth:`World.with_providers`). A structural change to a few providers
(created, deleted, moved, or their classes, traits or aggregates) edits
copies of just the index entries they leave or join and shares the rest
(:meth:`World.with_changes`, ``indexes``): at 50,000 hosts a few
milliseconds and a few MiB, where building the indexes anew takes about
half a second and 60 MiB. Matching a provider against a group is defined
once, here, and used by both GET /allocation_candidates and
GET /resource_providers.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterable
from dataclasses import InitVar, dataclass, field
from typing import Any

from berth.domain.allocation_candidate import indexes
from berth.domain.allocation_candidate.request import TraitExpr
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


def _more(common: dict[frozenset[str], frozenset[str]], union: set[str],
          mine: frozenset[str]) -> frozenset[str] | None:
    """``union`` as a frozenset (one per equal set) when it holds more
    than ``mine``, else None."""
    if len(union) == len(mine):
        return None
    labels = frozenset(union)
    return common.setdefault(labels, labels)


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
        self.anchors = {sid: self._served(sid) for sid in self.sharing}
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
        providers = self.providers
        for root in self.roots:
            own = providers[root]
            traits, aggs = self._served_labels(common, root)
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

    def _served_labels(self, common: dict[frozenset[str], frozenset[str]],
                       root: int) -> tuple[frozenset[str] | None,
                                           frozenset[str] | None]:
        """The traits and the aggregates of every provider that may serve
        ``root``'s tree, each only where it is more than the root's own
        (None where not): what the tree indexes hold for ``root``."""
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
        return (_more(common, traits, own.traits),
                _more(common, aggs, own.aggregates))

    def tree_labels(self, root: int) -> tuple[frozenset[str], frozenset[str]]:
        """The traits and the aggregates of every provider that may serve
        ``root``'s tree: its own providers and the sharing providers
        serving it (a root of this world)."""
        p = self.providers[root]
        return (self.tree_traits.get(root, p.traits),
                self.tree_aggs.get(root, p.aggregates))

    def _served(self, sid: int) -> set[int]:
        """The roots of every tree with a provider in one of sharing
        provider ``sid``'s aggregates (its own root too, when it is in
        any): ``anchors[sid]``."""
        providers = self.providers
        return {providers[pid].root_id
                for agg in providers[sid].aggregates
                for pid in self.by_agg[agg]}

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
        return self._swapped({
            pid: dataclasses.replace(old, used=now)
            for pid, now in used.items()
            if (old := self.providers.get(pid)) is not None}, in_place)

    def with_providers(self, fresh: Iterable[Provider],
                       in_place: bool = False) -> World | None:
        """This world with ``fresh`` replacing the providers of the same
        ids, sharing every index, when none of them changed what an index
        holds (only inventory amounts or usage changed: the common
        inventory update); None when the indexes must be rebuilt.
        ``in_place`` as for ``with_usage``."""
        swap = {p.id: p for p in fresh}
        for p in swap.values():
            old = self.providers.get(p.id)
            if old is None or _indexed(old) != _indexed(p):
                return None
        return self._swapped(swap, in_place)

    def _swapped(self, fresh: dict[int, Provider], in_place: bool) -> World:
        """A world sharing every index with this one, whose provider map
        holds ``fresh`` in place of the providers of the same ids: a copy
        of this world's map, or (``in_place``) that map itself."""
        other = copy.copy(self)
        other.providers = self.providers if in_place else dict(self.providers)
        other.providers.update(fresh)
        return other

    def with_changes(self, fresh: Iterable[Provider],
                     gone: Iterable[int] = (), in_place: bool = False
                     ) -> World | None:
        """This world with the providers ``gone`` removed and ``fresh``
        replacing or adding the providers of their ids: equal, index by
        index, to a ``World`` built of those providers, but made by
        editing copies of just the index entries the changed providers
        leave or join, and sharing the rest with this world (which is not
        modified). Its memo starts empty.

        With ``in_place`` the indexes and the provider map themselves are
        edited, and this world is left unusable: only for a caller that
        knows nobody reads it any more (as for ``with_usage``). A copy of
        a map writes a reference count into every entry, which in a
        forked worker copies the pages of all of them.

        None when building the world anew is wiser: more than
        ``PATCH_MOST`` providers changed what an index holds, one of them
        is or was a sharing provider (the trees it serves are worked out
        from every provider of its aggregates), or a uuid would be held
        twice. Then, with ``in_place``, the provider map may hold the
        change already, and the indexes are to be built anew from it.
        """
        gone = set(gone)
        new_of = {p.id: p for p in fresh}
        changes: list[Change] = []
        for pid in gone | new_of.keys():
            old, new = self.providers.get(pid), new_of.get(pid)
            if old is None and new is None or (
                    old is not None and new is not None
                    and _indexed(old) == _indexed(new)):
                continue
            if any(SHARING_TRAIT in p.traits for p in (old, new)
                   if p is not None):
                return None
            changes.append((old, new))
        if len(changes) > PATCH_MOST:
            return None
        try:
            names = _names(self, changes)
        except indexes.Unpatchable:
            return None
        # What the edits need of this world, read before any is made (in
        # place, this world's maps are the ones edited). The trees whose
        # providers or sharing providers changed: those the changed
        # providers are or were in (a sharing provider serves another
        # tree only through one of its providers).
        near: set[int] = set()
        for pair in changes:
            for p in pair:
                if p is not None:
                    near.update((p.id, p.root_id))
        was_root = {pid for pid in near if self._is_root(pid)}
        before = {old.id: old for old, _ in changes if old is not None}
        providers = self.providers if in_place else dict(self.providers)
        for pid in gone:
            providers.pop(pid, None)
        providers.update(new_of)

        def uuid_before(pid: int) -> str:
            """A provider's uuid in this world (as it was)."""
            old = before.get(pid)
            return (old if old is not None else providers[pid]).uuid

        other = copy.copy(self)
        other.providers, other.memo, other._ancestors = providers, {}, {}
        try:
            other._patch(self, _Edit(changes, names, near, was_root,
                                     before, uuid_before, in_place))
        except indexes.Unpatchable:
            return None
        return other

    def _patch(self, old: World, edit: _Edit) -> None:
        """Edit this copy of ``old``'s indexes for ``edit.changes``."""
        changes, mine = edit.changes, edit.in_place
        self.by_uuid = indexes.updated(old.by_uuid, edit.names, mine)
        self.by_trait = indexes.edit_sets(old.by_trait, *indexes.shifts(
            changes, lambda p: p.traits, False), mine)
        self.by_agg = indexes.edit_sets(old.by_agg, *indexes.shifts(
            changes, lambda p: p.aggregates, False), mine)
        def lists(index: dict[Any, list[int]],
                  keys: Callable[[Provider], Iterable[Any]]
                  ) -> dict[Any, list[int]]:
            leave, join = indexes.shifts(changes, keys, True)
            return indexes.edit_lists(index, leave, join, edit.uuid_before,
                                      self.uuid, mine)

        # ``ordered`` as the one entry of an index every provider is under
        self.ordered = lists({0: old.ordered}, lambda p: (0,)).get(0, [])
        self.trees = lists(old.trees, lambda p: (p.root_id,))
        self._by_class = lists(old._by_class, lambda p: p.inventories.keys())
        self.tree_class = lists(
            old.tree_class, lambda p: [(p.root_id, rc) for rc in p.inventories])
        self._patch_served(old, edit)
        self._patch_roots(old, edit)

    def _patch_served(self, old: World, edit: _Edit) -> None:
        """Edit ``anchors`` and ``shared_into`` for the sharing providers
        of the aggregates the changed providers are or were in."""
        aggs: set[str] = set()
        for pair in edit.changes:
            for p in pair:
                if p is not None:
                    aggs |= p.aggregates
        anchors: dict[int, set[int] | None] = {}
        into: dict[int, list[int] | None] = {}
        for sid in self.sharing:
            sharing = self.providers[sid]
            if sharing.aggregates.isdisjoint(aggs):
                continue
            now, was = self._served(sid), old.anchors[sid]
            if now == was:
                continue
            anchors[sid] = now
            for anchor in (now ^ was) - {sharing.root_id}:
                have = (into[anchor] if anchor in into
                        else old.shared_into.get(anchor))
                members = [s for s in have or () if s != sid]
                if anchor in now:
                    bisect.insort(members, sid, key=self.uuid)
                into[anchor] = members or None
        self.anchors = indexes.updated(old.anchors, anchors, edit.in_place)
        self.shared_into = indexes.updated(old.shared_into, into,
                                           edit.in_place)

    def _patch_roots(self, old: World, edit: _Edit) -> None:
        """Edit ``roots`` and the tree label indexes for the ``near``
        providers: those that are or were roots of a changed tree."""
        near, was_root, mine = edit.near, edit.was_root, edit.in_place
        moved = [pid for pid in near if (pid in was_root) != self._is_root(pid)
                 or self._is_root(pid)
                 and edit.uuid_before(pid) != self.uuid(pid)]
        if moved:
            roots = old.roots if mine else list(old.roots)
            traits = old.root_traits if mine else list(old.root_traits)
            aggs = old.root_aggs if mine else list(old.root_aggs)
            for pid in moved:
                if pid in was_root:
                    i = indexes.position(
                        roots, edit.before.get(pid) or self.providers[pid],
                        edit.uuid_before)
                    del roots[i], traits[i], aggs[i]
            for pid in moved:
                if self._is_root(pid):
                    p = self.providers[pid]
                    i = bisect.bisect_left(roots, p.uuid, key=self.uuid)
                    roots.insert(i, pid)
                    traits.insert(i, p.traits)
                    aggs.insert(i, p.aggregates)
            self.roots, self.root_traits, self.root_aggs = roots, traits, aggs
        common: dict[frozenset[str], frozenset[str]] = {}
        tree_traits: dict[int, frozenset[str] | None] = {}
        tree_aggs: dict[int, frozenset[str] | None] = {}
        at: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        for root in near:
            if not self._is_root(root):
                tree_traits[root] = tree_aggs[root] = None
                continue
            more_traits, more_aggs = self._served_labels(common, root)
            tree_traits[root], tree_aggs[root] = more_traits, more_aggs
            p = self.providers[root]
            at[indexes.position(self.roots, p, self.uuid)] = (
                p.traits if more_traits is None else more_traits,
                p.aggregates if more_aggs is None else more_aggs)
        self.tree_traits = indexes.updated(old.tree_traits, tree_traits, mine)
        self.tree_aggs = indexes.updated(old.tree_aggs, tree_aggs, mine)
        self.root_traits = indexes.edit_at(self.root_traits, {
            i: labels[0] for i, labels in at.items()}, old.root_traits, mine)
        self.root_aggs = indexes.edit_at(self.root_aggs, {
            i: labels[1] for i, labels in at.items()}, old.root_aggs, mine)

    def _is_root(self, pid: int) -> bool:
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


#: An old and a new version of a provider (None: not there).
Change = tuple[Provider | None, Provider | None]


@dataclass(frozen=True, slots=True)
class _Edit:
    """What ``World.with_changes`` works out before editing the indexes."""

    changes: list[Change]
    #: uuid -> provider id edits of ``by_uuid`` (None: gone)
    names: dict[str, int | None]
    #: ids of the changed providers and of their old and new roots
    near: set[int]
    #: those of ``near`` that were roots
    was_root: set[int]
    #: id -> the old version of each changed provider
    before: dict[int, Provider]
    #: a provider's uuid in the old world
    uuid_before: Callable[[int], str]
    in_place: bool

#: At most this many providers changing what an index holds are patched
#: into a world (``World.with_changes``); more are rebuilt. Each costs a
#: few insertions into lists the length of the world (about 0.1 ms at
#: 50,000 hosts: 1,000 new trees patch in 0.1 s, where a rebuild takes
#: 0.4-0.5 s and twice to ten times the new memory).
PATCH_MOST = 1000


def _names(old: World, changes: list[Change]) -> dict[str, int | None]:
    """uuid -> provider id edits of ``old.by_uuid`` (None: gone). Raises
    Unpatchable when a new uuid is already another provider's."""
    names: dict[str, int | None] = {}
    for before, after in changes:
        if before is not None and (after is None
                                   or after.uuid != before.uuid):
            names[before.uuid] = None
    for before, after in changes:
        if after is not None and (before is None
                                  or after.uuid != before.uuid):
            if names.get(after.uuid, old.by_uuid.get(after.uuid)) is not None:
                raise indexes.Unpatchable(after.id)
            names[after.uuid] = after.id
    return names
