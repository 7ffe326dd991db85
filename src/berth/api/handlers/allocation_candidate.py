"""``GET /allocation_candidates``: parse, authorize, search, serialize."""

from __future__ import annotations

import logging
from typing import Any

import falcon
import orjson
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas import allocation_candidate as schema
from berth.domain.allocation_candidate import engine, explain, parse
from berth.domain.allocation_candidate.engine import Result, Summary
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide, Settings

LOG = logging.getLogger(__name__)


def parse_query(req: falcon.Request, pairs: list[tuple[str, str]]
                ) -> tuple[list[RequestGroup], RequestWide]:
    """The groups and request-wide parameters of an allocation-candidates
    query (also read by explain and fit), with its 400s."""
    version = tuple(req.context.version)[:2]
    util.validate_pairs(pairs, schema.for_version(version))
    return parse.parse_request(pairs, version)


#: Queries whose parse ``State.parsed_queries`` keeps; past it, it starts
#: again empty.
PARSED_LIMIT = 512


def parsed_query(req: falcon.Request
                 ) -> tuple[list[RequestGroup], RequestWide]:
    """``parse_query`` of the request's query string, kept per
    application by query string and microversion: schedulers ask the same
    few queries again and again, and validating and parsing one costs
    more than the search of a small answer. Only queries that parse are
    kept (a 400 is worked out again each time). Nothing changes a group
    or the wide parameters once parsed (frozen dataclasses), and each
    caller gets its own list of the groups."""
    kept = req.context.state.parsed_queries
    key = (tuple(req.context.version)[:2], req.query_string)
    found = kept.get(key)
    if found is None:
        groups, wide = parse_query(req, util.query(req))
        if len(kept) >= PARSED_LIMIT:
            kept.clear()
        found = kept[key] = (tuple(groups), wide)
    return list(found[0]), found[1]


def list_candidates(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /allocation_candidates: 200, or 400 (bad query, unknown class
    or trait), 403, 406."""
    util.check_accept(req)
    util.authorize(req, "placement:allocation_candidates:list")
    version = tuple(req.context.version)[:2]
    groups, wide = parsed_query(req)
    opts = util.conf(req).placement
    settings = Settings(
        randomize=opts.randomize_allocation_candidates,
        max_candidates=opts.max_allocation_candidates,
        strategy=opts.allocation_candidates_generation_strategy,
        memo=util.conf(req).berth.candidate_memo)
    nested = version >= (1, 29)

    cache = util.world_cache(req)

    def work(conn: Connection) -> Result:
        return engine.find_candidates(conn, cache, groups, wide, settings,
                                      nested)

    result = util.db(req).read(work)
    req.context.state.metrics.candidates_answered(
        len(result.candidates), result.trees, result.cut)
    if not result.candidates and LOG.isEnabledFor(logging.DEBUG):
        LOG.debug("no allocation candidates for %s: %s", req.query_string,
                  explain.explain(result.world, groups, result.specs,
                                  wide).summary_line())
    util.send(req, resp, serialize(result, groups, version))


def serialize(result: Result, groups: list[RequestGroup],
              version: tuple[int, int]) -> dict[str, Any]:
    """The response body for ``version``.

    A provider's summary is encoded once and kept until its usage
    changes; the answer's summaries are joined from those bytes
    (``Fragment``), byte for byte what encoding the dicts would give.
    """
    providers = result.world.providers
    if version < (1, 12):
        return {"allocation_requests": [
            {"allocations": [
                {"resource_provider": {"uuid": providers[pid].uuid},
                 "resources": res}
                for pid, res in cand.allocs.items()]}
            for cand in result.candidates],
            "provider_summaries": _summaries(result, groups, version)}
    return {"allocation_requests": _requests(result, version >= (1, 34)),
            "provider_summaries": _summaries(result, groups, version)}


def _requests(result: Result, with_mappings: bool) -> orjson.Fragment:
    """The allocation requests, encoded. A candidate the search's memo
    keeps (``Candidate.memo``) keeps its encoded request too, for the
    next answer that lists it."""
    providers = result.world.providers
    key = ("request json", with_mappings)
    out = []
    for cand in result.candidates:
        memo = cand.memo
        if memo is not None:
            body = memo.get(key)
            if body is not None:
                out.append(body)
                continue
        item: dict[str, Any] = {"allocations": {
            providers[pid].uuid: {"resources": res}
            for pid, res in cand.allocs.items()}}
        if with_mappings:
            item["mappings"] = {
                s: ([providers[pids[0]].uuid] if len(pids) == 1
                    else sorted(providers[p].uuid for p in pids))
                for s, pids in cand.mappings.items()}
        body = orjson.dumps(item)
        if memo is not None:
            # A copy: orjson's own bytes keep its 4 KB buffer.
            body = memo[key] = b"%s" % body
        out.append(body)
    return orjson.Fragment(b"[%s]" % b",".join(out))


def _summaries(result: Result, groups: list[RequestGroup],
               version: tuple[int, int]) -> orjson.Fragment:
    # Bodies are kept, encoded, on the (immutable) provider for the next
    # request: the shape depends on the version and, before 1.27, on the
    # classes asked for.
    wanted = (None if version >= (1, 27)
              else frozenset(rc for g in groups for rc in g.resources))
    key = ("summary json", wanted, version >= (1, 17), version >= (1, 29))
    world = result.world
    out = []
    for pid in result.summarized:
        p = world.providers[pid]
        body = p.memo.get(key)
        if body is None:
            body = p.memo[key] = b"%s:%s" % (
                orjson.dumps(p.uuid), orjson.dumps(_summary_body(
                    engine.summary(world, pid), wanted, version)))
        out.append(body)
    return orjson.Fragment(b"{%s}" % b",".join(out))


def _summary_body(summary: Summary, wanted: frozenset[str] | None,
                  version: tuple[int, int]) -> dict[str, Any]:
    body: dict[str, Any] = {"resources": {
        rc: {"capacity": cap, "used": used}
        for rc, (cap, used) in summary.resources.items()
        if wanted is None or rc in wanted}}
    if version >= (1, 17):
        body["traits"] = summary.traits
    if version >= (1, 29):
        body["parent_provider_uuid"] = summary.parent_uuid
        body["root_provider_uuid"] = summary.root_uuid
    return body
