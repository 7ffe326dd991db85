"""The next world when a few providers change, sharing what did not.

A world is never modified once published (except ``in_place``, below):
each function here returns another one. A usage change swaps only the
providers it touched (``with_usage``), and so does a change of inventory
amounts (``with_providers``); every index is shared. A structural change
to a few providers (created, deleted, moved, or their classes, traits or
aggregates) edits copies of just the index entries they leave or join
and shares the rest (``with_changes``, on ``indexes``' edits): at 50,000
hosts a small fraction of the time and memory of building the indexes
anew (bench/journal/2026-12-01.md).

With ``in_place`` the old world's own maps are edited instead of copied:
only for a caller that knows nobody reads the old world any more
(``CandidateCache`` with ``exclusive``). Copying a map writes a reference
count into every entry, which in a forked worker copies every page of
them out of the memory it shares with the master.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import os_traits

from berth.domain.allocation_candidate import indexes, rankings
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.world import World

#: At most this many providers changing what an index holds are patched
#: into a world (``with_changes``); more are rebuilt. Each costs a few
#: insertions into lists the length of the world, so past this many a
#: rebuild, which takes more memory, costs no more time
#: (bench/journal/2026-12-01.md).
PATCH_MOST = 1000

#: An old and a new version of a provider (None: not there).
Change = tuple[Provider | None, Provider | None]


def with_usage(world: World, used: dict[int, dict[str, int]], *, in_place: bool = False) -> World:
    """``world`` with new usage for some providers (their objects are
    replaced; everything else, indexes and memo included, is shared).
    ``in_place``: ``world``'s provider map itself is updated and shared
    with the world returned."""
    return _swapped(
        world,
        {
            pid: dataclasses.replace(old, used=now)
            for pid, now in used.items()
            if (old := world.providers.get(pid)) is not None
        },
        in_place,
    )


def with_providers(
    world: World, fresh: Iterable[Provider], *, in_place: bool = False
) -> World | None:
    """``world`` with ``fresh`` replacing the providers of the same ids,
    sharing every index, when none of them changed what an index holds
    (only inventory amounts or usage changed: the common inventory
    update); None when the indexes must be rebuilt. ``in_place`` as for
    ``with_usage``."""
    swap = {p.id: p for p in fresh}
    for p in swap.values():
        old = world.providers.get(p.id)
        if old is None or _indexed(old) != _indexed(p):
            return None
    return _swapped(world, swap, in_place)


def _swapped(world: World, fresh: dict[int, Provider], in_place: bool) -> World:
    """A world sharing every index with ``world``, whose provider map
    holds ``fresh`` in place of the providers of the same ids: a copy of
    ``world``'s map, or (``in_place``) that map itself."""
    was = rankings.before(world, {p.root_id for p in fresh.values()})
    other = copy.copy(world)
    other.providers = world.providers if in_place else dict(world.providers)
    other.providers.update(fresh)
    other.rankings = rankings.reranked(world, other, was, in_place=in_place)
    return other


def _indexed(p: Provider) -> tuple[object, ...]:
    """What of ``p`` the world's indexes depend on."""
    return (
        p.uuid,
        p.root_id,
        p.parent_id,
        p.inventories.keys(),
        p.traits,
        p.aggregates,
        p.trait_list,
    )


def with_changes(
    world: World, fresh: Iterable[Provider], gone: Iterable[int] = (), *, in_place: bool = False
) -> World | None:
    """``world`` with the providers ``gone`` removed and ``fresh``
    replacing or adding the providers of their ids: equal, index by
    index, to a ``World`` built of those providers, but made by editing
    copies of just the index entries the changed providers leave or
    join, and sharing the rest with ``world`` (which is not modified).
    Its memo starts empty. With ``in_place`` the indexes and the
    provider map themselves are edited, and ``world`` is left unusable.

    A sharing provider changed (created, deleted, given or stripped of
    ``MISC_SHARES_VIA_AGGREGATE``, or its aggregates or traits changed)
    re-works out the trees it serves from the members of its aggregates,
    and the labels of each tree it serves or served.

    None when building the world anew is wiser: more than ``PATCH_MOST``
    providers changed what an index holds, or a uuid would be held
    twice. Then, with ``in_place``, the provider map may hold the change
    already, and the indexes are to be built anew from it.
    """
    gone = set(gone)
    new_of = {p.id: p for p in fresh}
    changes = _indexed_changes(world, gone | new_of.keys(), new_of)
    if len(changes) > PATCH_MOST:
        return None
    try:
        names = _names(world, changes)
    except indexes.Unpatchable:
        return None
    # What the edits need of this world, read before any is made (in
    # place, this world's maps are the ones edited).
    near = _near(changes)
    # Every changed tree's root is near, or (a tree whose providers
    # changed amounts only) the root of one of ``fresh``.
    ranked = rankings.before(world, near | {p.root_id for p in new_of.values()})
    was_root = {pid for pid in near if world.is_root(pid)}
    before = {old.id: old for old, _ in changes if old is not None}
    providers = world.providers if in_place else dict(world.providers)
    for pid in gone:
        providers.pop(pid, None)
    providers.update(new_of)
    other = copy.copy(world)
    other.providers, other.memo, other.ancestry = providers, {}, {}
    try:
        _patch(other, world, _Edit(changes, names, near, was_root, before, providers, in_place))
    except indexes.Unpatchable:
        return None
    other.rankings = rankings.reranked(world, other, ranked, in_place=in_place)
    return other


