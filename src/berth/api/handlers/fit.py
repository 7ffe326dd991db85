"""``GET /berth/fit``: how many more copies of an allocation-candidates
query fit, in total, per tree and per aggregate (see
``docs/explain-and-fit.md``)."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.handlers.allocation_candidate import parse_query
from berth.domain.allocation_candidate import engine, fit
from berth.domain.allocation_candidate.fit import Count, Fit
from berth.domain.allocation_candidate.world import World


def fit_request(req: falcon.Request, resp: falcon.Response) -> None:
    """Answers 200; 400 for a query GET /allocation_candidates refuses
    (with the same message); 403 unless the caller passes ``berth:fit``;
    406."""
    util.check_accept(req)
    util.authorize(req, "berth:fit")
    groups, wide = parse_query(req, util.query(req))
    cache = util.world_cache(req)

    def work(conn: Connection) -> tuple[World, Fit]:
        world, specs = engine.resolve(conn, cache, groups, wide)
        return world, fit.fit(world, specs, wide)

    world, answer = util.db(req).read(work)
    util.send(req, resp, serialize(world, answer))


def _count(count: Count) -> dict[str, Any]:
    return {"placed": count.placed, "upper_bound": count.bound,
            "exact": count.exact}


def serialize(world: World, answer: Fit) -> dict[str, Any]:
    return {
        "total": _count(answer.total),
        "complete": answer.complete,
        "trees": [{"root_provider_uuid": world.uuid(root), **_count(c)}
                  for root, c in answer.trees.items()],
        "aggregates": [{"aggregate": agg, **_count(c)}
                       for agg, c in answer.aggregates.items()],
    }
