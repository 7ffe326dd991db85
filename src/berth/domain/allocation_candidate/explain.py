"""Why an allocation-candidates query leaves trees out.

For every tree (anchor) of the world, the search itself decides whether
the tree gives a candidate (``engine.has_candidate``: the first candidate
the engine's merge yields under that anchor). For a tree that gives none,
the causes are found in three steps:

1. ``root_required``: the root lacks a required trait or carries a
   forbidden one (the engine's anchor filter).
2. Each group the search has no offer for under the tree: the faults of
   the providers nearest to serving each part of it no provider can
   serve (``faults.group_faults``).
3. The causes of steps 1 and 2 are removed on a copy of the tree (its
   providers, the sharing providers serving it and their ancestors), and
   the search runs again. If the tree still gives nothing, what is left
   is in the merge of the groups: ``group_policy=isolate``,
   ``same_subtree`` or two groups' amounts together on one provider
   (``capacity`` with no group). Each is relaxed in turn on the copy;
   those that alone give a candidate are reported (or all of them, when
   only relaxing all together does). Should nothing explain it, the tree
   is reported with ``other`` rather than with a wrong cause.

4. Only the causes needed are reported (``_fewest``): the first whose
   removal alone makes the tree a candidate, else a set from which no
   cause can be dropped.

``tests/unit/test_allocation_candidate_explain.py`` checks against the
brute-force oracle that removing the reported causes makes the tree a
candidate and that none of them can be left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from berth.domain.allocation_candidate.engine import (
    anchor_filter,
    group_specs,
    has_candidate,
)
from berth.domain.allocation_candidate.faults import KINDS, PLENTY, Fault, group_faults
from berth.domain.allocation_candidate.offers import GroupSpec, Offers
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory

Causes = dict[Fault, list[int]]

#: The faults removed by taking a label away (applied before the others).
REMOVALS = ("trait_forbidden", "aggregate_forbidden")

#: The faults about one class of one group.
ROOM = ("no_inventory", "capacity", "min_unit", "max_unit", "step_size")

#: How many times explain looks again after removing the causes found.
ROUNDS = 3


@dataclass
class TreeVerdict:
    """One tree: whether it gives a candidate, and if not, why (each
    fault with the providers it stopped, tree providers first)."""

    root: int
    candidate: bool
    causes: Causes = field(default_factory=dict)


@dataclass
class Explanation:
    """Every tree's verdict, in root uuid order."""

    world: World
    trees: list[TreeVerdict]

    @property
    def excluded(self) -> list[TreeVerdict]:
        return [t for t in self.trees if not t.candidate]

    def named(self) -> set[int]:
        """The providers a report of the excluded trees names: their
        roots and every provider a cause stopped (whose names the answer
        shows beside their uuids)."""
        found = {t.root for t in self.excluded}
        for tree in self.excluded:
            for pids in tree.causes.values():
                found.update(pids)
        return found

    def counts(self) -> dict[str, int]:
        """Reason -> how many trees it kept out, in ``KINDS`` order (a
        tree counts once under each of its reasons)."""
        found: dict[str, int] = {}
        for tree in self.excluded:
            for kind in {f.kind for f in tree.causes}:
                found[kind] = found.get(kind, 0) + 1
        return {k: found[k] for k in KINDS if k in found}

    def summary_line(self) -> str:
        """One line: trees considered, how many give a candidate, and the
        count per reason."""
        counts = ", ".join("%s %d" % item for item in self.counts().items())
        return "%d trees considered, %d give a candidate%s" % (
            len(self.trees),
            len(self.trees) - len(self.excluded),
            "; excluded by " + counts if counts else "",
        )


def explain(
    world: World, groups: list[RequestGroup], specs: list[GroupSpec] | None, wide: RequestWide
) -> Explanation:
    """Verdicts for every tree of ``world``. ``specs`` is None when an
    ``in_tree`` names no provider (then every tree is out, for that)."""
    if specs is None:
        return _unknown_in_tree(world, groups, wide)
    return Explanation(world, [verdict(world, specs, wide, root) for root in world.roots])


def _unknown_in_tree(world: World, groups: list[RequestGroup], wide: RequestWide) -> Explanation:
    """Every tree is out because an ``in_tree`` names no provider; what
    else would keep each out is found without those ``in_tree``."""
    unknown = [g for g in groups if g.in_tree is not None and g.in_tree not in world.by_uuid]
    faults: Causes = {Fault("in_tree", g.suffix, (g.in_tree or "",)): [] for g in unknown}
    # Every in_tree left names a provider, so the specs are not None.
    specs = (
        group_specs(
            world, [dataclasses.replace(g, in_tree=None) if g in unknown else g for g in groups]
        )
        or []
    )
    trees = []
    for root in world.roots:
        other = verdict(world, specs, wide, root)
        causes: Causes = {**faults, **other.causes}
        trees.append(TreeVerdict(root, False, causes))
    return Explanation(world, trees)


