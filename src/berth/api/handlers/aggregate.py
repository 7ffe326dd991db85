"""``/resource_providers/{uuid}/aggregates`` (microversion 1.1 on)."""

from __future__ import annotations

from typing import Any

import falcon

from berth.api import util
from berth.api.schemas import aggregate as schema
from berth.api.schemas import pick
from berth.domain import aggregate, resource_provider

POLICY = "placement:resource_providers:aggregates:%s"


def _send(req: falcon.Request, resp: falcon.Response, uuids: list[str], generation: int) -> None:
    body: dict[str, Any] = {"aggregates": uuids}
    if util.want(req, "1.19"):
        body["resource_provider_generation"] = generation
    # Memberships carry no timestamp of their own, so last-modified is
    # "now", as upstream sends it.
    util.send(req, resp, body)


def get_aggregates(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the provider's aggregates (and its generation from
    1.19); 403 unless policy allows the caller; 404 when no provider has
    that uuid; 406 when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "list")

    def work(conn: Any) -> tuple[list[str], int]:
        row = resource_provider.load_provider(conn, uuid)
        return (aggregate.provider_aggregates(conn, row.id), int(row.generation))

    uuids, generation = util.db(req).read(work)
    _send(req, resp, uuids, generation)


def set_aggregates(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the aggregates as stored (and the new generation from
    1.19); 400 for a body the schema refuses; 403 unless policy allows
    the caller; 404 when no provider has that uuid; 409 when the
    generation is stale (from 1.19); 415 unless the body is JSON."""
    util.authorize(req, POLICY % "update")
    # Upstream answers 404 for an unknown provider before reading the body.
    data = util.parse_or_not_found(
        req,
        lambda: util.json_body(req, pick(schema.PUT_BODIES, req.context.version)),
        lambda conn: resource_provider.load_provider(conn, uuid),
    )
    if util.want(req, "1.19"):  # the list and the generation
        wanted, generation = (data["aggregates"], data["resource_provider_generation"])
    else:  # the bare list
        wanted, generation = data, None
    stored, new_generation = util.db(req).run(
        lambda conn: aggregate.set_aggregates(conn, uuid, wanted, generation)
    )
    _send(req, resp, stored, new_generation)
