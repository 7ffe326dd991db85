"""Why an allocation-candidates query leaves trees out.

For every tree (anchor) of the world, the search itself decides whether
the tree gives a candidate (``engine.has_candidate``: the first candidate
the engine's merge yields under that anchor). For a tree that gives none,
the causes are found in three steps:

1. ``root_required``: the root lacks a required trait or carries a
   forbidden one (the engine's anchor filter).
2. Each group the search has no offer for under the tree: every fault of
   every provider that might serve it (``faults.group_faults``).
3. The causes of steps 1 and 2 are removed on a copy of the tree (its
   providers, the sharing providers serving it and their ancestors), and
   the search runs again. If the tree still gives nothing, what is left
   is in the merge of the groups: ``group_policy=isolate``,
   ``same_subtree`` or two groups' amounts together on one provider
   (``capacity`` with no group). Each is relaxed in turn on the copy;
   those that alone give a candidate are reported (or all of them, when
   only relaxing all together does). Should nothing explain it, the tree
   is reported with ``other`` rather than with a wrong cause.

So a tree reported with one cause gives a candidate once that cause is
removed (``tests/unit/test_allocation_candidate_explain.py`` checks this against
the brute-force oracle).
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
            len(self.trees), len(self.trees) - len(self.excluded),
            "; excluded by " + counts if counts else "")


def explain(world: World, groups: list[RequestGroup],
            specs: list[GroupSpec] | None, wide: RequestWide) -> Explanation:
    """Verdicts for every tree of ``world``. ``specs`` is None when an
    ``in_tree`` names no provider (then every tree is out, for that)."""
    if specs is None:
        return _unknown_in_tree(world, groups, wide)
    return Explanation(world, [verdict(world, specs, wide, root)
                               for root in world.roots])


def _unknown_in_tree(world: World, groups: list[RequestGroup],
                     wide: RequestWide) -> Explanation:
    """Every tree is out because an ``in_tree`` names no provider; what
    else would keep each out is found without those ``in_tree``."""
    unknown = [g for g in groups
               if g.in_tree is not None and g.in_tree not in world.by_uuid]
    faults: Causes = {Fault("in_tree", g.suffix, (g.in_tree or "",)): []
                      for g in unknown}
    # Every in_tree left names a provider, so the specs are not None.
    specs = group_specs(world, [dataclasses.replace(g, in_tree=None)
                                if g in unknown else g for g in groups]) or []
    trees = []
    for root in world.roots:
        other = verdict(world, specs, wide, root)
        causes: Causes = {**faults, **other.causes}
        trees.append(TreeVerdict(root, False, causes))
    return Explanation(world, trees)


def verdict(world: World, specs: list[GroupSpec], wide: RequestWide,
            anchor: int) -> TreeVerdict:
    """The verdict on the tree rooted at ``anchor``."""
    if has_candidate(world, specs, wide, anchor):
        return TreeVerdict(anchor, True)
    causes: Causes = {}
    root = world.providers[anchor]
    if not anchor_filter(world, wide)(anchor):
        wrong = sorted(wide.root_required - root.traits) + sorted(
            "!" + t for t in wide.root_forbidden & root.traits)
        causes[Fault("root_required", None, tuple(wrong))] = [anchor]
    _add_group_causes(causes, world, specs, anchor)
    fixed = _fixed(world, anchor, causes, specs, wide)
    # Removing one cause can reveal another (a provider given the class
    # it lacked may then lack room): look again, a bounded number of times.
    for _ in range(ROUNDS):
        if causes and has_candidate(*fixed, anchor):
            return TreeVerdict(anchor, False, causes)
        if not _add_group_causes(causes, fixed[0], fixed[1], anchor):
            break
        fixed = _fixed(world, anchor, causes, specs, wide)
    causes.update(_merge_causes(*fixed, anchor))
    return TreeVerdict(anchor, False, causes)


def _add_group_causes(causes: Causes, world: World, specs: list[GroupSpec],
                      anchor: int) -> bool:
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


def _merge_causes(world: World, specs: list[GroupSpec], wide: RequestWide,
                  anchor: int) -> Causes:
    """What in the merge of the groups keeps ``anchor`` out, when every
    group has offers there (see the module docstring)."""
    options: list[Fault] = []
    if (wide.group_policy == "isolate"
            and sum(s.group.same_provider for s in specs) > 1):
        options.append(Fault("isolate"))
    if wide.same_subtrees:
        options.append(Fault("same_subtree", None, tuple(sorted(
            set().union(*wide.same_subtrees)))))
    counts: dict[str, int] = {}
    for spec in specs:
        for rc in spec.group.resources:
            counts[rc] = counts.get(rc, 0) + 1
    shared = sorted(rc for rc, n in counts.items() if n > 1)
    if shared:
        needed = sum(s.group.resources.get(shared[0], 0) for s in specs)
        local = [p for p in world.trees.get(anchor, ())
                 if shared[0] in world.providers[p].inventories]
        options.append(Fault(
            "capacity", None, tuple(shared),
            needed if len(shared) == 1 else None,
            max((world.providers[p].most(shared[0]) for p in local),
                default=0) if len(shared) == 1 else None))
    alone = [f for f in options
             if has_candidate(*_fixed(world, anchor, {f: []}, specs, wide),
                               anchor)]
    if alone:
        return {f: [] for f in alone}
    if options and has_candidate(*_fixed(world, anchor,
                                          {f: [] for f in options}, specs,
                                          wide), anchor):
        return {f: [] for f in options}
    return {Fault("other"): []}


def _fixed(world: World, anchor: int, causes: Causes,
           specs: list[GroupSpec], wide: RequestWide
           ) -> tuple[World, list[GroupSpec], RequestWide]:
    """A copy of the tree at ``anchor`` (with the sharing providers that
    serve it and their ancestors), with ``causes`` removed."""
    wanted = set(world.trees.get(anchor, ()))
    for sid in world.shared_into.get(anchor, ()):
        wanted |= world.ancestors(sid)
    edits = {pid: world.providers[pid] for pid in wanted}
    avoid = (wide.root_forbidden.union(*(s.group.forbidden for s in specs)),
             frozenset().union(*(s.group.forbidden_aggs for s in specs)))
    for fault, pids in causes.items():
        kind = fault.kind
        if kind == "in_tree":
            specs = [GroupSpec(dataclasses.replace(s.group, in_tree=None))
                     if s.group.suffix == fault.group else s for s in specs]
        elif kind == "isolate":
            wide = dataclasses.replace(wide, group_policy="none")
        elif kind == "same_subtree":
            wide = dataclasses.replace(wide, same_subtrees=())
        elif kind == "root_required":
            root = edits[anchor]
            edits[anchor] = _with_labels(
                root, traits=(root.traits | wide.root_required)
                - wide.root_forbidden)
        elif kind == "capacity" and fault.group is None:
            for pid, p in edits.items():
                edits[pid] = _roomy(p, p.inventories)
        else:
            for pid in pids:
                edits[pid] = fix_provider(edits[pid], fault, *avoid)
    return World(edits.values()), specs, wide


def fix_provider(p: Provider, fault: Fault,
                 avoid_traits: frozenset[str] = frozenset(),
                 avoid_aggs: frozenset[str] = frozenset()) -> Provider:
    """``p`` without ``fault``: the class added or given plenty of room,
    the unit rule relaxed, a missing trait or aggregate added (the first
    of the set, in name order, that no group forbids), the forbidden one
    taken away."""
    kind, subject = fault.kind, fault.subject
    if kind == "no_inventory":
        return dataclasses.replace(
            p, inventories={**p.inventories, subject[0]: Inventory(
                total=PLENTY, max_unit=PLENTY)})
    if kind in ("capacity", "min_unit", "max_unit", "step_size"):
        return _roomy(p, [subject[0]], kind)
    if kind == "trait_missing":
        return _with_labels(p, traits=p.traits | {_pick(subject,
                                                        avoid_traits)})
    if kind == "trait_forbidden":
        return _with_labels(p, traits=p.traits - {subject[0]})
    if kind == "aggregate_missing":
        return _with_labels(p, aggregates=p.aggregates | {
            _pick(subject, avoid_aggs)})
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
            invs[rc] = inv._replace(total=inv.total + PLENTY, max_unit=max(
                inv.max_unit, PLENTY))
    return dataclasses.replace(p, inventories=invs)


def _with_labels(p: Provider, traits: frozenset[str] | None = None,
                 aggregates: frozenset[str] | None = None) -> Provider:
    return dataclasses.replace(
        p, traits=p.traits if traits is None else traits,
        aggregates=p.aggregates if aggregates is None else aggregates,
        trait_list=())
