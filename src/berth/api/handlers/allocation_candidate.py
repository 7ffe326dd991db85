"""``GET /allocation_candidates``: parse, authorize, search, serialize."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas import allocation_candidate as schema
from berth.domain.candidates import engine, parse
from berth.domain.candidates.engine import Result
from berth.domain.candidates.request import RequestGroup, Settings


def list_candidates(req: falcon.Request, resp: falcon.Response) -> None:
    util.check_accept(req)
    util.authorize(req, "placement:allocation_candidates:list")
    version = tuple(req.context.version)[:2]
    pairs = util.validate_query(req, schema.for_version(version))
    groups, wide = parse.parse_request(pairs, version)
    opts = util.conf(req).placement
    settings = Settings(
        randomize=opts.randomize_allocation_candidates,
        max_candidates=opts.max_allocation_candidates,
        strategy=opts.allocation_candidates_generation_strategy)
    nested = version >= (1, 29)

    def work(conn: Connection) -> Result:
        return engine.find_candidates(conn, groups, wide, settings, nested)

    result = util.db(req).read(work)
    util.send(req, resp, serialize(result, groups, version))


def serialize(result: Result, groups: list[RequestGroup],
              version: tuple[int, int]) -> dict[str, Any]:
    """The response body for ``version``."""
    uuid = ({pid: p.uuid for pid, p in result.world.providers.items()}
            if result.world else {})
    requests = []
    for cand in result.candidates:
        if version < (1, 12):
            requests.append({"allocations": [
                {"resource_provider": {"uuid": uuid[pid]}, "resources": res}
                for pid, res in cand.allocs.items()]})
            continue
        item: dict[str, Any] = {"allocations": {
            uuid[pid]: {"resources": res}
            for pid, res in cand.allocs.items()}}
        if version >= (1, 34):
            item["mappings"] = {s: sorted(uuid[p] for p in pids)
                                for s, pids in cand.mappings.items()}
        requests.append(item)
    return {"allocation_requests": requests,
            "provider_summaries": _summaries(result, groups, version)}


def _summaries(result: Result, groups: list[RequestGroup],
               version: tuple[int, int]) -> dict[str, Any]:
    wanted = {rc for g in groups for rc in g.resources}
    every_class = version >= (1, 27)
    out: dict[str, Any] = {}
    for summary in result.summaries.values():
        body: dict[str, Any] = {"resources": {
            rc: {"capacity": cap, "used": used}
            for rc, (cap, used) in summary.resources.items()
            if every_class or rc in wanted}}
        if version >= (1, 17):
            body["traits"] = summary.traits
        if version >= (1, 29):
            body["parent_provider_uuid"] = summary.parent_uuid
            body["root_provider_uuid"] = summary.root_uuid
        out[summary.uuid] = body
    return out
