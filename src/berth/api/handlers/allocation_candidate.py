"""``GET /allocation_candidates``: parse, authorize, search, serialize."""

from __future__ import annotations

import logging
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.errors import HTTPProblem
from berth.api.schemas import allocation_candidate as schema
from berth.api.views import allocation_candidate as view
from berth.domain.allocation_candidate import engine, explain
from berth.domain.allocation_candidate.engine import Result
from berth.domain.allocation_candidate.order import make_order
from berth.domain.allocation_candidate.request import (
    SCORED,
    Order,
    RequestGroup,
    RequestWide,
    Settings,
)

LOG = logging.getLogger(__name__)

#: Queries whose parse ``State.parsed_queries`` keeps; past it, it starts
#: again empty.
PARSED_LIMIT = 512


def _parsed_query(req: falcon.Request, pairs: list[tuple[str, str]]
                  ) -> tuple[list[RequestGroup], RequestWide]:
    """``parse_query`` of ``pairs``, the request's query string (less
    the order parameters of the Berth form), kept per application by
    query string and microversion: schedulers ask the same
    few queries again and again, and validating and parsing one costs
    more than the search of a small answer. Only queries that parse are
    kept (a 400 is worked out again each time). Nothing changes a group
    or the wide parameters once parsed (frozen dataclasses), and each
    caller gets its own list of the groups."""
    kept = req.context.state.parsed_queries
    version = req.context.version
    key = (version, req.query_string)
    found = kept.get(key)
    if found is None:
        groups, wide = schema.parse_query(pairs, version)
        if len(kept) >= PARSED_LIMIT:
            kept.clear()
        found = kept[key] = (tuple(groups), wide)
    return list(found[0]), found[1]


def _configured_order(conf: Any) -> Order:
    """The order ``[berth] candidate_order`` and its weights choose
    (random also where ``[placement] randomize_allocation_candidates``
    is set and the order is uuid)."""
    name = conf.berth.candidate_order
    if name == "uuid" and conf.placement.randomize_allocation_candidates:
        name = "random"
    return make_order(name, dict(conf.berth.candidate_order_weights),
                      dict(conf.berth.candidate_order_preferences))


def _requested_order(conf: Any, given: dict[str, str]) -> Order:
    """The order a request of the Berth form asks for: its ``order``,
    ``weights`` and ``prefer``, each defaulting to the configured one.
    Raises HTTPProblem 400 for a class or trait weighed twice, or
    weights with an order that has no score (``split_order`` has checked
    their form)."""
    default = _configured_order(conf)
    name = given.get("order", default.name)
    weights = (schema.parse_weights("weights", given["weights"])
               if "weights" in given else dict(default.weights))
    prefer = (schema.parse_weights("prefer", given["prefer"])
              if "prefer" in given else dict(default.preferences))
    if name not in SCORED and ("weights" in given or "prefer" in given):
        raise HTTPProblem(400, "Invalid query string parameters: weights "
                          "and prefer apply only to order spread or pack")
    return make_order(name, weights, prefer)


def list_candidates(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /allocation_candidates: 200, or 400 (bad query, unknown class
    or trait), 403, 406."""
    util.check_accept(req)
    util.authorize(req, "placement:allocation_candidates:list")
    groups, wide = _parsed_query(req, util.query(req))
    _answer(req, resp, groups, wide, _configured_order(util.conf(req)))


def list_ordered_candidates(req: falcon.Request, resp: falcon.Response
                            ) -> None:
    """GET /berth/allocation_candidates: GET /allocation_candidates with
    the order chosen per request (``order``, ``weights``, ``prefer``);
    200, or 400 (bad query or order, unknown class or trait), 403,
    406."""
    util.check_accept(req)
    util.authorize(req, "placement:allocation_candidates:list")
    pairs, given = schema.split_order(util.query(req))
    order = _requested_order(util.conf(req), given)
    groups, wide = _parsed_query(req, pairs)
    _answer(req, resp, groups, wide, order)


def _answer(req: falcon.Request, resp: falcon.Response,
            groups: list[RequestGroup], wide: RequestWide, order: Order
            ) -> None:
    """Search for ``groups`` and ``wide`` in ``order`` and send the
    answer."""
    opts = util.conf(req).placement
    settings = Settings(
        order=order,
        max_candidates=opts.max_allocation_candidates,
        strategy=opts.allocation_candidates_generation_strategy,
        memo=util.conf(req).berth.candidate_memo)
    nested = util.want(req, "1.29")

    cache = util.world_cache(req)

    def work(conn: Connection) -> Result:
        return engine.find_candidates(conn, cache, groups, wide, settings,
                                      nested)

    result = util.db(req).read(work)
    req.context.state.metrics.candidates_answered(
        len(result.candidates), result.trees, result.cut, order.name)
    if not result.candidates and LOG.isEnabledFor(logging.DEBUG):
        LOG.debug("no allocation candidates for %s: %s", req.query_string,
                  explain.explain(result.world, groups, result.specs,
                                  wide).summary_line())
    util.send(req, resp, view.serialize(result, groups, req.context.version,
                                        req.context.state.summaries))
