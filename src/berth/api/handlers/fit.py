"""``GET /berth/fit``: how many more copies of an allocation-candidates
query fit, in total, per tree and per aggregate (see
``docs/explain-and-fit.md``)."""

from __future__ import annotations

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas.allocation_candidate import parse_query
from berth.api.views import fit as view
from berth.domain import dashboard
from berth.domain.allocation_candidate import engine, fit
from berth.domain.allocation_candidate.fit import Fit
from berth.domain.allocation_candidate.world import World
from berth.domain.dashboard import Labels

POLICY = "berth:fit"


def fit_request(req: falcon.Request, resp: falcon.Response) -> None:
    """Answers 200; 400 for a query GET /allocation_candidates refuses
    (with the same message); 403 unless the caller passes ``berth:fit``;
    406."""
    util.check_accept(req)
    util.authorize(req, POLICY)
    groups, wide = parse_query(util.query(req), req.context.version)
    cache = util.candidate_cache(req)

    def work(conn: Connection) -> tuple[World, Fit, Labels]:
        world, specs = engine.resolve(conn, cache, groups, wide)
        answer = fit.fit(world, specs, wide)
        # Names are read here, for the trees and aggregates the answer
        # names only: the world the search keeps has none.
        return (
            world,
            answer,
            dashboard.labels(
                conn, world, [world.uuid(root) for root in answer.trees], answer.aggregates
            ),
        )

    world, answer, labels = util.db(req).read(work)
    util.send(req, resp, view.serialize(world, answer, labels))
