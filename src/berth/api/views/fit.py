"""The body of ``GET /berth/fit``, which the dashboard's fit page shows
too (see ``docs/explain-and-fit.md``)."""

from __future__ import annotations

from typing import Any

from berth.domain.allocation_candidate.fit import Count, Fit
from berth.domain.allocation_candidate.world import World
from berth.domain.dashboard import Labels


def _count(count: Count) -> dict[str, Any]:
    return {"placed": count.placed, "upper_bound": count.bound, "exact": count.exact}


def serialize(world: World, answer: Fit, labels: Labels | None = None) -> dict[str, Any]:
    """How many more copies fit: in total, per tree (by root uuid) and
    per aggregate, each with its upper bound; with ``labels``, each
    tree's root name and each aggregate's first member trees' names."""
    trees = [
        {"root_provider_uuid": world.uuid(root), **_count(c)} for root, c in answer.trees.items()
    ]
    aggregates = [{"aggregate": agg, **_count(c)} for agg, c in answer.aggregates.items()]
    if labels is not None:
        for tree in trees:
            tree["root_provider_name"] = labels.names.get(tree["root_provider_uuid"])
        for agg in aggregates:
            agg["member_trees"] = labels.members.get(agg["aggregate"], [])
    return {
        "total": _count(answer.total),
        "complete": answer.complete,
        "trees": trees,
        "aggregates": aggregates,
    }