def _indexed_changes(world: World, ids: Iterable[int], new_of: dict[int, Provider]) -> list[Change]:
    """(old, new) for each of ``ids`` whose change moves it in an index
    (new None: gone)."""
    changes: list[Change] = []
    for pid in ids:
        old, new = world.providers.get(pid), new_of.get(pid)
        if (
            old is None
            and new is None
            or (old is not None and new is not None and _indexed(old) == _indexed(new))
        ):
            continue
        changes.append((old, new))
    return changes


def _sharing(p: Provider | None) -> bool:
    """True when ``p`` is a sharing provider."""
    return p is not None and os_traits.MISC_SHARES_VIA_AGGREGATE in p.traits


def _names(old: World, changes: list[Change]) -> dict[str, int | None]:
    """uuid -> provider id edits of ``old.by_uuid`` (None: gone). Raises
    Unpatchable when a new uuid is already another provider's."""
    names: dict[str, int | None] = {}
    for before, after in changes:
        if before is not None and (after is None or after.uuid != before.uuid):
            names[before.uuid] = None
    for before, after in changes:
        if after is not None and (before is None or after.uuid != before.uuid):
            if names.get(after.uuid, old.by_uuid.get(after.uuid)) is not None:
                raise indexes.Unpatchable(after.id)
            names[after.uuid] = after.id
    return names


def _near(changes: list[Change]) -> set[int]:
    """The ids of the changed providers and of their old and new roots:
    the trees whose providers or sharing providers changed (a sharing
    provider serves another tree only through one of its providers)."""
    near: set[int] = set()
    for pair in changes:
        for p in pair:
            if p is not None:
                near.update((p.id, p.root_id))
    return near


@dataclass(frozen=True, slots=True)
class _Edit:
    """What ``with_changes`` works out before editing the indexes."""

    changes: list[Change]
    #: uuid -> provider id edits of ``by_uuid`` (None: gone)
    names: dict[str, int | None]
    #: ``_near`` the changes
    near: set[int]
    #: those of ``near`` that were roots
    was_root: set[int]
    #: id -> the old version of each changed provider
    before: dict[int, Provider]
    #: the new world's provider map
    providers: dict[int, Provider]
    in_place: bool

    def uuid_before(self, pid: int) -> str:
        """A provider's uuid in the old world."""
        old = self.before.get(pid)
        return (old if old is not None else self.providers[pid]).uuid


def _patch(new: World, old: World, edit: _Edit) -> None:
    """Edit ``new``, a copy of ``old``, for ``edit.changes``."""
    changes, mine = edit.changes, edit.in_place
    # The sharing providers among the changed ones, before or after.
    sharing = {p.id for pair in changes for p in pair if p is not None and _sharing(p)}
    if sharing:
        now = set(old.sharing)
        for pair in changes:
            for p in pair:
                if p is not None:
                    now.discard(p.id)
        now.update(after.id for _, after in changes if after is not None and _sharing(after))
        new.sharing = sorted(now)
    new.by_uuid = indexes.updated(old.by_uuid, edit.names, in_place=mine)
    new.by_trait = indexes.edit_sets(
        old.by_trait, *indexes.shifts(changes, lambda p: p.traits, ordered=False), in_place=mine
    )
    new.by_agg = indexes.edit_sets(
        old.by_agg, *indexes.shifts(changes, lambda p: p.aggregates, ordered=False), in_place=mine
    )

    def lists(
        index: dict[Any, list[int]], keys: Callable[[Provider], Iterable[Any]]
    ) -> dict[Any, list[int]]:
        leave, join = indexes.shifts(changes, keys, ordered=True)
        return indexes.edit_lists(index, leave, join, edit.uuid_before, new.uuid, in_place=mine)

    # ``ordered`` as the one entry of an index every provider is under
    new.ordered = lists({0: old.ordered}, lambda p: (0,)).get(0, [])
    new.trees = lists(old.trees, lambda p: (p.root_id,))
    new.by_class = lists(old.by_class, lambda p: p.inventories.keys())
    new.tree_class = lists(old.tree_class, lambda p: [(p.root_id, rc) for rc in p.inventories])
    relabel = _patch_served(new, old, edit, sharing)
    _patch_roots(new, old, edit)
    _patch_tree_labels(new, old, edit, edit.near | relabel)


