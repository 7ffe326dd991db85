"""Why one provider cannot serve one request group: the engine's matching
rules, spelled out one failure at a time.

The search (``offers``) asks yes-or-no questions on its hot path and
stops at the first "no". Explaining an empty answer needs every "no"
instead, so this module decomposes the same rules: ``can_take``
(inventory, ``capacity.unit_problem``'s min_unit/max_unit/step_size, free
room), ``traits_ok`` and ``aggs_ok`` (``provider``), the tree restriction
of ``in_tree`` and the unsuffixed group's root-aggregate rule of
``offers._options``. A provider has no fault for a suffixed group exactly
when the search offers it that group, and every provider the search uses
for a class of the unsuffixed group has no fault for that class
(``tests/unit/test_allocation_candidate_explain.py`` checks both on random worlds).

``group_faults`` blames, for each part of a group no provider can
serve, only the providers nearest to serving it (``closest``): their
faults, removed, let one of them serve that part. Explain removes
faults on a copy of the tree (``explain.fix_provider``) to check which
of them are the cause.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.provider import Provider, aggs_ok
from berth.domain.allocation_candidate.world import World

#: The reasons explain reports, in the order reports list them.
KINDS = (
    "root_required",
    "in_tree",
    "no_inventory",
    "capacity",
    "min_unit",
    "max_unit",
    "step_size",
    "trait_missing",
    "trait_forbidden",
    "aggregate_missing",
    "aggregate_forbidden",
    "same_subtree",
    "isolate",
    "other",
)

#: What "plenty" means when a fix raises capacity or max_unit.
PLENTY = 1 << 40


@dataclass(frozen=True)
class Fault:
    """One reason: ``kind`` (one of KINDS), the group it concerns (its
    suffix; None for the request as a whole) and what it is about (a
    resource class, a trait or aggregate set, ...)."""

    kind: str
    group: str | None = None
    #: the class, trait set or aggregate set concerned, sorted
    subject: tuple[str, ...] = ()
    #: for capacity and unit faults: the amount asked for
    needed: int | None = None
    #: the value that refused it (free room, min_unit, max_unit, step)
    limit: int | None = field(default=None, compare=False)


def room_faults(p: Provider, rc: str, n: int, suffix: str) -> list[Fault]:
    """Every reason ``p`` cannot give ``n`` of ``rc`` to one group now
    (``Provider.can_take`` is True exactly when there is none)."""
    inv = p.inventories.get(rc)
    if inv is None:
        return [Fault("no_inventory", suffix, (rc,))]
    found = []
    if n < inv.min_unit:
        found.append(Fault("min_unit", suffix, (rc,), n, inv.min_unit))
    if n > inv.max_unit:
        found.append(Fault("max_unit", suffix, (rc,), n, inv.max_unit))
    if inv.step_size and n % inv.step_size:
        found.append(Fault("step_size", suffix, (rc,), n, inv.step_size))
    free = p.room[rc][0]
    if n > free:
        found.append(Fault("capacity", suffix, (rc,), n, free))
    return found


def trait_faults(have: frozenset[str], spec: GroupSpec, *, required: bool = True) -> list[Fault]:
    """Required any-of sets ``have`` misses (when ``required``) and the
    forbidden traits it carries (``provider.traits_ok``, one by one)."""
    g = spec.group
    return _label_faults("trait", g.suffix, have, g.required, g.forbidden, required)


def aggregate_faults(aggs: frozenset[str], spec: GroupSpec, *, member: bool = True) -> list[Fault]:
    """member_of sets ``aggs`` misses (when ``member``) and forbidden
    aggregates it is in (``provider.aggs_ok``, one by one)."""
    g = spec.group
    return _label_faults("aggregate", g.suffix, aggs, g.member_of, g.forbidden_aggs, member)


def _label_faults(
    label: str,
    suffix: str,
    have: frozenset[str],
    wanted: tuple[frozenset[str], ...],
    forbidden: frozenset[str],
    check_wanted: bool,
) -> list[Fault]:
    found = [Fault(label + "_forbidden", suffix, (name,)) for name in sorted(forbidden & have)]
    if check_wanted:
        found += [
            Fault(label + "_missing", suffix, tuple(sorted(any_of)))
            for any_of in wanted
            if any_of.isdisjoint(have)
        ]
    return found


def granular_faults(world: World, spec: GroupSpec, pid: int) -> list[Fault]:
    """Why provider ``pid`` cannot serve a suffixed group alone (the
    rules of ``offers.granular_pieces``)."""
    p = world.providers[pid]
    g = spec.group
    found: list[Fault] = []
    if spec.tree_root is not None and p.root_id != spec.tree_root:
        found.append(Fault("in_tree", g.suffix, (g.in_tree or "",)))
    for rc, n in sorted(g.resources.items()):
        found += room_faults(p, rc, n, g.suffix)
    found += trait_faults(p.traits, spec)
    found += aggregate_faults(p.aggregates, spec)
    return found


def spread_faults(world: World, spec: GroupSpec, anchor: int, pid: int, rc: str) -> list[Fault]:
    """Why provider ``pid`` cannot give the unsuffixed group its ``rc``
    under ``anchor`` (the rules of ``offers._options``: an aggregate on
    the root spans its tree; a forbidden trait bars a provider, required
    ones are checked on the combination)."""
    p = world.providers[pid]
    g = spec.group
    found = room_faults(p, rc, g.resources[rc], g.suffix)
    root_in = p.root_id == anchor and aggs_ok(
        world.providers[anchor].aggregates, g.member_of, frozenset()
    )
    found += aggregate_faults(p.aggregates, spec, member=not root_in)
    found += trait_faults(p.traits, spec, required=False)
    return found


def serving(world: World, anchor: int, spec: GroupSpec) -> list[int]:
    """The providers that may serve ``spec`` under ``anchor``: the tree's,
    then sharing providers of other trees (none for an unsuffixed group
    restricted by ``in_tree``, as in the search)."""
    local = list(world.trees.get(anchor, ()))
    if spec.tree_root is not None and not spec.group.same_provider:
        return local
    return local + list(world.shared_into.get(anchor, ()))


def group_faults(world: World, spec: GroupSpec, anchor: int) -> dict[Fault, list[int]]:
    """Why ``spec`` has no offer under ``anchor``: for each part no
    provider can serve (the suffixed group, or one class of the
    unsuffixed group), the faults of the ``closest`` providers, each
    fault with the providers it stopped (an empty list for a fault of
    the tree as a whole). Called only when the search found no offer."""
    if not spec.group.same_provider:
        return _spread_group_faults(world, spec, anchor)
    out: dict[Fault, list[int]] = {}
    nearest = closest(
        {pid: granular_faults(world, spec, pid) for pid in serving(world, anchor, spec)}
    )
    for pid, found in nearest.items():
        _note(out, found, pid)
    return out


def distance(found: list[Fault]) -> tuple[int, int]:
    """How far a provider with faults ``found`` is from serving a part:
    classes it lacks, then faults in all. A provider that has the class
    but too little of it is nearer than one without the class."""
    return sum(f.kind == "no_inventory" for f in found), len(found)


def closest(faults: dict[int, list[Fault]]) -> dict[int, list[Fault]]:
    """The providers of ``faults`` (pid -> its faults for one part) at
    the least ``distance``: the ones explain blames, since removing any
    one's faults lets it serve the part, and blaming a farther one (a
    host without the class, for what a sharing pool is short of) would
    point at the wrong provider."""
    if not faults:
        return {}
    best = min(distance(found) for found in faults.values())
    return {pid: found for pid, found in faults.items() if distance(found) == best}


def _note(out: dict[Fault, list[int]], faults: Iterable[Fault], pid: int | None) -> None:
    """Add ``faults`` to ``out``, each with ``pid`` among the providers
    it stopped (None: a fault of the tree as a whole)."""
    for fault in faults:
        pids = out.setdefault(fault, [])
        if pid is not None and pid not in pids:
            pids.append(pid)


def _spread_group_faults(world: World, spec: GroupSpec, anchor: int) -> dict[Fault, list[int]]:
    """``group_faults`` for the unsuffixed group."""
    g = spec.group
    out: dict[Fault, list[int]] = {}
    root = world.providers[anchor]
    if spec.tree_root is not None and spec.tree_root != anchor:
        _note(out, [Fault("in_tree", g.suffix, (g.in_tree or "",))], None)
        return out
    barred = aggregate_faults(root.aggregates, spec, member=False)
    if barred:
        _note(out, barred, anchor)
        return out
    providers = serving(world, anchor, spec)
    chosen: set[int] = set()
    for rc in sorted(g.resources):
        faults = {pid: spread_faults(world, spec, anchor, pid, rc) for pid in providers}
        options = [pid for pid, found in faults.items() if not found]
        if options:
            chosen.update(options)
            continue
        for pid, found in closest(faults).items():
            _note(out, found, pid)
    if out or not g.required:
        return out
    # Every class has a provider: the combination lacks a required trait.
    have = frozenset().union(*(world.providers[p].traits for p in chosen))
    missing = trait_faults(have, spec) or [
        Fault("trait_missing", g.suffix, tuple(sorted(any_of))) for any_of in g.required
    ]
    for fault in missing:
        out[fault] = sorted(chosen, key=world.uuid)
    return out