def verdict(world: World, specs: list[GroupSpec], wide: RequestWide, anchor: int) -> TreeVerdict:
    """The verdict on the tree rooted at ``anchor``."""
    if has_candidate(world, specs, wide, anchor):
        return TreeVerdict(anchor, True)
    causes: Causes = {}
    root = world.providers[anchor]
    if not anchor_filter(world, wide)(anchor):
        wrong = sorted(wide.root_required - root.traits) + sorted(
            "!" + t for t in wide.root_forbidden & root.traits
        )
        causes[Fault("root_required", None, tuple(wrong))] = [anchor]
    _add_group_causes(causes, world, specs, anchor)
    fixed = _fixed(world, anchor, causes, specs, wide)
    # Removing one cause can reveal another (a provider given the class
    # it lacked may then lack room): look again, a bounded number of times.
    for look in range(ROUNDS + 1):
        if causes and has_candidate(*fixed, anchor):
            break
        if look == ROUNDS or not _add_group_causes(causes, fixed[0], fixed[1], anchor):
            causes.update(_merge_causes(*fixed, anchor))
            break
        fixed = _fixed(world, anchor, causes, specs, wide)
    kept = _fewest(world, specs, wide, anchor, causes)
    return TreeVerdict(anchor, False, _in_context(world, specs, wide, anchor, kept))


def _in_context(
    world: World, specs: list[GroupSpec], wide: RequestWide, anchor: int, causes: Causes
) -> Causes:
    """``causes`` with each fault about a group's class blamed again on
    the tree as the *other* causes leave it: a fix can bring another
    provider in (a root given the aggregate it lacked now shares a pool's
    disk), and then the provider nearest to serving that class there is
    the one to blame (the pool, short of room), not the one found before
    the fix (the root, with no disk of its own). A new blame is kept only
    when, with the other causes, it still makes the tree a candidate."""
    if Fault("other") in causes:
        return causes
    for _ in range(ROUNDS):
        changed = False
        for fault in list(causes):
            if fault not in causes or fault.kind not in ROOM or fault.group is None:
                continue
            rest = {f: p for f, p in causes.items() if f != fault}
            after = _fixed(world, anchor, rest, specs, wide)
            spec = next(s for s in after[1] if s.group.suffix == fault.group)
            found = {f: p for f, p in group_faults(after[0], spec, anchor).items() if f not in rest}
            if not found or found == {fault: causes[fault]}:
                continue
            fresh = {**rest, **found}
            if has_candidate(*_fixed(world, anchor, fresh, specs, wide), anchor):
                causes = _fewest(world, specs, wide, anchor, fresh)
                changed = True
                break
        if not changed:
            break
    return causes


def _fewest(
    world: World, specs: list[GroupSpec], wide: RequestWide, anchor: int, causes: Causes
) -> Causes:
    """The causes to report, out of ``causes`` (whose removal together
    makes ``anchor`` a candidate, unless one is ``other``): the first,
    in ``KINDS`` order, whose removal alone does; else the causes left
    once each that is not needed is dropped, so that removing them all
    does and removing all but any one does not."""
    if len(causes) <= 1 or Fault("other") in causes:
        return causes
    order = {k: i for i, k in enumerate(KINDS)}
    ranked = sorted(causes, key=lambda f: order[f.kind])

    def enough(kept: list[Fault]) -> bool:
        return has_candidate(
            *_fixed(world, anchor, {f: causes[f] for f in kept}, specs, wide), anchor
        )

    alone = next((f for f in ranked if enough([f])), None)
    if alone is not None:
        return {alone: causes[alone]}
    kept = list(ranked)
    for fault in reversed(ranked):
        rest = [f for f in kept if f != fault]
        if rest and enough(rest):
            kept = rest
    return {f: causes[f] for f in kept}


def _add_group_causes(causes: Causes, world: World, specs: list[GroupSpec], anchor: int) -> bool:
    """Add the faults of the groups with no offer under ``anchor``; True
    when one was new."""
    added = False
    for spec in specs:
        if Offers(world, spec).at(anchor):
            continue
        for fault, pids in group_faults(world, spec, anchor).items():
            if fault not in causes:
                causes[fault] = []
                added = True
            known = causes[fault]
            for pid in pids:
                if pid not in known:
                    known.append(pid)
                    added = True
    return added


def _merge_causes(world: World, specs: list[GroupSpec], wide: RequestWide, anchor: int) -> Causes:
    """What in the merge of the groups keeps ``anchor`` out, when every
    group has offers there (see the module docstring)."""
    options: list[Fault] = []
    if wide.group_policy == "isolate" and sum(s.group.same_provider for s in specs) > 1:
        options.append(Fault("isolate"))
    if wide.same_subtrees:
        options.append(Fault("same_subtree", None, tuple(sorted(set().union(*wide.same_subtrees)))))
    counts: dict[str, int] = {}
    for spec in specs:
        for rc in spec.group.resources:
            counts[rc] = counts.get(rc, 0) + 1
    shared = sorted(rc for rc, n in counts.items() if n > 1)
    if shared:
        needed = sum(s.group.resources.get(shared[0], 0) for s in specs)
        local = [
            p for p in world.trees.get(anchor, ()) if shared[0] in world.providers[p].inventories
        ]
        options.append(
            Fault(
                "capacity",
                None,
                tuple(shared),
                needed if len(shared) == 1 else None,
                max((world.providers[p].most(shared[0]) for p in local), default=0)
                if len(shared) == 1
                else None,
            )
        )
    alone = [
        f for f in options if has_candidate(*_fixed(world, anchor, {f: []}, specs, wide), anchor)
    ]
    if alone:
        return {f: [] for f in alone}
    if options and has_candidate(
        *_fixed(world, anchor, {f: [] for f in options}, specs, wide), anchor
    ):
        return {f: [] for f in options}
    return {Fault("other"): []}