def _patch_served(new: World, old: World, edit: _Edit, changed: set[int]) -> set[int]:
    """Edit ``anchors`` and ``shared_into`` for the sharing providers
    that ``changed`` (sharing before the change or after it) and for
    those of the aggregates the changed providers are or were in; the
    roots whose tree labels that may change (those a sharing provider
    now serves or no longer does, and every tree a changed sharing
    provider serves or served)."""
    aggs: set[str] = set()
    for pair in edit.changes:
        for p in pair:
            if p is not None:
                aggs |= p.aggregates
    anchors: dict[int, set[int] | None] = {}
    into: dict[int, list[int] | None] = {}
    relabel: set[int] = set()

    def serve(sid: int, anchor: int, served: bool) -> None:
        """``anchor``'s ``shared_into`` with ``sid`` in it or not."""
        have = into[anchor] if anchor in into else old.shared_into.get(anchor)
        members = [s for s in have or () if s != sid]
        if served:
            bisect.insort(members, sid, key=new.uuid)
        into[anchor] = members or None
        relabel.add(anchor)

    # First those no longer sharing (deleted, or the trait taken off):
    # an insertion below compares the uuids of the others.
    for sid in changed.difference(new.sharing):
        anchors[sid] = None
        for anchor in old.anchors.get(sid, ()):
            serve(sid, anchor, False)
    for sid in new.sharing:
        sharing = new.providers[sid]
        if sid not in changed and sharing.aggregates.isdisjoint(aggs):
            continue
        now, was = new.served(sid), old.anchors.get(sid, set())
        if sid in changed:
            # Its traits, aggregates or root may have changed: every tree
            # it served or serves is looked at again.
            relabel |= now | was
            anchors[sid] = now
            for anchor in now | was:
                serve(sid, anchor, anchor in now and anchor != sharing.root_id)
            continue
        if now == was:
            continue
        anchors[sid] = now
        for anchor in (now ^ was) - {sharing.root_id}:
            serve(sid, anchor, anchor in now)
    new.anchors = indexes.updated(old.anchors, anchors, in_place=edit.in_place)
    new.shared_into = indexes.updated(old.shared_into, into, in_place=edit.in_place)
    return relabel


def _patch_roots(new: World, old: World, edit: _Edit) -> None:
    """Edit ``roots``, and ``root_traits`` and ``root_aggs`` along with
    it, for the ``near`` providers that became roots, stopped being one
    or, being one, changed uuid (and so place)."""
    near, was_root, mine = edit.near, edit.was_root, edit.in_place
    moved = [
        pid
        for pid in near
        if (pid in was_root) != new.is_root(pid)
        or new.is_root(pid)
        and edit.uuid_before(pid) != new.uuid(pid)
    ]
    if not moved:
        return
    roots = old.roots if mine else list(old.roots)
    traits = old.root_traits if mine else list(old.root_traits)
    aggs = old.root_aggs if mine else list(old.root_aggs)
    for pid in moved:
        if pid in was_root:
            i = indexes.position(
                roots, edit.before.get(pid) or new.providers[pid], edit.uuid_before
            )
            del roots[i], traits[i], aggs[i]
    for pid in moved:
        if new.is_root(pid):
            p = new.providers[pid]
            i = bisect.bisect_left(roots, p.uuid, key=new.uuid)
            roots.insert(i, pid)
            traits.insert(i, p.traits)
            aggs.insert(i, p.aggregates)
    new.roots, new.root_traits, new.root_aggs = roots, traits, aggs


def _patch_tree_labels(new: World, old: World, edit: _Edit, near: set[int]) -> None:
    """Edit the tree label indexes for the ``near`` providers that are
    or were roots of a changed tree (after ``_patch_roots``)."""
    mine = edit.in_place
    common: dict[frozenset[str], frozenset[str]] = {}
    tree_traits: dict[int, frozenset[str] | None] = {}
    tree_aggs: dict[int, frozenset[str] | None] = {}
    at: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
    for root in near:
        if not new.is_root(root):
            tree_traits[root] = tree_aggs[root] = None
            continue
        more_traits, more_aggs = new.served_labels(common, root)
        tree_traits[root], tree_aggs[root] = more_traits, more_aggs
        p = new.providers[root]
        at[indexes.position(new.roots, p, new.uuid)] = (
            p.traits if more_traits is None else more_traits,
            p.aggregates if more_aggs is None else more_aggs,
        )
    new.tree_traits = indexes.updated(old.tree_traits, tree_traits, in_place=mine)
    new.tree_aggs = indexes.updated(old.tree_aggs, tree_aggs, in_place=mine)
    new.root_traits = indexes.edit_at(
        new.root_traits, {i: labels[0] for i, labels in at.items()}, old.root_traits, in_place=mine
    )
    new.root_aggs = indexes.edit_at(
        new.root_aggs, {i: labels[1] for i, labels in at.items()}, old.root_aggs, in_place=mine
    )
