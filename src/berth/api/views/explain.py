"""The body of ``GET /berth/explain/allocation_candidates``, which the
dashboard's explain page shows too (see ``docs/explain-and-fit.md``)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from typing import Any

from berth.domain import errors
from berth.domain.allocation_candidate import order, rankings
from berth.domain.allocation_candidate.explain import Explanation, TreeVerdict
from berth.domain.allocation_candidate.faults import KINDS, Fault
from berth.domain.allocation_candidate.request import Order
from berth.domain.allocation_candidate.world import World

#: Examples listed per reason.
EXAMPLES = 3
#: Trees listed best first in a scored order.
FIRST = 10

#: The field that names what a fault is about, per kind.
_SUBJECT = {
    "no_inventory": "resource_class",
    "capacity": "resource_class",
    "min_unit": "resource_class",
    "max_unit": "resource_class",
    "step_size": "resource_class",
    "trait_missing": "traits",
    "trait_forbidden": "trait",
    "aggregate_missing": "aggregates",
    "aggregate_forbidden": "aggregate",
    "in_tree": "in_tree",
    "root_required": "traits",
    "same_subtree": "groups",
}
#: Those whose value is a list (an any-of set, or the suffixes).
_LISTS = ("traits", "aggregates", "groups")
_LIMIT = {
    "capacity": "free",
    "min_unit": "min_unit",
    "max_unit": "max_unit",
    "step_size": "step_size",
}


def serialize(report: Explanation, names: Mapping[int, str] | None = None) -> dict[str, Any]:
    """Counts per reason, with examples and, for capacity, what was
    needed against the most any provider had free. With ``names``
    (provider id -> name, for ``report.named()``) each example names
    its tree (``tree_name``) and providers (``provider_names``, in the
    order of ``providers``) too."""
    world = report.world
    excluded = report.excluded
    reasons = []
    for kind, count in report.counts().items():
        item: dict[str, Any] = {"reason": kind, "trees": count}
        if kind == "capacity":
            item["resources"] = _capacity(world, excluded)
        # One example a tree (its first fault of the kind): a tree with
        # two (say too little VCPU and too little memory) is one tree
        # excluded for the reason, not two.
        firsts = (
            next(((f, pids) for f, pids in t.causes.items() if f.kind == kind), None)
            for t in excluded
        )
        item["examples"] = [
            {
                "tree": world.uuid(t.root),
                **({} if names is None else {"tree_name": names.get(t.root)}),
                **fault_body(world, first[0], first[1][:EXAMPLES], names),
            }
            for t, first in zip(excluded, firsts, strict=True)
            if first is not None
        ][:EXAMPLES]
        reasons.append(item)
    return {
        "trees": {
            "considered": len(report.trees),
            "with_candidates": len(report.trees) - len(excluded),
            "excluded": len(excluded),
        },
        "reasons": reasons,
    }


def _capacity(world: World, excluded: list[TreeVerdict]) -> list[dict[str, Any]]:
    """Per group and class: the amount asked and the most free."""
    found: dict[tuple[str, str, int], int] = {}
    for tree in excluded:
        for fault, pids in tree.causes.items():
            if fault.kind != "capacity" or fault.needed is None:
                continue
            key = (fault.group or "", fault.subject[0], fault.needed)
            free = _free(world, fault, pids)
            found[key] = max(found.get(key, free), free)
    return [
        {"group": g, "resource_class": rc, "needed": n, "max_free": free}
        for (g, rc, n), free in sorted(found.items())
    ]


def _free(world: World, fault: Fault, pids: list[int]) -> int:
    if fault.group is None or not pids:
        return fault.limit or 0
    rc = fault.subject[0]
    return max(world.providers[p].room[rc][0] for p in pids)


def fault_body(
    world: World, fault: Fault, pids: list[int], names: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """One reason as the answer shows it: with ``names``, the providers'
    names too (``provider_names``, beside ``providers``)."""
    body: dict[str, Any] = {"reason": fault.kind, "group": fault.group}
    name = _SUBJECT.get(fault.kind)
    if fault.kind == "capacity" and fault.group is None:
        body["resource_classes"] = list(fault.subject)
    elif name is not None:
        body[name] = list(fault.subject) if name in _LISTS else fault.subject[0]
    if fault.needed is not None:
        body["needed"] = fault.needed
        limit = _LIMIT.get(fault.kind)
        if limit == "free":
            body["free"] = _free(world, fault, pids)
        elif limit is not None:
            body[limit] = fault.limit
    body["providers"] = [world.uuid(p) for p in pids]
    if names is not None:
        body["provider_names"] = [names.get(p) for p in pids]
    return body


def first_trees(report: Explanation, want: Order) -> dict[str, Any]:
    """The trees that give a candidate, best first under scored order
    ``want`` (the first ``FIRST``; ties in a random order, as a request
    draws them), each with its score."""
    world = report.world
    good = {t.root for t in report.trees if t.candidate}
    best = (
        root for root in rankings.ranking(world, want).best_first(random.Random()) if root in good
    )
    return {
        "name": want.name,
        "first": [
            {"tree": world.uuid(root), "score": order.tree_score(world, root, want)}
            for root in itertools.islice(best, FIRST)
        ],
    }


def tree(
    report: Explanation,
    wanted: str,
    want: Order | None = None,
    names: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """The exact reasons of the tree of provider ``wanted`` (a normalized
    uuid), with its score under ``want`` when that is a scored order, and
    the names of its root and providers when ``names`` is given (as in
    ``serialize``); NotFound when no provider has that uuid."""
    world = report.world
    pid = world.by_uuid.get(wanted)
    if pid is None:
        raise errors.NotFound("explain_tree: no resource provider with uuid %s" % wanted)
    root = world.providers[pid].root_id
    verdict = next(t for t in report.trees if t.root == root)
    rank = {k: i for i, k in enumerate(KINDS)}
    causes = sorted(verdict.causes.items(), key=lambda item: rank[item[0].kind])
    body: dict[str, Any] = {"root_provider_uuid": world.uuid(root)}
    if names is not None:
        body["root_provider_name"] = names.get(root)
    body["candidate"] = verdict.candidate
    body["reasons"] = [fault_body(world, f, pids, names) for f, pids in causes]
    if want is not None and want.scored:
        body["score"] = order.tree_score(world, root, want)
    return body
