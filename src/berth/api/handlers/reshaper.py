"""``POST /reshaper``: move inventory and allocations atomically (1.30)."""

from __future__ import annotations

from typing import Any

import falcon

from berth.api import util
from berth.api.schemas import pick
from berth.api.schemas import reshaper as schema
from berth.domain import common, inventory, reshaper
from berth.domain.allocation import ConsumerAllocations

POLICY = "placement:reshaper:reshape"


def _uuid(value: str) -> str:
    return common.normalize_uuid(value) or value


def _inventories(data: dict[str, Any]) -> dict[str, reshaper.ProviderInventory]:
    return {
        _uuid(uuid): reshaper.ProviderInventory(
            body["resource_provider_generation"],
            {rc: inventory.make_inventory(rec) for rc, rec in body["inventories"].items()},
        )
        for uuid, body in data.items()
    }


def _requests(data: dict[str, Any]) -> list[ConsumerAllocations]:
    # From 1.30 every consumer names its project, user and generation;
    # "mappings" (1.34) are validated and not stored, as for
    # POST /allocations.
    return [
        ConsumerAllocations(
            consumer_uuid=consumer,
            allocations={rp: dict(entry["resources"]) for rp, entry in body["allocations"].items()},
            project_id=body["project_id"],
            user_id=body["user_id"],
            generation=body["consumer_generation"],
            check_generation=True,
            consumer_type=body.get("consumer_type"),
        )
        for consumer, body in data.items()
    ]


def reshape(req: falcon.Request, resp: falcon.Response) -> None:
    """204 (every inventory and allocation moved, or nothing); 400 for a
    body the schema refuses, or an unknown provider or class; 403 unless
    policy allows the caller; 409 when a provider or consumer generation
    is stale, allocations do not fit, or a removed class is still
    allocated; 415 unless the body is JSON."""
    util.require_json(req)
    util.authorize(req, POLICY)
    data = util.json_body(req, pick(schema.SCHEMAS, req.context.version))
    wanted = _inventories(data["inventories"])
    requests = _requests(data["allocations"])
    util.db(req).run(lambda conn: reshaper.reshape(conn, wanted, requests))
    util.no_content(resp)
