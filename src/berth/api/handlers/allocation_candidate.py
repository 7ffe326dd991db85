"""``GET /allocation_candidates``: parse, authorize, search, serialize."""

from __future__ import annotations

import logging

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas import allocation_candidate as schema
from berth.api.views import allocation_candidate as view
from berth.domain.allocation_candidate import engine, explain
from berth.domain.allocation_candidate.engine import Result
from berth.domain.allocation_candidate.request import (
    Order,
    RequestGroup,
    RequestWide,
)

LOG = logging.getLogger(__name__)

POLICY = "placement:allocation_candidates:list"

#: Queries whose parse ``State.parsed_queries`` keeps; past it, it starts
#: again empty.
PARSED_LIMIT = 512


def _parsed_query(
    req: falcon.Request, pairs: list[tuple[str, str]]
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


def list_candidates(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /allocation_candidates: 200, or 400 (bad query, unknown class
    or trait), 403, 406."""
    util.check_accept(req)
    util.authorize(req, POLICY)
    groups, wide = _parsed_query(req, util.query(req))
    _answer(req, resp, groups, wide, schema.requested_order(util.conf(req), {}))


def list_ordered_candidates(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /berth/allocation_candidates: GET /allocation_candidates with
    the order chosen per request (``order``, ``weights``, ``prefer``);
    200, or 400 (bad query or order, unknown class or trait), 403,
    406."""
    util.check_accept(req)
    util.authorize(req, POLICY)
    pairs, given = schema.split_order(util.query(req))
    order = schema.requested_order(util.conf(req), given)
    groups, wide = _parsed_query(req, pairs)
    _answer(req, resp, groups, wide, order)


def _answer(
    req: falcon.Request,
    resp: falcon.Response,
    groups: list[RequestGroup],
    wide: RequestWide,
    order: Order,
) -> None:
    """Search for ``groups`` and ``wide`` in ``order`` and send the
    answer."""
    settings = schema.candidate_settings(util.conf(req), order)
    nested = util.want(req, "1.29")

    cache = util.candidate_cache(req)
    # Read by the API's middleware during this request, if it read one.
    position = getattr(req.context, "fresh_position", None)

    def work(conn: Connection) -> Result:
        return engine.find_candidates(
            conn, cache, groups, wide, settings, nested_aware=nested, position=position
        )

    result = util.db(req).read(work)
    req.context.state.metrics.candidates_answered(
        len(result.candidates), result.trees, cut=result.cut, order=order.name
    )
    if not result.candidates and LOG.isEnabledFor(logging.DEBUG):
        LOG.debug(
            "no allocation candidates for %s: %s",
            req.query_string,
            explain.explain(result.world, groups, result.specs, wide).summary_line(),
        )
    util.send(
        req, resp, view.serialize(result, groups, req.context.version, req.context.state.encoded)
    )