def _fixed(
    world: World, anchor: int, causes: Causes, specs: list[GroupSpec], wide: RequestWide
) -> tuple[World, list[GroupSpec], RequestWide]:
    """A copy of the tree at ``anchor`` (with every sharing provider and
    its ancestors), with ``causes`` removed."""
    wanted = set(world.trees.get(anchor, ()))
    # Every sharing provider, not only those serving the tree now: a fix
    # that adds an aggregate may bring another pool in, as it would in
    # the world.
    for sid in world.sharing:
        wanted |= world.ancestors(sid)
    edits = {pid: world.providers[pid] for pid in wanted}
    avoid = (
        wide.root_forbidden.union(*(s.group.forbidden for s in specs)),
        frozenset().union(*(s.group.forbidden_aggs for s in specs)),
    )
    # Removals first: a provider told both to lose a trait (for one
    # group) and to gain it (for another) gains it, whatever the order
    # the causes were found in.
    for fault, pids in sorted(causes.items(), key=lambda item: item[0].kind not in REMOVALS):
        kind = fault.kind
        if kind == "in_tree":
            specs = [
                GroupSpec(dataclasses.replace(s.group, in_tree=None))
                if s.group.suffix == fault.group
                else s
                for s in specs
            ]
        elif kind == "isolate":
            wide = dataclasses.replace(wide, group_policy="none")
        elif kind == "same_subtree":
            wide = dataclasses.replace(wide, same_subtrees=())
        elif kind == "root_required":
            root = edits[anchor]
            edits[anchor] = _with_labels(
                root, traits=(root.traits | wide.root_required) - wide.root_forbidden
            )
        elif kind == "capacity" and fault.group is None:
            for pid, p in edits.items():
                edits[pid] = _roomy(p, p.inventories)
        else:
            for pid in pids:
                edits[pid] = fix_provider(edits[pid], fault, *avoid)
    return World(edits.values()), specs, wide


def fix_provider(
    p: Provider,
    fault: Fault,
    avoid_traits: frozenset[str] = frozenset(),
    avoid_aggs: frozenset[str] = frozenset(),
) -> Provider:
    """``p`` without ``fault``: the class added or given plenty of room,
    the unit rule relaxed, a missing trait or aggregate added (the first
    of the set, in name order, that no group forbids), the forbidden one
    taken away."""
    kind, subject = fault.kind, fault.subject
    if kind == "no_inventory":
        return dataclasses.replace(
            p, inventories={**p.inventories, subject[0]: Inventory(total=PLENTY, max_unit=PLENTY)}
        )
    if kind in ("capacity", "min_unit", "max_unit", "step_size"):
        return _roomy(p, [subject[0]], kind)
    if kind == "trait_missing":
        return _with_labels(p, traits=p.traits | {_pick(subject, avoid_traits)})
    if kind == "trait_forbidden":
        return _with_labels(p, traits=p.traits - {subject[0]})
    if kind == "aggregate_missing":
        return _with_labels(p, aggregates=p.aggregates | {_pick(subject, avoid_aggs)})
    if kind == "aggregate_forbidden":
        return _with_labels(p, aggregates=p.aggregates - {subject[0]})
    return p


def _pick(names: tuple[str, ...], avoid: frozenset[str]) -> str:
    return next((n for n in names if n not in avoid), names[0])


def _roomy(p: Provider, classes: Iterable[str], kind: str = "") -> Provider:
    """``p`` with the unit rule ``kind`` relaxed for ``classes``, or with
    plenty of free room ("capacity"), or with plenty of room and max_unit
    (no kind: two groups' amounts together)."""
    invs = dict(p.inventories)
    for rc in classes:
        inv = invs[rc]
        if kind == "min_unit":
            invs[rc] = inv._replace(min_unit=1)
        elif kind == "step_size":
            invs[rc] = inv._replace(step_size=1)
        elif kind == "max_unit":
            invs[rc] = inv._replace(max_unit=PLENTY)
        elif kind == "capacity":
            invs[rc] = inv._replace(total=inv.total + PLENTY)
        else:
            invs[rc] = inv._replace(total=inv.total + PLENTY, max_unit=max(inv.max_unit, PLENTY))
    return dataclasses.replace(p, inventories=invs)


def _with_labels(
    p: Provider, traits: frozenset[str] | None = None, aggregates: frozenset[str] | None = None
) -> Provider:
    return dataclasses.replace(
        p,
        traits=p.traits if traits is None else traits,
        aggregates=p.aggregates if aggregates is None else aggregates,
        trait_list=(),
    )
