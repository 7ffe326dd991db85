"""``GET /berth/explain/allocation_candidates``: why trees give no
candidate for an allocation-candidates query (see
``docs/explain-and-fit.md``)."""

from __future__ import annotations

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.errors import HTTPProblem
from berth.api.schemas.allocation_candidate import (
    parse_query,
    requested_order,
    split_order,
)
from berth.api.views import explain as view
from berth.domain import common, dashboard
from berth.domain.allocation_candidate import engine, explain
from berth.domain.allocation_candidate.explain import Explanation

POLICY = "berth:explain"


def explain_candidates(req: falcon.Request, resp: falcon.Response) -> None:
    """Answers 200; 400 for a query GET /berth/allocation_candidates
    refuses (with the same message) or a malformed ``explain_tree``; 403
    unless the caller passes ``berth:explain``; 404 when ``explain_tree``
    names no provider; 406."""
    util.check_accept(req)
    util.authorize(req, POLICY)
    pairs, given = split_order(util.query(req))
    order = requested_order(util.conf(req), given)
    trees = [v for k, v in pairs if k == "explain_tree"]
    groups, wide = parse_query(
        [(k, v) for k, v in pairs if k != "explain_tree"], req.context.version
    )
    if len(trees) > 1 or (trees and not common.is_uuid_like(trees[0])):
        raise HTTPProblem(
            400, "Invalid query string parameters: explain_tree takes one provider uuid"
        )
    wanted = common.normalize_uuid(trees[0]) if trees else None
    cache = util.candidate_cache(req)

    def work(conn: Connection) -> tuple[Explanation, dict[int, str]]:
        world, specs = engine.resolve(conn, cache, groups, wide)
        report = explain.explain(world, groups, specs, wide)
        named = report.named()
        pid = world.by_uuid.get(wanted or "")
        if pid is not None:
            named.add(world.providers[pid].root_id)
        # Names are read here, for the providers the answer names only:
        # the world the search keeps has none.
        return report, dashboard.names(conn, named)

    report, names = util.db(req).read(work)
    body = view.serialize(report, names)
    if order.scored:
        body["order"] = view.first_trees(report, order)
    if wanted is not None:
        body["tree"] = view.tree(report, wanted, order, names)
    util.send(req, resp, body)
