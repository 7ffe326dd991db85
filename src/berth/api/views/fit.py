"""The body of ``GET /berth/fit``, which the dashboard's fit page shows
too (see ``docs/explain-and-fit.md``)."""

from __future__ import annotations

from typing import Any

from berth.domain.allocation_candidate.fit import Count, Fit
from berth.domain.allocation_candidate.world import World


def _count(count: Count) -> dict[str, Any]:
    return {"placed": count.placed, "upper_bound": count.bound,
            "exact": count.exact}


def serialize(world: World, answer: Fit) -> dict[str, Any]:
    """How many more copies fit: in total, per tree (by root uuid) and
    per aggregate, each with its upper bound."""
    return {
        "total": _count(answer.total),
        "complete": answer.complete,
        "trees": [{"root_provider_uuid": world.uuid(root), **_count(c)}
                  for root, c in answer.trees.items()],
        "aggregates": [{"aggregate": agg, **_count(c)}
                       for agg, c in answer.aggregates.items()],
    }
